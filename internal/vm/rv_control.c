/*
 * rv_control.c: control messages: loading and unloading apps, stopping.
 */
#include "rv_internal.h"

#define L rv_L

struct load_args {
    VALUE path, environment, upstreams;
};

static VALUE load_app(VALUE arg)
{
    struct load_args *a = (struct load_args *)arg;
    return rb_funcall(rv_mRuvoy, rv_id_load_app, 2, a->path, a->environment);
}

static VALUE describe_boot_error(VALUE exc)
{
    return rb_funcall(rv_mRuvoy, rb_intern("describe_boot_error"), 1, exc);
}

void rv_control_handle(rv_msg *m)
{
    switch (m->kind) {
    case RV_IN_LOAD_APP: {
        /* strings: rackup path, environment, upstreams (comma
         * separated; empty: upstream calls are off) */
        VALUE fields[3] = {Qnil, Qnil, Qnil};
        rv_reader r = {m->data, m->data + m->len};
        for (int i = 0; i < 3; i++) {
            const char *p;
            long n;
            if (rv_read_str(&r, &p, &n) && n >= 0)
                fields[i] = rb_str_new(p, n);
        }
        struct load_args a = {fields[0], fields[1], fields[2]};
        int state = 0;
        VALUE app = rb_protect(load_app, (VALUE)&a, &state);
        if (state) {
            VALUE exc = rb_errinfo();
            rb_set_errinfo(Qnil);
            VALUE text = rb_protect(describe_boot_error, exc, &state);
            if (state || !RB_TYPE_P(text, T_STRING)) {
                rb_set_errinfo(Qnil);
                text = rb_str_new_cstr("the application failed to load");
            }
            rv_send_reply(0, RSTRING_PTR(text), (size_t)RSTRING_LEN(text));
        } else {
            rb_ary_push(L->apps, app);
            VALUE upstreams = Qnil;
            if (!NIL_P(a.upstreams) && RSTRING_LEN(a.upstreams) > 0)
                upstreams = rb_obj_freeze(rb_str_split(a.upstreams, ","));
            rb_ary_push(L->app_upstreams, upstreams);
            rv_send_reply((uint64_t)RARRAY_LEN(L->apps), "", 0);
        }
        break;
    }
    case RV_IN_UNLOAD_APP:
        /* Requests in flight hold the app themselves (rv_stream.app). */
        if (m->aux >= 1 && (long)m->aux <= RARRAY_LEN(L->apps))
            rb_ary_store(L->apps, (long)m->aux - 1, Qnil);
        rv_send_reply(1, "", 0);
        break;
    case RV_IN_STOP:
        L->stopping = 1;
        break;
    case RV_IN_RELAY:
        rv_relay_begin(m);
        break;
    case RV_IN_FORK:
        rv_fork(m);
        break;
    case RV_IN_HOOKS:
        rv_hooks_handle(m);
        break;
    default:
        break;
    }
    rv_msg_free(m);
}
