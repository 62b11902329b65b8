/*
 * rv_response_body.c: a response's body as messages. Each chunk an each-body
 * yields goes to Go as it is yielded; an Array body (or one whose to_ary
 * gives one) goes whole, with a Content-Length, in 64 KiB messages at most;
 * a file body (to_path) goes as its descriptor, for Go to send; a body that
 * responds to call gets the stream (Rack 3). A producer a response window
 * ahead of its client waits in the scheduler.
 */
#include "rv_response.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FLUSH_BYTES (64 * 1024)

static void wait_for_window(rv_stream *s)
{
    while (s->inflight >= s->window && !s->cancelled)
        rv_stream_wait(s, &s->credit_waiter, RV_WAIT_CREDIT);
    if (s->cancelled)
        rb_exc_raise(rv_cancel_exception(s));
}

/* Adds a string's bytes to the out message in pieces of at most 64 KiB:
 * each full piece is sent and the fiber waits while the client is a window
 * behind; with now, the last piece is sent at once too. Small messages stay
 * in malloc's heap (a megabyte one would be an mmap, page faults and an
 * munmap per response), and the window bounds what one response holds.
 * The pointer is taken again after every wait: another fiber may have
 * changed the string meanwhile. */
void rv_stream_write(rv_stream *s, VALUE str, int now)
{
    if (s->cancelled)
        rb_exc_raise(rv_cancel_exception(s));
    size_t off = 0;
    while (off < (size_t)RSTRING_LEN(str)) {
        size_t n = (size_t)RSTRING_LEN(str) - off;
        size_t room = FLUSH_BYTES - s->out_body;
        size_t take = n < room ? n : room;
        if (!s->out.m)
            rv_buf_start(&s->out, RV_OUT_DATA, s->id, take);
        rv_buf_put(&s->out, RSTRING_PTR(str) + off, take);
        s->out_body += take;
        off += take;
        if (s->out_body >= FLUSH_BYTES || (now && off == (size_t)RSTRING_LEN(str))) {
            rv_stream_flush(s);
            wait_for_window(s);
        }
    }
    RB_GC_GUARD(str);
}

static void put_chunk(resp *r, VALUE chunk, int now)
{
    if (!RB_TYPE_P(chunk, T_STRING)) {
        VALUE cls = rb_class_name(rb_obj_class(chunk));
        rb_raise(rv_eMalformed, "the body yielded a %s, not a String", StringValueCStr(cls));
    }
    long n = RSTRING_LEN(chunk);
    r->sent += n;
    if (r->declared >= 0 && r->sent > r->declared)
        rb_raise(rv_eMalformed, "the body is longer than its Content-Length (%lld)", (long long)r->declared);
    rv_stream_write(r->s, chunk, now);
}

static VALUE each_chunk(RB_BLOCK_CALL_FUNC_ARGLIST(chunk, arg))
{
    put_chunk((resp *)arg, chunk, 1);
    return Qnil;
}

VALUE rv_resp_send_array(VALUE arg)
{
    resp *r = (resp *)arg;
    long total = 0;
    for (long i = 0; i < RARRAY_LEN(r->array); i++) {
        VALUE c = RARRAY_AREF(r->array, i);
        if (RB_TYPE_P(c, T_STRING))
            total += RSTRING_LEN(c);
    }
    if (r->declared < 0 && !r->no_body)
        rv_stream_head_length(r->s, total);
    if (r->no_body) {
        /* A HEAD answer whose parts are the GET body's tells its length; an
         * empty one (Rack::Head drops the body) does not: it says nothing
         * rather than Content-Length: 0 (RFC 9110 9.3.2). */
        if (r->declared < 0 && total > 0 && r->status != 204 && r->status != 304)
            rv_stream_head_length(r->s, total);
        return Qnil;
    }
    for (long i = 0; i < RARRAY_LEN(r->array); i++)
        put_chunk(r, RARRAY_AREF(r->array, i), 0);
    return Qnil;
}

VALUE rv_resp_send_each(VALUE arg)
{
    resp *r = (resp *)arg;
    rb_block_call(r->body, rv_id_each, 0, NULL, each_chunk, arg);
    return Qnil;
}

VALUE rv_resp_stream_body(VALUE arg)
{
    resp *r = (resp *)arg;
    rv_stream_flush(r->s); /* the head goes out now: the app may take a while */
    VALUE io = rb_funcall(rv_mRuvoy, rb_intern("stream_io"), 1, ULL2NUM(r->s->id));
    rb_funcall(r->body, rv_id_call, 1, io);
    return Qnil;
}

/* A file body (to_path) that Go can send itself: the whole file, as a 200,
 * with no Content-Length or the file's own. The descriptor is opened here,
 * before the body is closed (a Tempfile body unlinks its file on close). */
static VALUE file_path(VALUE body)
{
    VALUE path = rb_funcall(body, rv_id_to_path, 0); /* Rails gives a Pathname */
    return RB_TYPE_P(path, T_STRING) ? path : rb_obj_as_string(path);
}

int rv_resp_try_file(resp *r)
{
    if (r->status != 200 || !rb_respond_to(r->body, rv_id_to_path))
        return 0;
    int state = 0;
    VALUE path = rb_protect(file_path, r->body, &state);
    if (state) {
        rb_set_errinfo(Qnil);
        return 0;
    }
    if (NIL_P(path) || memchr(RSTRING_PTR(path), 0, (size_t)RSTRING_LEN(path)))
        return 0;
    int fd = open(StringValueCStr(path), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (r->declared >= 0 && r->declared != st.st_size)) {
        close(fd);
        return 0;
    }
    rv_msg *m = r->s->out.m;
    m->kind = RV_OUT_FILE;
    rv_resp_head_set_fd(m, fd);
    rv_resp_head_set_length(m, st.st_size);
    r->sent = st.st_size;
    return 1;
}

static VALUE body_to_ary(VALUE body)
{
    return rb_check_array_type(body);
}

/* A body that is not an Array but converts to one (Rack::BodyProxy around
 * an Array, as Rails' middleware returns; Rack 3's to_ary) is sent as one:
 * its length is known before the head goes out, so no chunked encoding.
 * A to_ary that returns nil (Rails' streaming body) leaves it to each. */
int rv_resp_try_array(resp *r, int *state)
{
    if (!rb_respond_to(r->body, rv_id_to_ary))
        return 0;
    VALUE ary = rb_protect(body_to_ary, r->body, state);
    if (*state || NIL_P(ary))
        return 0;
    r->array = ary;
    return 1;
}

static VALUE call_close(VALUE body)
{
    return rb_funcall(body, rv_id_close, 0);
}

void rv_resp_close_body(resp *r)
{
    if (NIL_P(r->body) || !rb_respond_to(r->body, rv_id_close))
        return;
    int state = 0;
    rb_protect(call_close, r->body, &state);
    if (state) {
        VALUE exc = rb_errinfo();
        rb_set_errinfo(Qnil);
        rv_log_exception(r->s, "the response body's close raised", exc);
    }
}
