/*
 * rv_response.c: turning an app's [status, headers, body] into messages.
 *
 * RV_OUT_HEAD and RV_OUT_FILE carry a response head (wire.h); RV_OUT_DATA
 * carries body bytes only.
 *
 * The head is held until the first body bytes (or until the fiber first
 * waits), so a body that fails before producing anything can still become a
 * 500. Each chunk an each-body yields goes to Go as it is yielded; an Array
 * body goes whole, with a Content-Length, in 64 KiB messages at most.
 */
#include "rv_internal.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define L rv_L

#define FLUSH_BYTES (64 * 1024)

typedef struct resp {
    rv_stream *s;
    VALUE env, status_v, headers, body;
    VALUE array; /* the body's parts when it is (or converts to) an Array */
    int status;
    int no_body;      /* HEAD request, or a status without a body */
    int64_t declared; /* Content-Length the app gave, or -1 */
    int64_t sent;     /* body bytes the app produced */
    const char *malformed;
    VALUE malformed_name;
    VALUE hijack; /* a rack.hijack header's callable (partial hijack), or nil */
} resp;

static VALUE eMalformed;

static void malformed(resp *r, const char *why)
{
    if (!r->malformed)
        r->malformed = why;
}

/* ---- status and headers ---- */

static int parse_status(resp *r)
{
    VALUE v = r->status_v;
    long st = -1;
    if (FIXNUM_P(v)) {
        st = FIX2LONG(v);
    } else if (RB_TYPE_P(v, T_STRING) && RSTRING_LEN(v) == 3) {
        const char *p = RSTRING_PTR(v);
        if (p[0] >= '0' && p[0] <= '9' && p[1] >= '0' && p[1] <= '9' && p[2] >= '0' && p[2] <= '9')
            st = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
    }
    if (st < 100 || st > 599) {
        malformed(r, "the status is not an Integer from 100 to 599");
        return 0;
    }
    if (st < 200 && st != 101) { /* 101: an upgrade, checked in rv_respond */
        malformed(r, "an informational status (1xx) cannot be the final response");
        return 0;
    }
    r->status = (int)st;
    return 1;
}

static int tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int name_is(const char *p, long n, const char *lower)
{
    long len = (long)strlen(lower);
    if (n != len)
        return 0;
    for (long i = 0; i < n; i++) {
        char c = p[i];
        if (c >= 'A' && c <= 'Z')
            c += 32;
        if (c != lower[i])
            return 0;
    }
    return 1;
}

static int64_t parse_length(const char *p, long n)
{
    if (n == 0 || n > 18)
        return -2;
    int64_t v = 0;
    for (long i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -2;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* Writes one header line per "\n"-separated part of value. */
static void put_value(resp *r, rv_buf *b, const char *name, long nlen, VALUE value)
{
    const char *p = RSTRING_PTR(value), *end = p + RSTRING_LEN(value);
    while (p <= end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        for (const char *c = p; c < stop; c++) {
            unsigned char u = (unsigned char)*c;
            if ((u < 0x20 && u != '\t') || u == 0x7f) {
                malformed(r, "a header value contains a control character (CR, NUL or another)");
                return;
            }
        }
        if (stop > p || !nl) {
            if (name_is(name, nlen, "content-length")) {
                int64_t v = parse_length(p, stop - p);
                if (v < 0 || (r->declared >= 0 && r->declared != v)) {
                    malformed(r, "Content-Length is not a single non-negative integer");
                    return;
                }
                r->declared = v;
            }
            rv_resp_head_put(b, name, (uint16_t)nlen, p, (size_t)(stop - p));
        }
        if (!nl)
            break;
        p = nl + 1;
    }
}

static int put_header(VALUE name, VALUE value, VALUE arg)
{
    resp *r = (resp *)arg;
    rv_buf *b = &r->s->out;
    if (!RB_TYPE_P(name, T_STRING)) {
        malformed(r, "a header name is not a String");
        return ST_STOP;
    }
    const char *p = RSTRING_PTR(name);
    long n = RSTRING_LEN(name);
    if (n >= 5 && name_is(p, 5, "rack.")) {
        if (name_is(p, n, "rack.hijack"))
            r->hijack = value; /* partial hijack */
        return ST_CONTINUE; /* server-private per SPEC */
    }
    if (n == 0 || n > 0xffff) {
        r->malformed_name = name;
        malformed(r, "a header name is empty or too long");
        return ST_STOP;
    }
    for (long i = 0; i < n; i++) {
        if (!tchar((unsigned char)p[i])) {
            r->malformed_name = name;
            malformed(r, "a header name contains a character that is not allowed (CR, LF, NUL, space, ...)");
            return ST_STOP;
        }
    }
    if (name_is(p, n, "status")) {
        malformed(r, "the headers contain Status");
        return ST_STOP;
    }
    if (name_is(p, n, "transfer-encoding"))
        return ST_CONTINUE; /* framing is the server's business */
    if (NIL_P(value))
        return ST_CONTINUE;
    if (RB_TYPE_P(value, T_ARRAY)) {
        for (long i = 0; i < RARRAY_LEN(value) && !r->malformed; i++) {
            VALUE v = rb_ary_entry(value, i);
            put_value(r, b, p, n, RB_TYPE_P(v, T_STRING) ? v : rb_obj_as_string(v));
        }
    } else {
        put_value(r, b, p, n, RB_TYPE_P(value, T_STRING) ? value : rb_obj_as_string(value));
    }
    if (r->malformed) {
        r->malformed_name = name;
        return ST_STOP;
    }
    return ST_CONTINUE;
}

static VALUE each_header(RB_BLOCK_CALL_FUNC_ARGLIST(pair, arg))
{
    VALUE ary = rb_check_array_type(pair);
    if (NIL_P(ary) || RARRAY_LEN(ary) != 2) {
        malformed((resp *)arg, "headers#each did not yield [name, value] pairs");
        return Qnil;
    }
    put_header(rb_ary_entry(ary, 0), rb_ary_entry(ary, 1), arg);
    return Qnil;
}

static void start_head(resp *r)
{
    rv_resp_head_start(&r->s->out, RV_OUT_HEAD, r->s->id, (uint64_t)r->status, 512);
}

static VALUE build_head(VALUE arg)
{
    resp *r = (resp *)arg;
    if (!parse_status(r))
        return Qnil;
    start_head(r);
    if (RB_TYPE_P(r->headers, T_HASH))
        rb_hash_foreach(r->headers, put_header, arg);
    else if (rb_respond_to(r->headers, rv_id_each))
        rb_block_call(r->headers, rv_id_each, 0, NULL, each_header, arg);
    else
        malformed(r, "the headers are not a Hash");
    return Qnil;
}

static void set_length(rv_stream *s, int64_t length)
{
    if (s->out.m && (s->out.m->kind == RV_OUT_HEAD || s->out.m->kind == RV_OUT_FILE))
        rv_resp_head_set_length(s->out.m, length);
}

/* ---- body bytes ---- */

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
        rb_raise(eMalformed, "the body yielded a %s, not a String", StringValueCStr(cls));
    }
    long n = RSTRING_LEN(chunk);
    r->sent += n;
    if (r->declared >= 0 && r->sent > r->declared)
        rb_raise(eMalformed, "the body is longer than its Content-Length (%lld)", (long long)r->declared);
    rv_stream_write(r->s, chunk, now);
}

static VALUE each_chunk(RB_BLOCK_CALL_FUNC_ARGLIST(chunk, arg))
{
    put_chunk((resp *)arg, chunk, 1);
    return Qnil;
}

static VALUE send_array(VALUE arg)
{
    resp *r = (resp *)arg;
    long total = 0;
    for (long i = 0; i < RARRAY_LEN(r->array); i++) {
        VALUE c = RARRAY_AREF(r->array, i);
        if (RB_TYPE_P(c, T_STRING))
            total += RSTRING_LEN(c);
    }
    if (r->declared < 0 && !r->no_body)
        set_length(r->s, total);
    if (r->no_body) {
        /* A HEAD answer whose parts are the GET body's tells its length; an
         * empty one (Rack::Head drops the body) does not: it says nothing
         * rather than Content-Length: 0 (RFC 9110 9.3.2). */
        if (r->declared < 0 && total > 0 && r->status != 204 && r->status != 304)
            set_length(r->s, total);
        return Qnil;
    }
    for (long i = 0; i < RARRAY_LEN(r->array); i++)
        put_chunk(r, RARRAY_AREF(r->array, i), 0);
    return Qnil;
}

static VALUE send_each(VALUE arg)
{
    resp *r = (resp *)arg;
    rb_block_call(r->body, rv_id_each, 0, NULL, each_chunk, arg);
    return Qnil;
}

static VALUE stream_body(VALUE arg)
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

static int try_file(resp *r)
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

/* ---- the whole response ---- */

static VALUE body_to_ary(VALUE body)
{
    return rb_check_array_type(body);
}

/* A body that is not an Array but converts to one (Rack::BodyProxy around
 * an Array, as Rails' middleware returns; Rack 3's to_ary) is sent as one:
 * its length is known before the head goes out, so no chunked encoding.
 * A to_ary that returns nil (Rails' streaming body) leaves it to each. */
static int try_array(resp *r, int *state)
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

static void close_body(resp *r)
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

static void log_malformed(resp *r)
{
    VALUE text = rb_str_new_cstr(r->malformed);
    if (!NIL_P(r->malformed_name) && RB_TYPE_P(r->malformed_name, T_STRING))
        rb_str_catf(text, " (%" PRIsVALUE ")", rb_inspect(r->malformed_name));
    rv_log_exception(r->s, "the app returned a malformed response", rb_exc_new_str(eMalformed, text));
}

void rv_respond_error(rv_stream *s, int status)
{
    const char *body = status == 400   ? "Bad Request\n"
                       : status == 413 ? "Payload Too Large\n"
                       : status == 503 ? "Service Unavailable\n"
                                       : "Internal Server Error\n";
    if (s->out.m)
        rv_msg_free(rv_buf_finish(&s->out));
    resp r = {.s = s, .status = status};
    start_head(&r);
    size_t len = strlen(body);
    rv_resp_head_set_length(s->out.m, (int64_t)len);
    rv_resp_head_put(&s->out, "content-type", 12, "text/plain; charset=utf-8", 25);
    rv_buf_put(&s->out, body, len);
}

/* The body failed: a 500 if nothing went out yet, else the response is cut. */
/* A request that failed with the exception of an interruption: where it
 * was is worth a log line (its backtrace), and the client, if still there,
 * gets 503, or a cut body once the head is out. Reports whether exc was
 * one. */
int rv_interrupted(rv_stream *s, VALUE exc)
{
    int shutdown = rb_obj_is_kind_of(exc, rv_eShutdown);
    if (!shutdown && !rb_obj_is_kind_of(exc, rv_eRequestTimeout))
        return 0;
    rv_log_exception(s, shutdown ? "the stop cut a request short" : "a request ran past its timeout", exc);
    if (s->head_sent)
        s->reset = 1;
    else
        rv_respond_error(s, 503);
    return 1;
}

struct hijack_args {
    rv_stream *s;
    VALUE callable;
};

static VALUE respond_hijack(VALUE arg)
{
    struct hijack_args *a = (struct hijack_args *)arg;
    rv_hijack_respond(a->s, a->callable);
    return Qnil;
}

static void body_failed(resp *r, VALUE exc)
{
    rv_stream *s = r->s;
    if (rb_obj_is_kind_of(exc, rv_eClientDisconnected) || s->cancelled) {
        s->reset = 1;
        return;
    }
    if (rv_interrupted(s, exc))
        return;
    if (rb_obj_is_kind_of(exc, rv_eBadRequest) || rb_obj_is_kind_of(exc, rv_eBodyTooLarge)) {
        /* A streaming body read a request body the client got wrong. */
        if (s->head_sent)
            s->reset = 1;
        else
            rv_respond_error(s, rb_obj_is_kind_of(exc, rv_eBadRequest) ? 400 : 413);
        return;
    }
    rv_log_exception(s, rb_obj_is_kind_of(exc, eMalformed) ? "the app returned a malformed response"
                                                           : "the response body raised",
                     exc);
    if (s->head_sent)
        s->reset = 1;
    else
        rv_respond_error(s, 500);
}

/* A response that hands the connection to the app once its head is out:
 * a rack.hijack header's callable (partial hijack), or a 101 whose body
 * responds to call (a Rack 3 upgrade). Where the connection cannot be
 * handed over (HTTP/2 and 3), the header is ignored, as rack.hijack? said,
 * and a 101 is a malformed response. Reports whether the response was
 * taken care of. */
static int upgrade(resp *r)
{
    rv_stream *s = r->s;
    int can = (s->request->data[RV_REQ_FLAGS_AT] & RV_REQ_HIJACK) != 0;
    VALUE callable = Qnil;
    if (can && !NIL_P(r->hijack))
        callable = r->hijack;
    else if (can && r->status == 101 && !rb_respond_to(r->body, rv_id_each) && rb_respond_to(r->body, rv_id_call))
        callable = r->body;
    if (NIL_P(callable) && r->status != 101)
        return 0;
    if (NIL_P(callable)) {
        log_malformed(&(resp){.s = s, .malformed_name = Qnil,
                              .malformed = can ? "a 101 answer's body must respond to call (and not to each): it gets the connection"
                                               : "a 101 answer needs an HTTP/1.1 connection to switch (this request came over HTTP/2 or 3, or with a body)"});
        close_body(r);
        rv_respond_error(s, 500);
        return 1;
    }
    if (callable != r->body)
        close_body(r);
    int state = 0;
    struct hijack_args a = {s, callable};
    rb_protect(respond_hijack, (VALUE)&a, &state);
    if (state) {
        VALUE exc = rb_errinfo();
        rb_set_errinfo(Qnil);
        body_failed(r, exc);
    }
    return 1;
}

static VALUE check_triple(VALUE res)
{
    VALUE ary = rb_check_array_type(res);
    if (NIL_P(ary) || RARRAY_LEN(ary) != 3)
        return Qnil;
    return ary;
}

void rv_respond(rv_stream *s, VALUE env, VALUE res)
{
    resp r = {.s = s, .env = env, .declared = -1, .body = Qnil, .array = Qnil, .malformed_name = Qnil, .hijack = Qnil};
    int state = 0;
    VALUE ary = rb_protect(check_triple, res, &state);
    if (state || NIL_P(ary)) {
        rb_set_errinfo(Qnil);
        rv_log_exception(s, "the app returned a malformed response",
                         rb_exc_new_cstr(eMalformed, "the app did not return [status, headers, body]"));
        rv_respond_error(s, 500);
        return;
    }
    r.status_v = rb_ary_entry(ary, 0);
    r.headers = rb_ary_entry(ary, 1);
    r.body = rb_ary_entry(ary, 2);

    rb_protect(build_head, (VALUE)&r, &state);
    if (state || r.malformed) {
        if (state) {
            VALUE exc = rb_errinfo();
            rb_set_errinfo(Qnil);
            rv_log_exception(s, "the app returned a malformed response", exc);
        } else {
            log_malformed(&r);
        }
        close_body(&r);
        rv_respond_error(s, 500);
        return;
    }

    if (upgrade(&r))
        return;
    r.no_body = (s->request->data[0] & RV_REQ_HEAD) || r.status == 204 || r.status == 304;

    VALUE (*send)(VALUE) = NULL;
    if (RB_TYPE_P(r.body, T_ARRAY)) {
        r.array = r.body;
        send = send_array;
    } else if (try_array(&r, &state))
        send = send_array; /* also for HEAD: its length goes in the head */
    else if (state) {
        VALUE exc = rb_errinfo();
        rb_set_errinfo(Qnil);
        body_failed(&r, exc);
        close_body(&r);
        return;
    } else if (r.no_body)
        send = NULL;
    else if (try_file(&r))
        send = NULL;
    else if (rb_respond_to(r.body, rv_id_each))
        send = send_each;
    else if (rb_respond_to(r.body, rv_id_call))
        send = stream_body;
    else {
        log_malformed(&(resp){.s = s, .malformed = "the body responds to neither each nor call", .malformed_name = Qnil});
        close_body(&r);
        rv_respond_error(s, 500);
        return;
    }

    if (send) {
        rb_protect(send, (VALUE)&r, &state);
        if (state) {
            VALUE exc = rb_errinfo();
            rb_set_errinfo(Qnil);
            body_failed(&r, exc);
        } else if (r.declared >= 0 && r.sent < r.declared && !r.no_body) {
            body_failed(&r, rb_exc_new_cstr(eMalformed, "the body is shorter than its Content-Length"));
        } else if (r.declared < 0 && !r.no_body && !s->head_sent && send != stream_body) {
            set_length(s, r.sent); /* the whole body is here: no chunked encoding */
        }
    }
    close_body(&r);
}

void rv_response_init(void)
{
    eMalformed = rb_define_class_under(rv_mRuvoy, "MalformedResponse", rb_eStandardError);
}
