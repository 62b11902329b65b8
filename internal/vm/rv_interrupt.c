/*
 * rv_interrupt.c: ending a request from outside it (its timeout, the
 * server's shutdown, Rack::Timeout) by raising an exception in its fiber.
 *
 * A fiber that waits in the scheduler is interrupted by the event loop,
 * where it waits (rv_interrupt). One that holds the VM thread (Ruby code
 * that never yields) keeps the loop from running, so a Ruby thread of
 * ruvoy's own, the interrupter, does it: Go wakes it through a pipe; it
 * takes the GVL, which Ruby's timer takes from the running fiber within a
 * time slice (100 ms), and raises with Thread#raise on the VM thread; the
 * fiber gets the exception at its next interrupt check. While it holds the
 * GVL the VM thread is stopped at a safe point, so it may read which
 * request runs and mark that request's stream. Every interruption goes
 * both ways, as a message to the loop and as a word to the interrupter;
 * whichever finds the fiber first raises, once. The exception raised is the
 * stream's (rv_interrupt_exception, rv_stream.c); how a request it ended is
 * answered is the response's (rv_request_failed, rv_response.c).
 */
#include "rv_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define L rv_L

static int pipe_fds[2] = {-1, -1};

typedef struct word {
    uint64_t stream; /* 0: every request */
    uint32_t reason; /* RV_INTR_* */
    uint32_t pad;
} word;

static int can_interrupt(rv_stream *s)
{
    return s && !s->interrupt_delivered && !s->finishing && !s->cancelled && s->started;
}

/* In the loop: raise where the request's fiber waits, or at its next wait. */
static void deliver_waiting(rv_stream *s, uint32_t reason)
{
    if (!can_interrupt(s))
        return;
    if (!s->interrupt)
        s->interrupt = (int)reason;
    if (s->waiter && !s->waiter->uninterruptible) {
        s->interrupt_delivered = 1;
        rv_interrupt(s->fiber, rv_interrupt_exception(s));
    } else {
        s->interrupt_pending = 1;
    }
}

/* RV_IN_INTERRUPT: stream 0 is every request. */
void rv_interrupt_deliver(rv_msg *m)
{
    if (m->stream == 0) {
        for (uint32_t i = 0; i < L->nstreams; i++)
            if (L->streams[i])
                deliver_waiting(L->streams[i], (uint32_t)m->aux);
    } else {
        deliver_waiting(rv_stream_find(m->stream), (uint32_t)m->aux);
    }
    rv_msg_free(m);
}

/* On a thread other than the VM thread, holding the GVL: raise in the
 * request if it holds the VM thread now, else leave it to the loop. */
static void raise_if_running(rv_stream *s)
{
    if (!can_interrupt(s) || L->current != s)
        return;
    s->interrupt_delivered = 1;
    rb_funcall(L->thread, rv_id_raise, 1, rv_interrupt_exception(s));
}

/* ---- the interrupter thread ---- */

struct read_args {
    word w;
    ssize_t n;
};

static void *read_word(void *p)
{
    struct read_args *a = p;
    do
        a->n = read(pipe_fds[0], &a->w, sizeof a->w);
    while (a->n < 0 && errno == EINTR);
    return NULL;
}

static void unblock_read(void *p)
{
    (void)p;
    word stop = {.reason = RV_INTR_EXIT};
    if (write(pipe_fds[1], &stop, sizeof stop) < 0) {
        /* full: it has words to read and will see Ruby's interrupt */
    }
}

static VALUE interrupter(void *unused)
{
    (void)unused;
    for (;;) {
        struct read_args a;
        rb_thread_call_without_gvl(read_word, &a, unblock_read, NULL);
        if (a.n != (ssize_t)sizeof a.w || a.w.reason == RV_INTR_EXIT)
            return Qnil;
        if (a.w.stream == 0) {
            rv_stream *s = L->current;
            if (s && !s->interrupt)
                s->interrupt = (int)a.w.reason;
            raise_if_running(s);
        } else {
            rv_stream *s = rv_stream_find(a.w.stream);
            if (s && !s->interrupt)
                s->interrupt = (int)a.w.reason;
            raise_if_running(s);
        }
    }
}

/* From Go: interrupt a request (0: every request) for a reason. Never
 * blocks: a full pipe drops the word, and the loop still raises where the
 * fiber next waits. */
void rv_interrupt_request(uint64_t stream, uint32_t reason)
{
    rv_submit(RV_IN_INTERRUPT, stream, 0, reason, NULL, 0);
    word w = {.stream = stream, .reason = reason};
    if (pipe_fds[1] >= 0 && write(pipe_fds[1], &w, sizeof w) < 0) {
        /* EAGAIN: the interrupter is behind; the loop's message stands */
    }
}

/* ---- from Ruby (Rack::Timeout, lib/ruvoy/rack_timeout.rb) ---- */

/* Ruvoy._current_request: the request whose fiber runs, or nil. */
static VALUE current_request(VALUE self)
{
    (void)self;
    if (rb_thread_current() != L->thread || !L->current || L->current->fiber != rb_fiber_current())
        return Qnil;
    return ULL2NUM(L->current->id);
}

/* Ruvoy._raise_in_request(id, exception): from any Ruby thread, raise
 * exception in that request's fiber, whether it runs or waits. */
static VALUE raise_in_request(VALUE self, VALUE id, VALUE exc)
{
    (void)self;
    rv_stream *s = rv_stream_find(NUM2ULL(id));
    if (!can_interrupt(s) || s->interrupt)
        return Qfalse;
    s->interrupt = RV_INTR_RUBY;
    s->interrupt_exc = exc;
    if (rb_thread_current() == L->thread) {
        if (L->current == s && s->fiber == rb_fiber_current()) {
            s->interrupt_delivered = 1;
            rb_exc_raise(exc);
        }
        deliver_waiting(s, RV_INTR_RUBY);
        return Qtrue;
    }
    if (L->current == s) {
        raise_if_running(s);
        return Qtrue;
    }
    rv_inbox_push(&rv_to_vm, rv_msg_new(RV_IN_INTERRUPT, s->id, 0, RV_INTR_RUBY, 0));
    return Qtrue;
}

/* On the VM thread, once Ruvoy's library has loaded. */
void rv_interrupt_init(void)
{
    rb_define_module_function(rv_mRuvoy, "_current_request", current_request, 0);
    rb_define_module_function(rv_mRuvoy, "_raise_in_request", raise_in_request, 2);
    rv_interrupt_restart();
}

/* The pipe and the interrupter thread, at boot and in a forked worker. */
void rv_interrupt_restart(void)
{
    if (pipe_fds[0] >= 0) {
        close(pipe_fds[0]);
        close(pipe_fds[1]);
        pipe_fds[0] = pipe_fds[1] = -1;
    }
    if (pipe2(pipe_fds, O_CLOEXEC) < 0)
        return; /* the loop alone interrupts: a request that never yields is not */
    fcntl(pipe_fds[1], F_SETFL, O_NONBLOCK);
    VALUE thread = rb_thread_create(interrupter, NULL);
    rb_funcall(thread, rb_intern("name="), 1, rb_str_new_cstr("ruvoy-interrupter"));
    rb_gc_register_mark_object(thread);
}
