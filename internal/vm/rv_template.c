/*
 * rv_template.c: --preload. A template process boots the app once, before
 * any Go runs, and forks the workers, which share its pages until they
 * write them; Go's runtime starts in each worker, never in the template
 * (a Go process cannot fork and go on: its threads would not follow).
 *
 * The binary started with RUVOY_TEMPLATE_FD runs template_main from a
 * constructor, before Go's main, and never returns: it reads its settings
 * from the front end (wire.h, "Templates"), boots the VM thread as a
 * process with Go does (rv_start), loads the app, and then has the VM
 * thread fork a worker at each RV_TEMPLATE_FORK (rv_fork.c).
 */
#include "rv_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int template_fd = -1;

static void reply(uint64_t aux, const char *text, size_t len)
{
    char h[RV_FRAME_HEADER] = {0};
    uint32_t kind = RV_TEMPLATE_REPLY, n = (uint32_t)len;
    memcpy(h, &kind, 4);
    memcpy(h + 16, &aux, 8);
    memcpy(h + 24, &n, 4);
    rv_write_full(template_fd, h, sizeof h);
    rv_write_full(template_fd, text, len);
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
    if (n < (ssize_t)sizeof h && rv_read_full(template_fd, h + n, sizeof h - (size_t)n) < 0)
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
    int ignore[] = {SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGTTIN, SIGTTOU,
                    SIGPIPE}; /* a socket the front end closed fails a write, not the process */
    for (size_t i = 0; i < sizeof ignore / sizeof ignore[0]; i++)
        signal(ignore[i], SIG_IGN);

    frame f;
    if (read_header(&f) < 0 || f.kind != RV_TEMPLATE_BOOT)
        _exit(2);
    char *p = malloc(f.len ? f.len : 1);
    if (!p || rv_read_full(template_fd, p, f.len) < 0)
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
    /* Ruvoy.before_fork's blocks, once, before any fork: one that raises
     * fails the template's boot. */
    rv_submit(RV_IN_HOOKS, 0, 0, RV_HOOKS_BEFORE_FORK, NULL, 0);
    m = await_reply();
    if (m->aux == 0)
        fail(m->data, m->len);
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
    /* The room a worker's title takes over (frontend's template.go names
     * the template at length). */
    if (argc > 0 && argv[0])
        rv_fork_prepare(template_fd, argv[0], strlen(argv[0]));
    template_main();
}
