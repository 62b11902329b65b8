/*
 * rv_boot.c: the VM thread, from pthread_create to ruby_cleanup, and the
 * functions Go calls (ruvoy.h).
 *
 * The VM lives on a pthread created here (not a goroutine: Go callbacks from
 * fiber stacks on a locked goroutine crash), booted as DESIGN.md records:
 * ruby_sysinit with writable argv, RUBY_INIT_STACK in the start routine,
 * ruby_setup, setlocale, ruby_options with -e "" (load path, encodings,
 * rubygems, RUBYOPT), then the signal fix-ups below.
 */
#include "rv_internal.h"

#include <locale.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <ruby/version.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rv_ruby_bind(void);
void rv_stall_init(void);
int rv_stall_signal(void);
void rv_scheduler_install(void);

static rv_config config;
static pthread_t vm_thread;
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

/* ---- signals ---- */

static struct sigaction go_actions[NSIG], ruby_faults[NSIG];

static int is_fault(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE;
}

/* A fault on a Ruby thread is Ruby's to report ([BUG] with a backtrace); on
 * any other thread it is Go's (a nil dereference becomes a panic). */
static void fault_chain(int sig, siginfo_t *info, void *uctx)
{
    struct sigaction *next = ruby_native_thread_p() ? &ruby_faults[sig] : &go_actions[sig];
    if (next->sa_flags & SA_SIGINFO) {
        next->sa_sigaction(sig, info, uctx);
    } else if (next->sa_handler == SIG_DFL || next->sa_handler == SIG_IGN) {
        signal(sig, SIG_DFL);
        raise(sig);
    } else {
        next->sa_handler(sig);
    }
}

static int same_action(const struct sigaction *a, const struct sigaction *b)
{
    return a->sa_sigaction == b->sa_sigaction && a->sa_flags == b->sa_flags;
}

/* Ruby's boot replaced Go's handlers for HUP, TERM, ... (without SA_ONSTACK:
 * Go then crashes) and installed its own for faults, CHLD and VTALRM. Give
 * Go its handlers back, keep Ruby's CHLD and VTALRM (threads are interrupted
 * with VTALRM; backticks hang without CHLD) on the alternate stack, and chain
 * the fault handlers. */
static void fix_signals(void)
{
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP)
            continue;
        struct sigaction now;
        if (sigaction(sig, NULL, &now) < 0 || same_action(&now, &go_actions[sig]))
            continue;
        if (sig == SIGVTALRM || sig == SIGCHLD) {
            now.sa_flags |= SA_ONSTACK;
            sigaction(sig, &now, NULL);
        } else if (is_fault(sig)) {
            ruby_faults[sig] = now;
            struct sigaction chain;
            memset(&chain, 0, sizeof chain);
            chain.sa_sigaction = fault_chain;
            chain.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
            sigfillset(&chain.sa_mask);
            sigaction(sig, &chain, NULL);
        } else {
            sigaction(sig, &go_actions[sig], NULL);
        }
    }
}

/* Signals meant for the process go to Go's threads, never to this one. */
static void block_async_signals(void)
{
    sigset_t set;
    sigfillset(&set);
    int keep[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGVTALRM, rv_stall_signal()};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        sigdelset(&set, keep[i]);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* An app's Signal.trap installs Ruby's handler; keep it Go-safe. */
void rv_signal_fixup(int sig)
{
    struct sigaction now;
    if (sig > 0 && sig < NSIG && sigaction(sig, NULL, &now) == 0 && !(now.sa_flags & SA_ONSTACK)) {
        now.sa_flags |= SA_ONSTACK;
        sigaction(sig, &now, NULL);
    }
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
    rv_fiber_pool_init();
    rv_scheduler_init();
    rv_upstream_init();
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
    rv_gc_clock_init();
    rv_scheduler_install();
    return 1;
}

static void *vm_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "ruvoy-vm");
    for (int sig = 1; sig < NSIG; sig++)
        sigaction(sig, NULL, &go_actions[sig]);

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
            return NULL;
        }
        setlocale(LC_CTYPE, "");
        static char opt0[] = "ruvoy", opt1[] = "-e", opt2[] = "";
        static char *opts[] = {opt0, opt1, opt2, NULL};
        void *node = ruby_options(3, opts);
        int status = 0;
        if (!ruby_executable_node(node, &status)) {
            boot_done(-1, "Ruby failed to start (its own message is above; check RUBYOPT)");
            return NULL;
        }
        ruby_script(config.program);
        fix_signals();
        rv_stall_init();
        block_async_signals();
        if (boot_ruby_side()) {
            boot_done(1, NULL);
            rv_loop_run();
        }
        exit_status = ruby_cleanup(0);
    }
    return NULL;
}

/* ---- called from Go ---- */

static char *copy(const char *p, size_t n)
{
    char *c = malloc(n + 1);
    if (!c)
        abort();
    memcpy(c, p, n);
    c[n] = 0;
    return c;
}

/* Message buffers are malloc'd on one thread and freed on another, a
 * window's worth per response. glibc gives the free top of an arena back to
 * the kernel past 128 KiB (brk, or madvise in a thread's arena), and the
 * next response faults the same pages in again: measured, 1 MiB responses
 * spent a quarter of the VM thread's time in page faults. Keep up to 8 MiB
 * free per arena instead (32 MiB kept the peak of a body overload up; 4 MiB
 * cost 1 MiB responses 14%: docs/overload.md). Fixing the trim threshold
 * also fixes the mmap threshold (glibc otherwise raises it as it goes):
 * allocations under 4 MiB come from the arenas, as they would after a
 * warm-up.
 *
 * Request bodies are malloc'd on whichever Go thread copies them, and glibc
 * gives each thread that allocates an arena of its own, up to 8 per core:
 * under a body overload a dozen arenas held ~110 MiB between them, and kept
 * it. Two arenas do at the same throughput; MALLOC_ARENA_MAX, when set, is
 * left to decide. What stays free after a burst is given back when the
 * server goes idle (rv_release_memory). A constructor: it must run before
 * any thread but the first has allocated (glibc fixes how many arenas it
 * makes when it first needs one more), so before Go starts its threads. */
__attribute__((constructor)) static void tune_malloc(void)
{
#ifdef __GLIBC__
    mallopt(M_TRIM_THRESHOLD, 8 << 20);
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
    if (!getenv("MALLOC_ARENA_MAX"))
        mallopt(M_ARENA_MAX, 2);
#endif
}

/* Gives the kernel back the free memory of every malloc arena, the pages
 * inside them as well as their tops. */
void rv_release_memory(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
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

void rv_submit(uint32_t kind, uint64_t stream, uint32_t flags, uint64_t aux, const void *data, size_t len)
{
    rv_msg *m = rv_msg_new(kind, stream, flags, aux, len);
    if (len)
        memcpy(m->data, data, len);
    rv_inbox_push(&rv_to_vm, m);
}

/* Go is done with a request (its client went away, or with RV_F_MALFORMED
 * its body was malformed and Go answered 400): marked at once, so a request
 * still waiting in the inbox is dropped before it starts, then told by
 * message. */
void rv_cancel(uint64_t stream, uint32_t flags)
{
    uint32_t slot = RV_SLOT(stream);
    if (rv_L && slot < rv_L->nstreams)
        atomic_store_explicit(&rv_L->cancelled[slot], stream, memory_order_relaxed);
    rv_submit(RV_IN_CANCEL, stream, flags, 0, NULL, 0);
}

rv_msg *rv_out_poll(void)
{
    rv_msg *m = rv_inbox_take(&rv_to_go);
    if (m || !rv_inbox_sleep(&rv_to_go))
        return m ? m : rv_inbox_take(&rv_to_go);
    return NULL;
}

int rv_out_fd(void)
{
    return rv_to_go.efd;
}

int rv_join(void)
{
    pthread_join(vm_thread, NULL);
    return exit_status;
}

void rv_read_stats(rv_vm_stats *out)
{
    out->busy_ns = atomic_load_explicit(&rv_stat.busy_ns, memory_order_relaxed);
    out->lag_ns = atomic_load_explicit(&rv_stat.lag_ns, memory_order_relaxed);
    out->awake_since = atomic_load(&rv_stat.awake_since);
    out->running_since = atomic_load(&rv_stat.running_since);
    out->running_stream = atomic_load_explicit(&rv_stat.running_stream, memory_order_relaxed);
    out->requests = atomic_load_explicit(&rv_stat.requests, memory_order_relaxed);
    out->fibers = atomic_load_explicit(&rv_stat.fibers, memory_order_relaxed);
    out->response_bytes = atomic_load_explicit(&rv_stat.response_bytes, memory_order_relaxed);
    out->gc_count = atomic_load_explicit(&rv_stat.gc_count, memory_order_relaxed);
    out->gc_time_ns = atomic_load_explicit(&rv_stat.gc_time_ns, memory_order_relaxed);
    out->heap_live_slots = atomic_load_explicit(&rv_stat.heap_live_slots, memory_order_relaxed);
    out->offload_busy = atomic_load_explicit(&rv_stat.offload_busy, memory_order_relaxed);
    out->offload_waiting = atomic_load_explicit(&rv_stat.offload_waiting, memory_order_relaxed);
}

uint64_t rv_monotonic_ns(void)
{
    return rv_now();
}

const char *rv_ruby_version(void)
{
    return ruby_version;
}

const char *rv_ruby_platform(void)
{
    return ruby_platform;
}

/* The Ruby ABI this binary was compiled against (ruby_version, arch). */
const char *rv_built_abi(void)
{
#define RV_STR2(x) #x
#define RV_STR(x) RV_STR2(x)
    return RV_STR(RUBY_API_VERSION_MAJOR) "." RV_STR(RUBY_API_VERSION_MINOR) ".0 " RUBY_PLATFORM;
}
