/*
 * rv_hold.c: naming the code that holds the VM thread.
 *
 * When Ruby code keeps the VM thread from its event loop longer than the
 * hold warning, Go's hold detector calls rv_hold_report. A signal to the VM
 * thread registers a postponed job; Ruby runs it at its next safe point, on
 * the VM thread with the GVL, where taking the backtrace of the running
 * fiber is safe. A C call that blocks holding the GVL reaches that point
 * when it returns: the backtrace then shows the line that made the call.
 */
#include "rv_internal.h"

#include <pthread.h>
#include <ruby/debug.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static pthread_t vm_thread;
static _Atomic uint64_t reported_since; /* the hold being reported, or 0 */

/* Ruby 3.3 deprecates rb_postponed_job_register_one for a job registered
 * once and triggered from the signal handler; its header then defines
 * POSTPONED_JOB_HANDLE_INVALID. */
#ifdef POSTPONED_JOB_HANDLE_INVALID
static rb_postponed_job_handle_t report_handle = POSTPONED_JOB_HANDLE_INVALID;
#endif

int rv_hold_signal(void)
{
    return SIGRTMIN + 7;
}

/* What to say of the hold, from its backtrace (Ruvoy.hold_report): nil,
 * or [level, message, the frames to show]. */
static VALUE judge(VALUE bt)
{
    return rb_funcall(rv_mRuvoy, rb_intern("hold_report"), 1, bt);
}

static void report_job(void *data)
{
    (void)data;
    uint64_t since = atomic_exchange(&reported_since, 0);
    uint64_t now_since = atomic_load(&rv_stat.held_since);
    if (!since)
        return;
    char held[64];
    snprintf(held, sizeof held, "%llu", (unsigned long long)((rv_now() - since) / 1000000));
    if (now_since != since) {
        const char *f[] = {"held_ms", held};
        rv_log(RV_LOG_WARN, "the VM thread was held by one request (it let go before its backtrace could be taken)",
               2, f);
        return;
    }
    VALUE bt = rb_make_backtrace();
    int state = 0;
    VALUE said = rb_protect(judge, bt, &state);
    VALUE text = rb_str_new_cstr("the VM thread is held by one request: other requests wait (wrap blocking calls in Ruvoy.offload)");
    VALUE frames = bt;
    int level = RV_LOG_WARN;
    if (state) {
        rb_set_errinfo(Qnil);
    } else if (NIL_P(said)) {
        return; /* nothing worth saying (loading code in development, told once) */
    } else if (RB_TYPE_P(said, T_ARRAY) && RARRAY_LEN(said) == 3 && RB_TYPE_P(rb_ary_entry(said, 1), T_STRING) &&
               RB_TYPE_P(rb_ary_entry(said, 2), T_ARRAY)) {
        if (rb_ary_entry(said, 0) == ID2SYM(rb_intern("info")))
            level = RV_LOG_INFO;
        text = rb_ary_entry(said, 1);
        frames = rb_ary_entry(said, 2); /* the app's frames first */
    }
    VALUE lines = rb_ary_join(frames, rb_str_new_cstr("\n"));
    const char *f[] = {"held_ms", held, "backtrace", StringValueCStr(lines)};
    rv_buf b;
    rv_buf_start(&b, RV_OUT_LOG, atomic_load(&rv_stat.held_stream), 1024);
    rv_buf_put_str(&b, RSTRING_PTR(text), RSTRING_LEN(text));
    for (int i = 0; i < 4; i++)
        rv_buf_put_str(&b, f[i], strlen(f[i]));
    rv_msg *m = rv_buf_finish(&b);
    m->flags = level;
    rv_to_go_push(m);
    RB_GC_GUARD(lines);
    RB_GC_GUARD(text);
    RB_GC_GUARD(said);
    RB_GC_GUARD(bt);
}

/* Async-signal-safe: it only registers the job (on the VM thread). */
static void on_signal(int sig)
{
    (void)sig;
    if (!ruby_native_thread_p())
        return;
#ifdef POSTPONED_JOB_HANDLE_INVALID
    if (report_handle != POSTPONED_JOB_HANDLE_INVALID) /* Ruby's table was full */
        rb_postponed_job_trigger(report_handle);
#else
    rb_postponed_job_register_one(0, report_job, NULL);
#endif
}

/* On the VM thread, at boot. */
void rv_hold_init(void)
{
    vm_thread = pthread_self();
#ifdef POSTPONED_JOB_HANDLE_INVALID
    report_handle = rb_postponed_job_preregister(0, report_job, NULL);
#endif
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(rv_hold_signal(), &sa, NULL);
}

/* From Go's watchdog: Ruby code has held the thread since `since`. */
void rv_hold_report(uint64_t since)
{
    uint64_t none = 0;
    if (atomic_compare_exchange_strong(&reported_since, &none, since))
        pthread_kill(vm_thread, rv_hold_signal());
}
