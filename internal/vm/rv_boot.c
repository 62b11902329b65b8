/*
 * rv_boot.c: the VM thread, from pthread_create (rv_start) to ruby_cleanup
 * (rv_join).
 *
 * The VM lives on a pthread created here (not a goroutine: Go callbacks from
 * fiber stacks on a locked goroutine crash), booted as DESIGN.md records:
 * ruby_sysinit with writable argv, RUBY_INIT_STACK in the start routine,
 * ruby_setup, setlocale, ruby_options with -e "" (load path, encodings,
 * rubygems, RUBYOPT), then the signal fix-ups (rv_signals.c).
 */
#include "rv_internal.h"

#include <locale.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static rv_config config;
static pthread_t vm_thread;
static pid_t vm_pid; /* the process that created vm_thread */
static pthread_mutex_t end_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t end_cv = PTHREAD_COND_INITIALIZER;
static int ended; /* the VM is cleaned up: exit_status is set */
static pthread_mutex_t boot_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t boot_cv = PTHREAD_COND_INITIALIZER;
static int boot_state; /* 0 booting, 1 serving, -1 failed */
static char *boot_error;
static int exit_status;

static void boot_done(int state, const char *error)
{
    pthread_mutex_lock(&boot_mu);
    boot_state = state;
    if (error)
        boot_error = strdup(error);
    pthread_cond_signal(&boot_cv);
    pthread_mutex_unlock(&boot_mu);
}

/* ---- the embedded Ruby library ---- */

static VALUE eval_lib(VALUE unused)
{
    (void)unused;
    VALUE binding = rb_const_get(rb_cObject, rb_intern("TOPLEVEL_BINDING"));
    const char *p = config.rubylib, *end = p + config.rubylib_len;
    while (p < end) {
        const char *name = p;
        const char *src = name + strlen(name) + 1;
        size_t len = strlen(src);
        rb_funcall(rb_mKernel, rb_intern("eval"), 4, rb_str_new(src, (long)len), binding,
                   rb_str_new_cstr(name), INT2FIX(1));
        p = src + len + 1;
    }
    VALUE argv = rb_get_argv();
    rb_ary_clear(argv);
    for (int i = 0, off = 0; i < config.argc; i++) {
        rb_ary_push(argv, rb_external_str_new_cstr(config.argv + off));
        off += (int)strlen(config.argv + off) + 1;
    }
    return Qnil;
}

static VALUE describe(VALUE exc)
{
    return rb_funcall(exc, rb_intern("full_message"), 0);
}

static int boot_ruby_side(void)
{
    rv_ruby_init();
    rv_response_init();
    rv_request_init();
    rv_stream_init();
    rv_fiber_cache_init();
    rv_scheduler_init();
    rv_upstream_init();
    rv_hijack_init();
    int state = 0;
    rb_protect(eval_lib, Qnil, &state);
    if (state) {
        VALUE exc = rb_errinfo();
        rb_set_errinfo(Qnil);
        VALUE text = rb_protect(describe, exc, &state);
        boot_done(-1, state ? "the embedded Ruby library failed to load" : StringValueCStr(text));
        return 0;
    }
    rv_ruby_bind();
    rv_env_init();
    rv_loop_init(&config);
    rv_interrupt_init();
    rv_early_hints_init();
    rv_gc_clock_init();
    rv_gc_idle_init();
    rv_scheduler_install();
    return 1;
}

static VALUE call_before_cleanup(VALUE unused)
{
    (void)unused;
    return rb_funcall(rv_mRuvoy, rb_intern("_before_cleanup"), 0);
}

/* Ruby code that must run before ruby_cleanup kills the app's threads:
 * the app's shutdown hooks (rv_hooks.c), then lib/ruvoy/hijack.rb's. */
static void before_cleanup(void)
{
    rv_hooks_shutdown();
    int state = 0;
    rb_protect(call_before_cleanup, Qnil, &state);
    if (state)
        rb_set_errinfo(Qnil);
}

/* The VM thread's last word, for rv_join. */
static void *vm_end(void)
{
    pthread_mutex_lock(&end_mu);
    ended = 1;
    pthread_cond_broadcast(&end_cv);
    pthread_mutex_unlock(&end_mu);
    return NULL;
}

static void *vm_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "ruvoy-vm");
    rv_vm_thread = 1;
    rv_signals_save();

    /* Writable: setting $0 later writes the process title into argv. */
    static char arg0[256];
    snprintf(arg0, sizeof arg0, "%s", config.program);
    static char *args[] = {arg0, NULL};
    int argc = 1;
    char **argv = args;
    /* Fiber stacks are small by default (a few hundred frames); Rails needs
     * more. Mapped lazily, so only what a request touches costs memory. The
     * user's own settings win. */
    setenv("RUBY_FIBER_VM_STACK_SIZE", "1048576", 0);
    setenv("RUBY_FIBER_MACHINE_STACK_SIZE", "1048576", 0);
    ruby_sysinit(&argc, &argv);
    {
        RUBY_INIT_STACK;
        if (ruby_setup() != 0) {
            boot_done(-1, "ruby_setup failed");
            return vm_end();
        }
        setlocale(LC_CTYPE, "");
        static char opt0[] = "ruvoy", opt1[] = "-e", opt2[] = "";
        static char *opts[] = {opt0, opt1, opt2, NULL};
        void *node = ruby_options(3, opts);
        int status = 0;
        if (!ruby_executable_node(node, &status)) {
            boot_done(-1, "Ruby failed to start (its own message is above; check RUBYOPT)");
            return vm_end();
        }
        ruby_script(config.program);
        rv_signals_fix();
        rv_hold_init();
        rv_signals_block();
        if (boot_ruby_side()) {
            boot_done(1, NULL);
            rv_loop_run();
            before_cleanup();
        }
        exit_status = ruby_cleanup(0);
    }
    return vm_end();
}

static char *copy(const char *p, size_t n)
{
    char *c = malloc(n + 1);
    if (!c)
        abort();
    memcpy(c, p, n);
    c[n] = 0;
    return c;
}

int rv_start(const rv_config *cfg, char **error)
{
    config = *cfg;
    config.program = copy(cfg->program, strlen(cfg->program));
    size_t argv_len = 0;
    for (int i = 0; i < cfg->argc; i++)
        argv_len += strlen(cfg->argv + argv_len) + 1;
    config.argv = copy(cfg->argv, argv_len);
    config.rubylib = copy(cfg->rubylib, cfg->rubylib_len);

    if (rv_inbox_init(&rv_to_vm) < 0 || rv_inbox_init(&rv_to_go) < 0) {
        *error = strdup("eventfd failed");
        return -1;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 16u << 20);
    vm_pid = getpid();
    int rc = pthread_create(&vm_thread, &attr, vm_main, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        *error = strdup("could not create the VM thread");
        return -1;
    }
    pthread_mutex_lock(&boot_mu);
    while (boot_state == 0)
        pthread_cond_wait(&boot_cv, &boot_mu);
    pthread_mutex_unlock(&boot_mu);
    if (boot_state < 0) {
        *error = boot_error ? boot_error : strdup("the VM failed to boot");
        pthread_join(vm_thread, NULL);
        return -1;
    }
    return 0;
}

/* Waits for the VM's end (ruby_cleanup has returned). In a worker forked
 * from a template (rv_fork.c) the VM thread is the thread that forked, not
 * one this process created, and glibc may never see it end: 2.43's
 * pthread_join waits for the word pthread_create had the kernel clear at
 * the thread's exit, and fork has it clear another (the thread id). There
 * the VM's own word is the end; the process exits next. */
int rv_join(void)
{
    pthread_mutex_lock(&end_mu);
    while (!ended)
        pthread_cond_wait(&end_cv, &end_mu);
    pthread_mutex_unlock(&end_mu);
    if (getpid() == vm_pid)
        pthread_join(vm_thread, NULL);
    return exit_status;
}
