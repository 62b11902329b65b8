/*
 * rv_template.c: --preload. A template process boots the app once, before
 * any Go runs, and forks the workers, which share its pages until they
 * write them; Go's runtime starts in each worker, never in the template
 * (a Go process cannot fork and go on: its threads would not follow).
 *
 * The binary started with RUVOY_TEMPLATE_FD runs template_main from a
 * constructor, before Go's main, and never returns: it reads its settings
 * from the front end (wire.h, "Templates"), boots the VM thread as a
 * process with Go does (rv_start), loads the app, and then forks a worker
 * at each RV_TEMPLATE_FORK. The fork is Ruby's own Process.fork, on the VM
 * thread, so that Ruby's and the app's fork hooks run; twice, so that the
 * worker is orphaned and taken up by the front end (a child subreaper),
 * which waits for it as for a worker it started. In the worker the VM
 * thread is the only thread: it makes its inboxes, epoll set and
 * interrupter afresh, puts its sockets on two free descriptors in a row,
 * and starts Go on a new thread, through Go's `main`
 * with the worker's argv, environ and auxv as a new process has them.
 * Go's worker code then finds the VM running and the app loaded
 * (rv_forked_app, RUVOY_FORKED_APP).
 */
#include "rv_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern int main(int argc, char **argv); /* Go's runtime entry (rt0) */

int rv_forked_app; /* in a forked worker: the app the template loaded */
static int template_fd = -1;
static char *title;      /* argv[0] as the kernel shows it: the process's title */
static size_t title_len; /* its room */
static int compacted;
static struct sigaction at_fork[NSIG];

/* ---- the template's socket ---- */

static int read_full(int fd, void *p, size_t n)
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

/* To the front end's socket or the pipe of a fork: a socket the front
 * end closed fails the write (MSG_NOSIGNAL), not the process. */
static void write_full(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = fd == template_fd ? send(fd, c, n, MSG_NOSIGNAL) : write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* the front end is gone: the next read says so */
        c += w;
        n -= (size_t)w;
    }
}

static void reply(uint64_t aux, const char *text, size_t len)
{
    char h[RV_FRAME_HEADER] = {0};
    uint32_t kind = RV_TEMPLATE_REPLY, n = (uint32_t)len;
    memcpy(h, &kind, 4);
    memcpy(h + 16, &aux, 8);
    memcpy(h + 24, &n, 4);
    write_full(template_fd, h, sizeof h);
    write_full(template_fd, text, len);
}

typedef struct frame {
    uint32_t kind, flags, len;
    int fds[2], nfds;
} frame;

/* A frame's header, with the descriptors that came with it. */
static int read_header(frame *f)
{
    char h[RV_FRAME_HEADER];
    char ctl[CMSG_SPACE(2 * sizeof(int))];
    struct iovec iov = {h, sizeof h};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    ssize_t n;
    while ((n = recvmsg(template_fd, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    if (n <= 0)
        return -1;
    f->nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        int got[2];
        memcpy(got, CMSG_DATA(c), (size_t)(k < 2 ? k : 2) * sizeof(int));
        for (int i = 0; i < k && i < 2; i++)
            f->fds[f->nfds++] = got[i];
    }
    if (n < (ssize_t)sizeof h && read_full(template_fd, h + n, sizeof h - (size_t)n) < 0)
        return -1;
    uint32_t zero;
    memcpy(&f->kind, h, 4);
    memcpy(&f->flags, h + 4, 4);
    memcpy(&f->len, h + 24, 4);
    memcpy(&zero, h + 28, 4);
    return zero == 0 && f->len <= RV_FRAME_MAX ? 0 : -1;
}

/* The VM's reply to a control message. Log entries that come meanwhile
 * (the app's boot warnings) go to stderr. */
static rv_msg *await_reply(void)
{
    for (;;) {
        rv_msg *m = rv_out_poll(), *got = NULL;
        if (!m) {
            struct pollfd p = {.fd = rv_out_fd(), .events = POLLIN};
            poll(&p, 1, -1);
            uint64_t n;
            if (read(rv_out_fd(), &n, sizeof n) < 0) {
                /* EAGAIN: another look took the wake */
            }
            continue;
        }
        while (m) {
            rv_msg *next = m->next;
            if (m->kind == RV_OUT_REPLY && !got) {
                got = m;
            } else {
                rv_reader r = {m->data, m->data + m->len};
                const char *s;
                long n;
                if (m->kind == RV_OUT_LOG && rv_read_str(&r, &s, &n) && n > 0)
                    fprintf(stderr, "ruvoy template: %.*s\n", (int)n, s);
                rv_msg_free(m);
            }
            m = next;
        }
        if (got)
            return got;
    }
}

/* ---- in a forked worker ---- */

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
    close(template_fd);
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
    snprintf(text, sizeof text, "%d", rv_forked_app);
    setenv("RUVOY_FORKED_APP", text, 1); /* cluster.ForkedAppEnv */
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

/* From rv_start in a forked worker, on a Go thread: Go has installed its
 * signal handlers over the VM's; the VM gets its own back. */
void rv_template_after_go(void)
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
void rv_template_fork(rv_msg *m)
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
        if (read_full(p[0], &pid, sizeof pid) < 0)
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
        write_full(p[1], &pid, sizeof pid);
        _exit(0);
    }
    close(p[1]);
    become_worker(fd, urgent, (int)m->flags);
}

/* ---- the template's main thread ---- */

static char *dup_str(const char *p, long n)
{
    char *c = malloc((size_t)n + 1);
    if (!c)
        abort();
    memcpy(c, p, (size_t)n);
    c[n] = 0;
    return c;
}

static void fail(const char *why, size_t len)
{
    reply(0, why, len);
    _exit(1);
}

static void template_main(void)
{
    prctl(PR_SET_NAME, "ruvoy-template");
    /* The front end's signals, as a worker's Go side ignores them: it
     * stops the workers and the template after its drain. */
    int ignore[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof ignore / sizeof ignore[0]; i++)
        signal(ignore[i], SIG_IGN);

    frame f;
    if (read_header(&f) < 0 || f.kind != RV_TEMPLATE_BOOT)
        _exit(2);
    char *p = malloc(f.len ? f.len : 1);
    if (!p || read_full(template_fd, p, f.len) < 0)
        _exit(2);
    rv_template_settings s;
    if (!rv_template_settings_read(p, f.len, &s))
        fail("the template's settings are malformed", 37);
    rv_config cfg = {
        .program = dup_str(s.program, s.program_len),
        .argv = s.argv,
        .argc = (int)s.argc,
        .rubylib = s.rubylib,
        .rubylib_len = (size_t)s.rubylib_len,
        .max_streams = s.max_streams,
        .window = s.window,
    };
    char *error = NULL;
    if (rv_start(&cfg, &error) != 0) {
        char text[512];
        int n = snprintf(text, sizeof text, "starting Ruby: %s", error);
        fail(text, (size_t)(n < (int)sizeof text ? n : (int)sizeof text - 1));
    }
    rv_submit(RV_IN_LOAD_APP, 0, 0, 0, s.load, (size_t)s.load_len);
    rv_msg *m = await_reply();
    if (m->aux == 0)
        fail(m->data, m->len);
    rv_forked_app = (int)m->aux;
    rv_msg_free(m);
    reply((uint64_t)rv_forked_app, "", 0);

    for (;;) {
        if (read_header(&f) < 0)
            break; /* the front end closed the socket: stop */
        if (f.kind != RV_TEMPLATE_FORK || f.len != 0 || f.nfds != 2) {
            for (int i = 0; i < f.nfds; i++)
                close(f.fds[i]);
            fail("a malformed frame from the front end", 36);
        }
        uint64_t fds = (uint64_t)(uint32_t)f.fds[0] | (uint64_t)(uint32_t)f.fds[1] << 32;
        rv_submit(RV_IN_FORK, 0, f.flags, fds, NULL, 0);
        m = await_reply();
        reply(m->aux, m->data, m->len);
        rv_msg_free(m);
    }
    rv_submit(RV_IN_STOP, 0, 0, 0, NULL, 0);
    _exit(rv_join());
}

/* glibc hands constructors the process's arguments. After rv_malloc.c's
 * (whose priority runs it first), before Go's runtime starts. */
__attribute__((constructor)) static void template_check(int argc, char **argv)
{
    const char *fd = getenv("RUVOY_TEMPLATE_FD"); /* frontend.TemplateFDEnv */
    if (!fd)
        return;
    template_fd = atoi(fd);
    fcntl(template_fd, F_SETFD, FD_CLOEXEC); /* not for what the app runs */
    unsetenv("RUVOY_TEMPLATE_FD");
    if (argc > 0 && argv[0]) {
        title = argv[0];
        title_len = strlen(argv[0]);
    }
    template_main();
}
