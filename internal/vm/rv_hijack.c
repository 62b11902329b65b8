/*
 * rv_hijack.c: handing a request's connection to the app (rack.hijack).
 *
 * Full hijack: env["rack.hijack"].call (lib/ruvoy/hijack.rb) asks Go for
 * the connection with an RV_OUT_HIJACK without payload. Partial hijack (a
 * rack.hijack response header) and a Rack 3 upgrade (a 101 whose body
 * responds to call) send the response head in the RV_OUT_HIJACK: Go writes
 * it first. Either way the fiber waits for RV_IN_HIJACKED, which carries
 * the descriptor of the connection (the client's own socket, or one end of
 * a socket pair Go pumps to and from the client; hijack.go), and the
 * request then ends for the server:
 * its stream is finished, so its admission place and window go back, and
 * the fiber goes on with the IO alone, as no request's.
 */
#include "rv_internal.h"

#include <unistd.h>

#define L rv_L

static VALUE k_hijack_io;
static ID id_hijack_io, id_hijacked_count;
static int any; /* a connection was hijacked: rv_hijack_count counts */

struct take {
    rv_stream *s;
    rv_waiter w;
};

static VALUE take_wait(VALUE arg)
{
    return rv_wait(&((struct take *)arg)->w);
}

/* A reply that arrived while the wait was being given up (an exception)
 * still carries a descriptor: it is closed, as nobody will use it. */
static VALUE take_done(VALUE arg)
{
    struct take *t = (struct take *)arg;
    if (rv_stream_find(t->s->id) == t->s && t->s->hijack_waiter == &t->w)
        t->s->hijack_waiter = NULL;
    return Qnil;
}

static void drop_reply(rv_msg *m)
{
    if (!(m->flags & RV_FLAG_FAILED))
        close((int)m->aux);
    rv_msg_free(m);
}

static VALUE wrap_fd(VALUE arg)
{
    rv_msg *reply = (rv_msg *)arg;
    return rb_funcall(rv_mRuvoy, id_hijack_io, 2, INT2NUM((int)reply->aux), (reply->flags & RV_FLAG_TCP) ? Qtrue : Qfalse);
}

/* Sends m (an RV_OUT_HIJACK) and waits for the connection: returns the IO
 * of the app's end, or raises. */
static VALUE take_connection(rv_stream *s, rv_msg *m)
{
    struct take t = {.s = s};
    rv_waiter_init(&t.w, RV_WAIT_OTHER);
    s->hijack_waiter = &t.w;
    s->head_sent = 1; /* nothing else goes out for this response */
    rv_to_go_push(m);
    int state = 0;
    rb_protect(take_wait, (VALUE)&t, &state);
    take_done((VALUE)&t);
    rv_msg *reply = t.w.reply;
    if (state) {
        if (reply)
            drop_reply(reply);
        rb_jump_tag(state);
    }
    if (!reply)
        rb_raise(rb_eIOError, "ruvoy: the connection could not be handed over");
    if (reply->flags & RV_FLAG_FAILED) {
        VALUE why = rb_str_new(reply->data, (long)reply->len);
        rv_msg_free(reply);
        rb_raise(rb_eIOError, "ruvoy: the connection could not be handed over: %" PRIsVALUE, why);
    }
    VALUE io = rb_protect(wrap_fd, (VALUE)reply, &state);
    if (state) {
        drop_reply(reply);
        rb_jump_tag(state);
    }
    rv_msg_free(reply);
    any = 1;
    return io;
}

/* Ruvoy._hijack(id): a full hijack of the request's connection. */
static VALUE hijack(VALUE self, VALUE id)
{
    (void)self;
    rv_stream *s = rv_stream_find(NUM2ULL(id));
    if (!s || L->current != s)
        rb_raise(rb_eIOError, "ruvoy: rack.hijack is called once, from the request's own fiber");
    if (!(s->request->data[RV_REQ_FLAGS_AT] & RV_REQ_HIJACK))
        rb_raise(rb_eNotImpError, "ruvoy: this request's connection cannot be hijacked (HTTP/2, HTTP/3, or a request with a body)");
    if (s->cancelled)
        rb_exc_raise(rv_cancel_exception(s));
    if (s->head_sent || s->out.m)
        rb_raise(rb_eIOError, "ruvoy: the response has begun: the connection can no longer be hijacked");
    VALUE io = take_connection(s, rv_msg_new(RV_OUT_HIJACK, s->id, 0, (uint64_t)s->queued_us << RV_AUX_QUEUED_SHIFT, 0));
    rb_hash_aset(s->env, k_hijack_io, io);
    rv_stream_finish(s);
    rv_run_alone();
    return io;
}

/* The app answered with a head to write before the connection is its
 * own (partial hijack, or a Rack 3 upgrade): the head built in s->out
 * goes as the RV_OUT_HIJACK. The callable is called by rv_hijack_run. */
void rv_hijack_respond(rv_stream *s, VALUE callable)
{
    rv_msg *m = rv_buf_finish(&s->out);
    m->kind = RV_OUT_HIJACK;
    s->hijack_io = take_connection(s, m);
    s->hijack_call = callable;
}

static VALUE call_callable(VALUE arg)
{
    VALUE *a = (VALUE *)arg;
    return rb_funcall(a[0], rv_id_call, 1, a[1]);
}

/* Ends the request whose connection the app took, and calls its callable
 * with the IO, if it gave one, as no request's fiber. */
void rv_hijack_run(rv_stream *s)
{
    VALUE a[2] = {s->hijack_call, s->hijack_io};
    rv_stream_finish(s);
    rv_run_alone();
    if (NIL_P(a[0]))
        return;
    int state = 0;
    rb_protect(call_callable, (VALUE)a, &state);
    if (state) {
        VALUE exc = rb_errinfo();
        rb_set_errinfo(Qnil);
        rv_log_exception(NULL, "the callable given the hijacked connection raised", exc);
    }
    RB_GC_GUARD(a[0]);
    RB_GC_GUARD(a[1]);
}

/* RV_IN_HIJACKED: to the fiber waiting for it; else its descriptor is
 * closed. */
void rv_hijack_deliver(rv_msg *m)
{
    rv_stream *s = rv_stream_find(m->stream);
    rv_waiter *w = s ? s->hijack_waiter : NULL;
    if (!w || w->state != RV_W_WAITING || w->reply) {
        drop_reply(m);
        return;
    }
    w->reply = m;
    rv_make_ready(w, Qtrue);
}

static VALUE count(VALUE unused)
{
    (void)unused;
    return rb_funcall(rv_mRuvoy, id_hijacked_count, 0);
}

/* How many hijacked connections the app holds open, for the metrics: at
 * each tick of the loop, once any was handed over. Ruby keeps
 * them in a weak map (lib/ruvoy/hijack.rb): an IO the app drops is
 * collected and closed. */
void rv_hijack_count(void)
{
    if (!any)
        return;
    int state = 0;
    VALUE n = rb_protect(count, Qnil, &state);
    if (state) {
        rb_set_errinfo(Qnil);
        return;
    }
    atomic_store_explicit(&rv_stat.hijacked, NUM2ULL(n), memory_order_relaxed);
}

void rv_hijack_init(void)
{
    k_hijack_io = rb_interned_str_cstr("rack.hijack_io");
    rb_gc_register_mark_object(k_hijack_io);
    id_hijack_io = rb_intern("_hijack_io");
    id_hijacked_count = rb_intern("_hijacked_count");
    rb_define_module_function(rv_mRuvoy, "_hijack", hijack, 1);
}

static VALUE close_returned(VALUE response)
{
    VALUE ary = rb_check_array_type(response);
    if (!NIL_P(ary) && RARRAY_LEN(ary) == 3) {
        VALUE body = rb_ary_entry(ary, 2);
        if (rb_respond_to(body, rv_id_close))
            rb_funcall(body, rv_id_close, 0);
    }
    return Qnil;
}

/* What an app returns after a full hijack is not sent (Rack's SPEC); its
 * body is closed. An exception it raised is logged. */
void rv_hijack_returned(VALUE response, int state)
{
    if (!state)
        rb_protect(close_returned, response, &state);
    if (state) {
        VALUE exc = rb_errinfo();
        rb_set_errinfo(Qnil);
        rv_log_exception(NULL, "the app raised after it hijacked the connection", exc);
    }
}
