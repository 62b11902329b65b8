/*
 * rv_fork.c: a worker forked from a template (--preload; the template
 * process is rv_template.c): the fork on the template's VM thread, and the
 * worker's start.
 *
 * The fork is Ruby's own Process.fork, so that Ruby's and the app's fork
 * hooks run; twice, so that the worker is orphaned and taken up by the
 * front end (a child subreaper), which waits for it as for a worker it
 * started. In the worker the VM thread is the only thread: it makes its
 * inboxes, epoll set and interrupter afresh, puts its sockets on two free
 * descriptors in a row, and starts Go's runtime on a new thread, through
 * Go's `main` with the worker's argv, environ and auxv as a new process
 * has them. Go's worker code then finds the VM running and the app loaded
 * (rv_forked_app: vm.Start, vm.ForkedApp).
 */
#include "rv_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

extern int main(int argc, char **argv); /* Go's runtime entry (rt0) */

int rv_forked_app;        /* in a forked worker: the app the template loaded */
static int parent_fd = -1; /* the template's socket, not the worker's */
static char *title;       /* argv[0] as the kernel shows it: the process's title */
static size_t title_len;  /* its room */
static int compacted;
static struct sigaction at_fork[NSIG];

void rv_fork_prepare(int template_fd, char *argv0, size_t room)
{
    parent_fd = template_fd;
    title = argv0;
    title_len = room;
}

int rv_read_full(int fd, void *p, size_t n)
{
    char *c = p;
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

void rv_write_full(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* the reader is gone: its end says so */
        c += w;
        n -= (size_t)w;
    }
}

static char **go_argv;

static void *go_start(void *arg)
{
    (void)arg;
    main(1, go_argv);
    return NULL;
}

/* argv, environ and the auxiliary vector, one after the other as the
 * kernel lays them out for a new process: Go's runtime finds auxv after
 * environ's NULL. */
static void build_go_argv(const char *arg0)
{
    static uint64_t auxv[1024];
    ssize_t na = 0;
    int fd = open("/proc/self/auxv", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        na = read(fd, auxv, sizeof auxv - 2 * sizeof auxv[0]);
        close(fd);
    }
    if (na < 0)
        na = 0;
    extern char **environ;
    size_t nenv = 0;
    while (environ[nenv])
        nenv++;
    /* arg0, NULL, environ, NULL, auxv (ending AT_NULL, 0) */
    char **v = calloc(2 + nenv + 1 + (size_t)na / sizeof(char *) + 2, sizeof *v);
    if (!v)
        abort();
    /* AT_RANDOM seeds Go's runtime (map hashes, math/rand): the kernel's
     * bytes for the template are every worker's; each gets its own. */
    static unsigned char seed[16];
    if (getrandom(seed, sizeof seed, 0) == (ssize_t)sizeof seed)
        for (size_t i = 0; i + 1 < (size_t)na / sizeof auxv[0]; i += 2)
            if (auxv[i] == AT_RANDOM)
                auxv[i + 1] = (uint64_t)(uintptr_t)seed;
    v[0] = strdup(arg0);
    memcpy(&v[2], environ, nenv * sizeof *v);
    memcpy(&v[3 + nenv], auxv, (size_t)na);
    go_argv = v;
}

static void set_title(const char *s)
{
    if (!title)
        return;
    memset(title, 0, title_len);
    snprintf(title, title_len + 1, "%s", s);
    prctl(PR_SET_NAME, "ruvoy-worker");
}

/* The worker's socket and urgent socket on two descriptors in a row, as
 * a worker started anew has them (RUVOY_WORKER_FD names the first): free
 * ones, not 3 and 4, which the template's VM and app may hold. Returns the
 * first. */
static int place_sockets(int fd, int urgent)
{
    for (int at = 10;; at++) {
        int a = fcntl(fd, F_DUPFD_CLOEXEC, at);
        if (a < 0)
            _exit(1);
        if (fcntl(a + 1, F_GETFD) < 0 && errno == EBADF) {
            if (dup3(urgent, a + 1, O_CLOEXEC) < 0)
                _exit(1);
            close(fd);
            close(urgent);
            return a;
        }
        close(a);
        at = a;
    }
}

/* The worker's half of a fork, on its only thread: its sockets placed,
 * fresh inboxes, epoll set and interrupter, then Go. */
static void become_worker(int fd, int urgent, int slot)
{
    int sockets = place_sockets(fd, urgent);
    close(parent_fd);
    close(rv_to_vm.efd);
    close(rv_to_go.efd);
    if (rv_inbox_init(&rv_to_vm) < 0 || rv_inbox_init(&rv_to_go) < 0)
        _exit(1);
    close(rv_L->epfd);
    rv_selector_init();
    rv_interrupt_restart();

    char text[32];
    snprintf(text, sizeof text, "%d", sockets);
    setenv("RUVOY_WORKER_FD", text, 1); /* cluster.FDEnv */
    snprintf(text, sizeof text, "ruvoy: worker %d", slot);
    set_title(text);
    build_go_argv(text);
    for (int sig = 1; sig < NSIG; sig++)
        sigaction(sig, NULL, &at_fork[sig]);

    /* Go's threads take the signals this thread blocks: the new thread
     * starts with none blocked, as a new process's first thread would. */
    sigset_t none, was;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, &was);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 8u << 20);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int rc = pthread_create(&t, &attr, go_start, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    if (rc != 0)
        _exit(1);
}

/* From vm.Start in a forked worker, on a Go thread, instead of rv_start:
 * Go has installed its signal handlers over the VM's; the VM gets its own
 * back. */
void rv_fork_attached(void)
{
    rv_signals_refix(at_fork);
}

static VALUE fork_once(VALUE unused)
{
    (void)unused;
    return rb_funcall(rb_mProcess, rb_intern("fork"), 0);
}

/* Before the first fork: what the boot left for the GC to free is freed,
 * and the live objects packed, so that fewer pages are shared half-empty
 * (a worker's GC writes the pages it sweeps). */
static VALUE compact(VALUE unused)
{
    (void)unused;
    rb_funcall(rb_mGC, rb_intern("start"), 0);
    if (rb_respond_to(rb_mGC, rb_intern("compact")))
        rb_funcall(rb_mGC, rb_intern("compact"), 0);
    return Qnil;
}

static void fork_failed(const char *why, int fd, int urgent)
{
    close(fd);
    close(urgent);
    rv_send_reply(0, why, strlen(why));
}

/* RV_IN_FORK, on the template's VM thread. */
void rv_fork(rv_msg *m)
{
    int fd = (int)(m->aux & 0xffffffffu), urgent = (int)(m->aux >> 32);
    int state = 0;
    if (!compacted) {
        compacted = 1;
        rb_protect(compact, Qnil, &state);
        if (state)
            rb_set_errinfo(Qnil);
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        fork_failed("making a pipe failed", fd, urgent);
        return;
    }
    VALUE middle = rb_protect(fork_once, Qnil, &state);
    if (state) {
        rb_set_errinfo(Qnil);
        close(p[0]);
        close(p[1]);
        fork_failed("Process.fork failed", fd, urgent);
        return;
    }
    if (!NIL_P(middle)) { /* the template */
        close(p[1]);
        int64_t pid = 0;
        if (rv_read_full(p[0], &pid, sizeof pid) < 0)
            pid = 0;
        close(p[0]);
        /* Reaped, it has orphaned the worker: the front end is its parent
         * before the front end hears its pid. */
        while (waitpid((pid_t)NUM2LONG(middle), NULL, 0) < 0 && errno == EINTR)
            ;
        close(fd);
        close(urgent);
        if (pid > 0)
            rv_send_reply((uint64_t)pid, "", 0);
        else
            rv_send_reply(0, "the second fork failed", 22);
        return;
    }
    /* The middle process: fork the worker, say its pid, and go. */
    close(p[0]);
    VALUE worker = rb_protect(fork_once, Qnil, &state);
    if (state || !NIL_P(worker)) {
        int64_t pid = state ? 0 : (int64_t)NUM2LONG(worker);
        rv_write_full(p[1], &pid, sizeof pid);
        _exit(0);
    }
    close(p[1]);
    become_worker(fd, urgent, (int)m->flags);
}
