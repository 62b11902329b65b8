/*
 * rv_response_head.c: a response's status and headers, checked against
 * Rack's rules (a malformed one becomes a 500, never a corrupted answer)
 * and laid out as the head of an RV_OUT_HEAD or RV_OUT_FILE (wire.h).
 */
#include "rv_response.h"

#include <string.h>

static void malformed(resp *r, const char *why)
{
    if (!r->malformed)
        r->malformed = why;
}

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
    uint64_t aux = (uint64_t)(uint32_t)r->status | (uint64_t)r->s->queued_us << RV_AUX_QUEUED_SHIFT;
    rv_resp_head_start(&r->s->out, RV_OUT_HEAD, r->s->id, aux, 512);
}

VALUE rv_resp_build_head(VALUE arg)
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

/* Sets the Content-Length of the head the stream holds, if it holds one
 * (not yet sent). */
void rv_stream_head_length(rv_stream *s, int64_t length)
{
    if (s->out.m && (s->out.m->kind == RV_OUT_HEAD || s->out.m->kind == RV_OUT_FILE))
        rv_resp_head_set_length(s->out.m, length);
}

void rv_resp_log_malformed(resp *r)
{
    VALUE text = rb_str_new_cstr(r->malformed);
    if (!NIL_P(r->malformed_name) && RB_TYPE_P(r->malformed_name, T_STRING))
        rb_str_catf(text, " (%" PRIsVALUE ")", rb_inspect(r->malformed_name));
    rv_log_exception(r->s, "the app returned a malformed response", rb_exc_new_str(rv_eMalformed, text));
}

/* The server's own short answer in the app's place (400, 413, 503, else
 * 500): whatever head the stream held is dropped. */
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
