/*
 * rv_early_hints.c: env["rack.early_hints"] (lib/ruvoy/early_hints.rb),
 * the 103 Early Hints answer Rails' request.send_early_hints sends before
 * the response: its headers go to Go as an RV_OUT_EARLY_HINTS message.
 */
#include "rv_internal.h"

#include <string.h>

#define L rv_L

static int token_char(unsigned char c)
{
    return c > 0x20 && c < 0x7f && !strchr("\"(),/:;<=>?@[\\]{}", c);
}

static void check_name(VALUE name)
{
    const char *p = RSTRING_PTR(name);
    long n = RSTRING_LEN(name);
    if (n == 0 || n > 0xffff)
        rb_raise(rb_eArgError, "early hints: a header name is empty or too long");
    for (long i = 0; i < n; i++)
        if (!token_char((unsigned char)p[i]))
            rb_raise(rb_eArgError, "early hints: header name %+" PRIsVALUE " is not a token", name);
}

/* Puts one header; a value of several lines is one header per line, as
 * Puma sends them. */
static void put_lines(rv_buf *b, VALUE name, VALUE value)
{
    const char *p = RSTRING_PTR(value), *end = p + RSTRING_LEN(value);
    while (p <= end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        for (const char *c = p; c < stop; c++)
            if ((unsigned char)*c < 0x20 && *c != '\t')
                rb_raise(rb_eArgError, "early hints: the value of %+" PRIsVALUE " has a control character", name);
        if (stop > p) {
            rv_buf_put_str(b, RSTRING_PTR(name), (size_t)RSTRING_LEN(name));
            rv_buf_put_str(b, p, (size_t)(stop - p));
        }
        if (!nl)
            break;
        p = nl + 1;
    }
}

static int put_header(VALUE name, VALUE value, VALUE arg)
{
    rv_buf *b = (rv_buf *)arg;
    name = rb_obj_as_string(name);
    check_name(name);
    if (RB_TYPE_P(value, T_ARRAY)) {
        for (long i = 0; i < RARRAY_LEN(value); i++)
            put_lines(b, name, rb_obj_as_string(RARRAY_AREF(value, i)));
    } else {
        put_lines(b, name, rb_obj_as_string(value));
    }
    return ST_CONTINUE;
}

static VALUE build(VALUE arg)
{
    VALUE *a = (VALUE *)arg;
    rb_hash_foreach(a[1], put_header, a[0]);
    return Qnil;
}

/* Ruvoy._early_hints(id, headers): true when the hints went out; false
 * when the response has begun (a 103 must come before it) or the request
 * is over. */
static VALUE early_hints(VALUE self, VALUE id, VALUE headers)
{
    (void)self;
    Check_Type(headers, T_HASH);
    rv_stream *s = rv_stream_find(NUM2ULL(id));
    if (!s || s->cancelled || s->finishing || s->head_sent ||
        (s->out.m && (s->out.m->kind == RV_OUT_HEAD || s->out.m->kind == RV_OUT_FILE)))
        return Qfalse;
    rv_buf b;
    rv_buf_start(&b, RV_OUT_EARLY_HINTS, s->id, 256);
    VALUE args[2] = {(VALUE)&b, headers};
    int state = 0;
    rb_protect(build, (VALUE)args, &state);
    rv_msg *m = rv_buf_finish(&b);
    if (state || m->len == 0) {
        rv_msg_free(m);
        if (state)
            rb_jump_tag(state);
        return Qfalse;
    }
    rv_stream_push(s, m);
    return Qtrue;
}

void rv_early_hints_init(void)
{
    rb_define_module_function(rv_mRuvoy, "_early_hints", early_hints, 2);
}
