/*
 * rv_upstream.c: calls to upstreams (env["ruvoy.upstream"]).
 *
 * The calling fiber sends an RV_OUT_UPSTREAM message and waits in the
 * scheduler; Go makes the call through Caddy's reverse proxy and answers
 * with RV_IN_UPSTREAM_REPLY carrying the same call id. Calls from separate
 * fibers overlap. A caller that stops waiting (its client left, a Timeout)
 * tells Go, which drops the call; a late reply finds no waiter and is freed.
 *
 * The call and reply payloads are laid out in wire.h.
 */
#include "rv_internal.h"

#include <string.h>

#define L rv_L

VALUE rv_eUpstreamError;
static uint64_t next_call = 1;

static void put_value(rv_buf *b, VALUE v)
{
    StringValue(v);
    rv_buf_put_str(b, RSTRING_PTR(v), (size_t)RSTRING_LEN(v));
}

struct call {
    rv_waiter w;
    uint64_t id;
    uint64_t stream;
};

static VALUE call_wait(VALUE arg)
{
    return rv_wait(&((struct call *)arg)->w);
}

static VALUE call_done(VALUE arg)
{
    struct call *c = (struct call *)arg;
    st_data_t key = (st_data_t)c->id;
    st_delete(L->calls, &key, NULL);
    if (!c->w.reply) /* the caller stopped waiting: Go can drop the call */
        rv_to_go_push(rv_msg_new(RV_OUT_UPSTREAM_CANCEL, c->stream, 0, c->id, 0));
    return Qnil;
}

static VALUE read_str(rv_reader *r)
{
    const char *p;
    long n;
    if (!rv_read_str(r, &p, &n) || n < 0)
        rb_raise(rv_eUpstreamError, "ruvoy: truncated upstream reply");
    return rb_str_new(p, n);
}

static uint16_t read_u16(rv_reader *r)
{
    uint16_t v;
    if (!rv_read_u16(r, &v))
        rb_raise(rv_eUpstreamError, "ruvoy: truncated upstream reply");
    return v;
}

/* [status, [[name, value], ...], body] from a reply, which it frees. */
static VALUE decode_reply(VALUE arg)
{
    rv_msg *m = (rv_msg *)arg;
    rv_reader r = {m->data, m->data + m->len};
    if (m->flags & RV_FLAG_FAILED)
        rb_exc_raise(rb_exc_new(rv_eUpstreamError, m->data, (long)m->len));
    int status = read_u16(&r);
    uint16_t n = read_u16(&r);
    VALUE headers = rb_ary_new_capa(n);
    for (uint16_t i = 0; i < n; i++) {
        VALUE name = read_str(&r);
        rb_ary_push(headers, rb_assoc_new(name, read_str(&r)));
    }
    VALUE body = rb_str_new(r.p, r.end - r.p);
    return rb_ary_new_from_args(3, INT2FIX(status), headers, body);
}

static VALUE free_reply(VALUE arg)
{
    rv_msg_free((rv_msg *)arg);
    return Qnil;
}

/* Ruvoy._upstream(stream_id, upstream, method, path, [[name, value]...], body, timeout_ms) */
static VALUE upstream_call(VALUE self, VALUE id, VALUE upstream, VALUE method, VALUE path, VALUE headers,
                           VALUE body, VALUE timeout_ms)
{
    (void)self;
    uint64_t stream = NUM2ULL(id);
    if (!rv_stream_find(stream))
        rb_raise(rv_eUpstreamError, "the request finished before the call was made");
    if (rb_thread_current() != L->thread)
        rb_raise(rb_eThreadError, "ruvoy: upstream calls are made on the server thread");
    Check_Type(headers, T_ARRAY);

    struct call c;
    rv_waiter_init(&c.w, RV_WAIT_OTHER);
    c.id = next_call++;
    c.stream = stream;

    rv_buf b;
    rv_buf_start(&b, RV_OUT_UPSTREAM, stream, 256);
    rv_buf_put_u32(&b, NUM2UINT(timeout_ms));
    put_value(&b, upstream);
    put_value(&b, method);
    put_value(&b, path);
    if (RARRAY_LEN(headers) > 0xffff)
        rb_raise(rb_eArgError, "too many headers");
    rv_buf_put_u16(&b, (uint16_t)RARRAY_LEN(headers));
    for (long i = 0; i < RARRAY_LEN(headers); i++) {
        VALUE pair = rb_ary_entry(headers, i);
        Check_Type(pair, T_ARRAY);
        put_value(&b, rb_ary_entry(pair, 0));
        put_value(&b, rb_ary_entry(pair, 1));
    }
    if (!NIL_P(body)) {
        StringValue(body);
        rv_buf_put(&b, RSTRING_PTR(body), (size_t)RSTRING_LEN(body));
    }
    rv_msg *m = rv_buf_finish(&b);
    m->aux = c.id;

    st_insert(L->calls, (st_data_t)c.id, (st_data_t)&c.w);
    rv_to_go_push(m);
    rb_ensure(call_wait, (VALUE)&c, call_done, (VALUE)&c);
    return rb_ensure(decode_reply, (VALUE)c.w.reply, free_reply, (VALUE)c.w.reply);
}

/* A reply from Go: to the fiber waiting for it, if any still does. */
void rv_upstream_deliver(rv_msg *m)
{
    st_data_t found;
    if (!st_lookup(L->calls, (st_data_t)m->aux, &found)) {
        rv_msg_free(m);
        return;
    }
    rv_waiter *w = (rv_waiter *)found;
    if (w->state != RV_W_WAITING || w->reply) {
        rv_msg_free(m);
        return;
    }
    w->reply = m;
    rv_make_ready(w, Qtrue);
}

void rv_upstream_init(void)
{
    rv_eUpstreamError = rb_define_class_under(rv_mRuvoy, "UpstreamError", rb_eStandardError);
    rb_define_module_function(rv_mRuvoy, "_upstream", upstream_call, 7);
}
