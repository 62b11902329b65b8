/*
 * rv_log.c: log entries from the VM thread. They travel to Go as messages and
 * Go writes them with the server's logger, so the VM thread never blocks on a
 * log sink. Payload: a list of u32-length-prefixed strings, "msg" first, then
 * key/value pairs.
 */
#include "rv_internal.h"

#include <string.h>

void rv_log(int level, const char *msg, int nfields, const char *const *fields)
{
    rv_buf b;
    rv_buf_start(&b, RV_OUT_LOG, 0, 256);
    rv_buf_put_str(&b, msg, strlen(msg));
    for (int i = 0; i < nfields; i++)
        rv_buf_put_str(&b, fields[i], strlen(fields[i]));
    rv_msg *m = rv_buf_finish(&b);
    m->flags = (uint32_t)level;
    rv_to_go_push(m);
}

static VALUE error_fields(VALUE exc)
{
    return rb_funcall(rv_mRuvoy, rv_id_error_fields, 1, exc);
}

/* Logs exc with its class, message and backtrace, and the request it hit.
 * Ruvoy.error_fields (Ruby) turns the exception into strings. */
void rv_log_exception(rv_stream *s, const char *what, VALUE exc)
{
    int state = 0;
    VALUE fields = rb_protect(error_fields, exc, &state);
    if (state || !RB_TYPE_P(fields, T_ARRAY)) {
        rb_set_errinfo(Qnil);
        const char *f[] = {"error", "(the exception could not be described)"};
        rv_log(RV_LOG_ERROR, what, 2, f);
        return;
    }
    rv_buf b;
    rv_buf_start(&b, RV_OUT_LOG, s ? s->id : 0, 1024);
    rv_buf_put_str(&b, what, strlen(what));
    for (long i = 0; i < RARRAY_LEN(fields); i++) {
        VALUE v = rb_ary_entry(fields, i);
        if (!RB_TYPE_P(v, T_STRING))
            v = rb_obj_as_string(v);
        rv_buf_put_str(&b, RSTRING_PTR(v), (size_t)RSTRING_LEN(v));
    }
    rv_msg *m = rv_buf_finish(&b);
    m->flags = RV_LOG_ERROR;
    rv_to_go_push(m);
}
