/*
 * rv_stream.c: a request's state on the VM thread, and the messages Go sends
 * to it after the head (body chunks, credits, cancel, done).
 *
 * Streams sit in a table by index, the low 32 bits of the stream id;
 * Go picks the index and does not reuse it until the VM said FINAL, so a
 * message whose id does not match the index's stream is for one that ended.
 */
#include "rv_internal.h"

#include <stdlib.h>

#define L rv_L

rv_stream *rv_stream_find(uint64_t id)
{
    uint32_t index = RV_INDEX(id);
    if (index >= L->nstreams)
        return NULL;
    rv_stream *s = L->streams[index];
    return s && s->id == id ? s : NULL;
}

/* Hands a finished out message to Go. Bytes for a client that left are
 * dropped here; the final message always goes, it frees Go's index. */
void rv_stream_push(rv_stream *s, rv_msg *m)
{
    if (s->cancelled && !(m->flags & RV_FLAG_FINAL) && m->kind != RV_OUT_LOG) {
        rv_msg_free(m);
        return;
    }
    if (m->kind == RV_OUT_HEAD || m->kind == RV_OUT_FILE)
        s->head_sent = 1;
    rv_to_go_push(m);
}

/* Pushes the response message under construction; its body bytes now count
 * against the stream's window until Go credits them. */
void rv_stream_flush(rv_stream *s)
{
    if (!s->out.m)
        return;
    s->inflight += s->out_body;
    atomic_fetch_add_explicit(&rv_stat.response_bytes, s->out_body, memory_order_relaxed);
    s->out_body = 0;
    rv_stream_push(s, rv_buf_finish(&s->out));
}

static void wake(rv_stream *s, rv_waiter *w)
{
    (void)s;
    if (w)
        rv_make_ready(w, Qtrue);
}

void rv_stream_deliver(rv_msg *m)
{
    rv_stream *s = rv_stream_find(m->stream);
    if (!s) {
        rv_msg_free(m);
        return;
    }
    switch (m->kind) {
    case RV_IN_BODY:
        m->next = NULL;
        if (s->in_last)
            s->in_last->next = m;
        else
            s->in_first = m;
        s->in_last = m;
        wake(s, s->input_waiter);
        return; /* the chunk is kept until the app reads it */
    case RV_IN_BODY_END:
        s->in_state = m->flags & RV_FLAG_TOO_LARGE ? RV_BODY_TOO_LARGE
                      : m->flags & RV_FLAG_MALFORMED ? RV_BODY_MALFORMED
                      : m->flags & RV_FLAG_ERROR   ? RV_BODY_FAILED
                                                : RV_BODY_EOF;
        wake(s, s->input_waiter);
        break;
    case RV_IN_CREDIT: {
        uint64_t credit = m->aux < s->inflight ? m->aux : s->inflight;
        s->inflight -= credit;
        atomic_fetch_sub_explicit(&rv_stat.response_bytes, credit, memory_order_relaxed);
        if (s->inflight < s->window)
            wake(s, s->credit_waiter);
        break;
    }
    case RV_IN_DONE:
        s->done = 1;
        s->done_error = (m->flags & RV_FLAG_ERROR) != 0;
        wake(s, s->done_waiter);
        break;
    case RV_IN_CANCEL: {
        if (s->cancelled)
            break;
        /* Go answered 400 for a malformed body itself: the app hears why. */
        int malformed = (m->flags & RV_FLAG_MALFORMED) != 0;
        s->cancelled = malformed ? RV_CANCEL_MALFORMED : RV_CANCEL_GONE;
        if (s->in_state == RV_BODY_OPEN)
            s->in_state = malformed ? RV_BODY_MALFORMED : RV_BODY_FAILED;
        wake(s, s->done_waiter);
        if (s->finishing)
            break; /* the app is done; only the after-reply hooks are left */
        if (s->waiter)
            rv_interrupt(s->fiber, rv_cancel_exception(s));
        else
            s->interrupt_pending = 1;
        break;
    }
    }
    rv_msg_free(m);
}

/* The exception a cancelled request's fiber gets where it waits or writes. */
VALUE rv_cancel_exception(rv_stream *s)
{
    if (s->cancelled == RV_CANCEL_MALFORMED)
        return rb_exc_new_cstr(rv_eBadRequest, "the request body is malformed; the server answered 400");
    return rb_exc_new_cstr(rv_eClientDisconnected, "the client went away");
}

/* The exception an interruption raises. */
VALUE rv_interrupt_exception(rv_stream *s)
{
    switch (s->interrupt) {
    case RV_INTR_TIMEOUT:
        return rb_exc_new_cstr(rv_eRequestTimeout, "the request ran longer than its request timeout");
    case RV_INTR_SHUTDOWN:
        return rb_exc_new_cstr(rv_eShutdown, "the server is stopping and the grace period is over");
    }
    return s->interrupt_exc;
}

/* The exception a request's fiber gets at its next wait: the client's
 * going (or its malformed body) first, else an interruption. */
VALUE rv_pending_exception(rv_stream *s)
{
    if (s->cancelled || !s->interrupt)
        return rv_cancel_exception(s);
    s->interrupt_delivered = 1;
    return rv_interrupt_exception(s);
}

/* A request's own fiber starts to wait: what it wrote goes to Go, and an
 * exception it has pending is raised here instead (rv_wait_hook). */
static void request_waits(rv_waiter *w)
{
    rv_stream *s = L->current;
    if (!s || s->fiber != w->fiber)
        return;
    rv_stream_flush(s);
    if (s->interrupt_pending && !w->uninterruptible) {
        s->interrupt_pending = 0;
        rb_exc_raise(rv_pending_exception(s));
    }
    w->stream = s;
    s->waiter = w;
}

void rv_stream_init(void)
{
    rv_wait_hook(request_waits);
}

static VALUE wait_body(VALUE w)
{
    return rv_wait((rv_waiter *)w);
}

/* Waits on the stream's own event (input, credit or done). The caller
 * rechecks its condition: a wake is a hint, not a promise. */
void rv_stream_wait(rv_stream *s, rv_waiter **where, int reason)
{
    if (rb_thread_current() != L->thread)
        rb_raise(rb_eThreadError, "ruvoy: a request's body and response can only be used on the server thread");
    rv_waiter w;
    rv_waiter_init(&w, reason);
    if (*where)
        rb_raise(rb_eThreadError, "ruvoy: two fibers wait on the same request stream");
    *where = &w;
    rb_ensure(wait_body, (VALUE)&w, rv_stream_wait_done, (VALUE)where);
}

VALUE rv_stream_wait_done(VALUE where)
{
    *(rv_waiter **)where = NULL;
    return Qnil;
}

/* The message that ends the response: a reset if the body failed after the
 * head went out, else what is left of it marked END. */
static rv_msg *closing_message(rv_stream *s)
{
    if (s->reset) {
        if (s->out.m)
            rv_msg_free(rv_buf_finish(&s->out));
        s->reset = 0;
        s->ended = 1;
        return rv_msg_new(RV_OUT_RESET, s->id, RV_FLAG_END, 0, 0);
    }
    if (s->ended)
        return rv_msg_new(RV_OUT_END, s->id, 0, 0, 0);
    s->ended = 1;
    if (s->out.m) {
        rv_msg *m = rv_buf_finish(&s->out);
        m->flags |= RV_FLAG_END;
        return m;
    }
    return rv_msg_new(RV_OUT_END, s->id, RV_FLAG_END, 0, 0);
}

/* Ends the response now and asks Go to say when it is written. */
void rv_stream_end(rv_stream *s)
{
    rv_msg *m = closing_message(s);
    m->flags |= RV_FLAG_WANT_DONE;
    rv_stream_push(s, m);
}

static VALUE release_input(VALUE input)
{
    return rb_funcall(input, rb_intern("_release"), 0);
}

/* Ends the stream: tells Go the VM is done with it and frees everything. */
void rv_stream_finish(rv_stream *s)
{
    if (!NIL_P(s->input)) {
        int state = 0;
        rb_protect(release_input, s->input, &state); /* its temporary file */
        if (state)
            rb_set_errinfo(Qnil);
    }
    rv_msg *m = closing_message(s);
    m->flags |= RV_FLAG_FINAL;
    rv_stream_push(s, m);

    for (rv_msg *c = s->in_first, *next; c; c = next) {
        next = c->next;
        rv_msg_free(c);
    }
    rv_msg_free(s->request);
    atomic_fetch_sub_explicit(&rv_stat.response_bytes, s->inflight, memory_order_relaxed);
    L->streams[s->index] = NULL;
    L->live--;
    atomic_store_explicit(&rv_stat.requests, L->live, memory_order_relaxed);
    free(s);
    if (!L->live)
        rv_gc_idle_quiet();
}
