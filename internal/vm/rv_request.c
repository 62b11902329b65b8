/*
 * rv_request.c: one request's fiber, from the head Go sent to the final
 * message: build the env, call the app, send the response, run the
 * after-reply hooks. Every exception is caught here: one that escaped a
 * fiber would surface in the event loop instead.
 */
#include "rv_internal.h"

#include <stdlib.h>

#define L rv_L

static VALUE k_after_reply, k_response_finished;

static VALUE new_fiber(VALUE index)
{
    return rb_block_call(rv_cFiber, rv_id_new, 0, NULL, rv_request_main, index);
}

/* A request no fiber could take: 503, with the exception (in rb_errinfo)
 * logged. */
static void refuse_unstarted(rv_stream *s, const char *what)
{
    VALUE exc = rb_errinfo();
    rb_set_errinfo(Qnil);
    rv_log_exception(s, what, exc);
    rv_respond_error(s, 503);
    rv_stream_finish(s);
}

void rv_request_start(rv_msg *m)
{
    uint32_t index = RV_INDEX(m->stream);
    if (index >= L->nstreams || L->streams[index]) {
        rv_log(RV_LOG_ERROR, "ruvoy bug: a request arrived for a index in use", 0, NULL);
        rv_to_go_push(rv_msg_new(RV_OUT_RESET, m->stream, RV_FLAG_END | RV_FLAG_FINAL, 0, 0));
        rv_msg_free(m);
        return;
    }
    if (atomic_load_explicit(&L->cancelled[index], memory_order_relaxed) == m->stream) {
        /* Its client left while it waited in the inbox: no Ruby work. */
        rv_to_go_push(rv_msg_new(RV_OUT_RESET, m->stream, RV_FLAG_END | RV_FLAG_FINAL, 0, 0));
        rv_msg_free(m);
        return;
    }
    rv_stream *s = calloc(1, sizeof *s);
    if (!s)
        abort();
    s->id = m->stream;
    s->index = index;
    s->request = m;
    s->window = L->window;
    s->fiber = s->env = s->response = s->input = s->interrupt_exc = s->hijack_io = s->hijack_call = Qnil;
    long app = (long)m->aux;
    s->app = app >= 1 && app <= RARRAY_LEN(L->apps) ? rb_ary_entry(L->apps, app - 1) : Qnil;
    L->streams[index] = s;
    L->live++;
    atomic_store_explicit(&rv_stat.requests, L->live, memory_order_relaxed);
    rv_gc_idle_busy();
    if (NIL_P(s->app)) {
        rv_respond_error(s, 503);
        rv_stream_finish(s);
        return;
    }
    VALUE fiber = rv_fiber_take(), handed = INT2FIX(index);
    if (NIL_P(fiber)) {
        int state = 0;
        fiber = rb_protect(new_fiber, INT2FIX(index), &state);
        if (state) {
            refuse_unstarted(s, "no fiber could be made for the request");
            return;
        }
        handed = Qnil; /* a new fiber has its index from its block */
    }
    s->fiber = fiber;
    if (!rv_run_fiber(s, fiber, handed)) {
        s->fiber = Qnil;
        refuse_unstarted(s, "the request's fiber could not start");
    }
}

static VALUE build_env(VALUE s)
{
    return rv_env_build((rv_stream *)s);
}

/* How long the request waited, from its head's arrival to the app's call:
 * for places, for a worker, for the VM thread (the head says it). */
static uint32_t queued_us(const rv_stream *s)
{
    uint64_t now = rv_now();
    if (!s->arrived || now <= s->arrived)
        return 0;
    uint64_t us = (now - s->arrived) / 1000;
    return us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static VALUE call_app(VALUE arg)
{
    rv_stream *s = (rv_stream *)arg;
    return rb_funcall(s->app, rv_id_call, 1, s->env);
}

static VALUE respond(VALUE arg)
{
    rv_stream *s = (rv_stream *)arg;
    rv_respond(s, s->env, s->response);
    return Qnil;
}

/* ---- after the response: rack.after_reply and rack.response_finished ---- */

struct hooks {
    rv_stream *s;
    VALUE after_reply, finished, error;
};

static VALUE lookup_hooks(VALUE arg)
{
    struct hooks *h = (struct hooks *)arg;
    h->after_reply = rb_hash_lookup(h->s->env, k_after_reply);
    h->finished = rb_hash_lookup(h->s->env, k_response_finished);
    return Qnil;
}

static int has_hooks(VALUE ary)
{
    return RB_TYPE_P(ary, T_ARRAY) && RARRAY_LEN(ary) > 0;
}

struct hook_call {
    VALUE hook;
    int argc;
    const VALUE *argv;
};

static VALUE call_hook(VALUE arg)
{
    struct hook_call *c = (struct hook_call *)arg;
    return rb_funcallv(c->hook, rv_id_call, c->argc, c->argv);
}

static void run_list(rv_stream *s, VALUE ary, int argc, const VALUE *argv, const char *what)
{
    if (!has_hooks(ary))
        return;
    for (long i = 0; i < RARRAY_LEN(ary); i++) {
        struct hook_call c = {rb_ary_entry(ary, i), argc, argv};
        int state = 0;
        rb_protect(call_hook, (VALUE)&c, &state);
        if (state) {
            VALUE exc = rb_errinfo();
            rb_set_errinfo(Qnil);
            rv_log_exception(s, what, exc);
        }
    }
}

static void run_hooks(struct hooks *h)
{
    rv_stream *s = h->s;
    VALUE status = Qnil, headers = Qnil;
    if (NIL_P(h->error) && RB_TYPE_P(s->response, T_ARRAY) && RARRAY_LEN(s->response) == 3) {
        status = rb_ary_entry(s->response, 0);
        headers = rb_ary_entry(s->response, 1);
    }
    VALUE args[4] = {s->env, status, headers, h->error};
    run_list(s, h->after_reply, 0, NULL, "a rack.after_reply hook raised");
    run_list(s, h->finished, 4, args, "a rack.response_finished hook raised");
}

static void after_reply(rv_stream *s, VALUE exc)
{
    if (NIL_P(s->env))
        return;
    struct hooks h = {s, Qnil, Qnil, exc};
    int state = 0;
    rb_protect(lookup_hooks, (VALUE)&h, &state);
    if (state) {
        rb_set_errinfo(Qnil);
        return;
    }
    if (!has_hooks(h.after_reply) && !has_hooks(h.finished))
        return;
    rv_stream_end(s);
    while (!s->done && !s->cancelled)
        rv_stream_wait(s, &s->done_waiter, RV_WAIT_DONE);
    if (NIL_P(h.error) && s->cancelled)
        h.error = rv_cancel_exception(s);
    else if (NIL_P(h.error) && s->done_error)
        h.error = rb_exc_new_cstr(rv_eClientDisconnected, "the client went away before the response was written");
    run_hooks(&h);
}

static void serve(rv_stream *s)
{
    uint64_t id = s->id;
    s->started = 1;
    int state = 0;
    VALUE exc = Qnil;
    s->env = rb_protect(build_env, (VALUE)s, &state);
    if (!state) {
        s->queued_us = queued_us(s);
        VALUE response = rb_protect(call_app, (VALUE)s, &state);
        if (!rv_stream_find(id)) {
            /* The app took the connection (env["rack.hijack"]): the
             * request ended then. */
            rv_hijack_returned(response, state);
            return;
        }
        s->response = response;
    }
    if (!state)
        rb_protect(respond, (VALUE)s, &state);
    if (state) {
        exc = rb_errinfo();
        rb_set_errinfo(Qnil);
        rv_request_failed(s, exc, "the app raised");
    } else if (!NIL_P(s->hijack_io)) {
        rv_hijack_run(s); /* a partial hijack or an upgrade */
        return;
    }
    s->finishing = 1;
    after_reply(s, exc);
    rv_stream_finish(s);
}

/* The body of every request fiber: serves its first request, then, parked
 * in the fiber cache, each next one it is given. */
VALUE rv_request_main(RB_BLOCK_CALL_FUNC_ARGLIST(yielded, index))
{
    (void)yielded, (void)argc, (void)argv, (void)blockarg;
    do
        serve(L->streams[FIX2INT(index)]);
    while (!NIL_P(index = rv_fiber_park()));
    return Qnil;
}

void rv_request_init(void)
{
    k_after_reply = rb_interned_str_cstr("rack.after_reply");
    k_response_finished = rb_interned_str_cstr("rack.response_finished");
    rb_gc_register_mark_object(k_after_reply);
    rb_gc_register_mark_object(k_response_finished);
}
