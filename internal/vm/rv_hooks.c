/*
 * rv_hooks.c: the app's hooks (lib/ruvoy/hooks.rb), on the VM thread:
 * Ruvoy.before_fork's in a template once the app has loaded (rv_template.c
 * asks), on_worker_boot's before a worker or the one process serves (Go
 * asks; RV_IN_HOOKS both), on_worker_shutdown's as the VM stops
 * (rv_boot.c). A boot hook that raises fails the boot: the reply says
 * what it raised, with the backtrace; a shutdown hook's exception is
 * logged and the stop goes on.
 */
#include "rv_internal.h"

static VALUE before_fork(VALUE unused)
{
    (void)unused;
    return rb_funcall(rv_mRuvoy, rb_intern("_before_fork"), 0);
}

static VALUE worker_boot(VALUE index)
{
    return rb_funcall(rv_mRuvoy, rb_intern("_worker_boot"), 1, index);
}

static VALUE worker_shutdown(VALUE unused)
{
    (void)unused;
    return rb_funcall(rv_mRuvoy, rb_intern("_worker_shutdown"), 0);
}

struct failure {
    const char *hook;
    VALUE exc;
};

static VALUE describe(VALUE arg)
{
    struct failure *f = (struct failure *)arg;
    VALUE text = rb_sprintf("Ruvoy.%s's block raised: ", f->hook); /* one line with the error */
    return rb_str_append(text, rb_funcall(rv_mRuvoy, rb_intern("describe_boot_error"), 1, f->exc));
}

/* RV_IN_HOOKS: replies 1, or 0 and what a block raised. */
void rv_hooks_handle(rv_msg *m)
{
    struct failure f = {NULL, Qnil};
    int state = 0;
    if (m->aux == RV_HOOKS_BEFORE_FORK) {
        f.hook = "before_fork";
        rb_protect(before_fork, Qnil, &state);
    } else if (m->aux == RV_HOOKS_WORKER_BOOT) {
        f.hook = "on_worker_boot";
        rb_protect(worker_boot, UINT2NUM(m->flags), &state);
    } else {
        rv_send_reply(0, "no such hooks", 13);
        return;
    }
    if (!state) {
        rv_send_reply(1, "", 0);
        return;
    }
    f.exc = rb_errinfo();
    rb_set_errinfo(Qnil);
    VALUE text = rb_protect(describe, (VALUE)&f, &state);
    if (state || !RB_TYPE_P(text, T_STRING)) {
        rb_set_errinfo(Qnil);
        text = rb_sprintf("Ruvoy.%s's block raised (the exception could not be described)", f.hook);
    }
    rv_send_reply(0, RSTRING_PTR(text), (size_t)RSTRING_LEN(text));
}

/* As the VM stops, once the loop has ended: the shutdown hooks where the
 * boot hooks ran, each exception logged. */
void rv_hooks_shutdown(void)
{
    int state = 0;
    VALUE raised = rb_protect(worker_shutdown, Qnil, &state);
    if (state || !RB_TYPE_P(raised, T_ARRAY)) {
        rb_set_errinfo(Qnil);
        return;
    }
    for (long i = 0; i < RARRAY_LEN(raised); i++)
        rv_log_exception(NULL, "Ruvoy.on_worker_shutdown's block raised", rb_ary_entry(raised, i));
}
