/*
 * rv_wait.c: how fibers wait in the loop, and how the loop switches into
 * them.
 *
 * A fiber waits by calling rv_wait with an rv_waiter on its own stack; the
 * wait switches to the root fiber, and the loop switches back when a timer,
 * descriptor, message or unblock makes the waiter ready. Every switch is a
 * Fiber#transfer.
 */
#include "rv_internal.h"

#include <string.h>

#define L rv_L

/* ---- waiting ---- */

/* What a fiber does as it starts to wait, before it is suspended: a
 * request's own fiber has duties there (rv_stream.c), which this file does
 * not know of. */
static void (*before_wait)(rv_waiter *w);

void rv_wait_hook(void (*f)(rv_waiter *w))
{
    before_wait = f;
}

void rv_waiter_init(rv_waiter *w, int reason)
{
    memset(w, 0, sizeof *w);
    w->reason = reason;
    w->fd = -1;
    w->result = Qnil;
    w->held = Qnil;
    w->fiber = Qnil;
}

static void waiter_timer_fired(rv_timer *t)
{
    rv_waiter *w = (rv_waiter *)((char *)t - offsetof(rv_waiter, timer));
    rv_make_ready(w, w->result);
}

static void waiter_detach(rv_waiter *w)
{
    rv_ready_unlink(w);
    rv_timer_remove(&L->timers, &w->timer);
    rv_fd_unwatch(w);
}

struct switch_args {
    rv_waiter *w;
    VALUE target;
};

static VALUE wait_switch(VALUE arg)
{
    struct switch_args *a = (struct switch_args *)arg;
    rb_fiber_transfer(a->target, 0, NULL);
    return a->w->result;
}

static VALUE wait_cleanup(VALUE arg)
{
    rv_waiter *w = (rv_waiter *)arg;
    st_data_t key = (st_data_t)w->fiber;
    waiter_detach(w);
    st_delete(L->waiting, &key, NULL);
    if (w->stream && w->stream->waiter == w)
        w->stream->waiter = NULL;
    w->state = RV_W_IDLE;
    return Qnil;
}

/* Suspends the current fiber until the waiter is made ready (its result is
 * returned) or interrupted (the exception is raised here). A non-root target
 * runs that fiber first; the caller is then ready to continue at once. */
VALUE rv_wait_switching(rv_waiter *w, VALUE target)
{
    VALUE fiber = rb_fiber_current();
    if (fiber == L->root_fiber)
        rb_raise(rv_eFiberError, "ruvoy: the event loop's fiber cannot wait");
    w->fiber = fiber;

    if (before_wait)
        before_wait(w);
    if (L->pending->num_entries) {
        st_data_t key = (st_data_t)fiber, exc;
        if (st_delete(L->pending, &key, &exc)) {
            if (!w->uninterruptible) {
                if (w->stream)
                    w->stream->waiter = NULL;
                rb_exc_raise((VALUE)exc);
            }
            w->held = (VALUE)exc;
        }
    }

    w->state = RV_W_WAITING;
    st_insert(L->waiting, (st_data_t)fiber, (st_data_t)w);
    if (w->timer.deadline) {
        w->timer.fire = waiter_timer_fired;
        rv_timer_add(&L->timers, &w->timer);
    }
    if (w->fd >= 0)
        rv_fd_watch(w);
    if (target != L->root_fiber)
        rv_make_ready(w, w->result);

    struct switch_args a = {w, target};
    VALUE result = rb_ensure(wait_switch, (VALUE)&a, wait_cleanup, (VALUE)w);
    if (!NIL_P(w->held))
        rb_exc_raise(w->held);
    return result;
}

VALUE rv_wait(rv_waiter *w)
{
    return rv_wait_switching(w, L->root_fiber);
}

/* ---- switching from the loop into fibers ---- */

static VALUE transfer_to(VALUE fiber)
{
    return rb_fiber_transfer(fiber, 0, NULL);
}

struct raise_args {
    VALUE fiber, exc;
};

static VALUE raise_in(VALUE arg)
{
    struct raise_args *a = (struct raise_args *)arg;
    return rb_funcall(a->fiber, rv_id_raise, 1, a->exc);
}

void rv_report_escape(const char *what)
{
    VALUE exc = rb_errinfo();
    rb_set_errinfo(Qnil);
    rv_log_exception(NULL, what, exc);
}

/* Ruby code has the thread from now until it hands it back to the loop. */
static void running(rv_stream *s)
{
    L->current = s;
    atomic_store_explicit(&rv_stat.held_stream, s ? s->id : 0, memory_order_relaxed);
    atomic_store(&rv_stat.held_since, rv_now());
}

static void back_in_loop(void)
{
    L->current = NULL;
    atomic_store(&rv_stat.held_since, 0);
    atomic_store_explicit(&rv_stat.held_stream, 0, memory_order_relaxed);
}

/* The running fiber goes on as no request's: its request ended while it
 * kept the connection (rv_hijack.c). */
void rv_run_alone(void)
{
    running(NULL);
}

void rv_resume(rv_waiter *w)
{
    running(w->stream);
    int state = 0;
    rb_protect(transfer_to, w->fiber, &state);
    back_in_loop();
    if (state)
        rv_report_escape("an exception escaped a fiber");
}

struct start_args {
    VALUE fiber, index;
};

static VALUE start_in(VALUE arg)
{
    struct start_args *a = (struct start_args *)arg;
    return rb_fiber_transfer(a->fiber, NIL_P(a->index) ? 0 : 1, &a->index);
}

/* Runs a request's fiber until it first waits or ends: a new one, or a
 * parked one (rv_fiber_cache.c), which is handed the request's index.
 * Returns 0 when the switch itself failed before the fiber took the
 * request (Ruby maps a new fiber's stack at its first switch, and under a
 * memory limit that raises FiberError): the request is then still the
 * caller's to answer, and the exception is left in rb_errinfo. */
int rv_run_fiber(rv_stream *s, VALUE fiber, VALUE index)
{
    uint32_t at = s->index; /* s is freed if the request ends meanwhile */
    running(s);
    int state = 0;
    struct start_args a = {fiber, index};
    rb_protect(start_in, (VALUE)&a, &state);
    back_in_loop();
    if (!state)
        return 1;
    if (L->streams[at] == s && !s->started)
        return 0;
    rv_report_escape("an exception escaped a request fiber");
    return 1;
}

/* Raises exc in fiber at the point where it waits. A fiber that cannot take
 * it now (it is not waiting in the scheduler, or its wait is one that must
 * finish) gets it at its next wait, or when the wait ends. */
void rv_interrupt(VALUE fiber, VALUE exc)
{
    st_data_t found;
    if (!st_lookup(L->waiting, (st_data_t)fiber, &found)) {
        st_insert(L->pending, (st_data_t)fiber, (st_data_t)exc);
        return;
    }
    rv_waiter *w = (rv_waiter *)found;
    if (w->uninterruptible) {
        if (NIL_P(w->held))
            w->held = exc;
        return;
    }
    waiter_detach(w);
    w->state = RV_W_IDLE;
    struct raise_args a = {fiber, exc};
    running(w->stream);
    int state = 0;
    rb_protect(raise_in, (VALUE)&a, &state);
    back_in_loop();
    if (state)
        rv_report_escape("an exception escaped a fiber");
}
