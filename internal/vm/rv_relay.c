/*
 * rv_relay.c: a worker's frames to and from the front end (wire.h,
 * "Workers"), read and written by the VM thread itself.
 *
 * Go opens the relay with the socket before the VM boots (rv_relay_open):
 * from then on every frame the worker sends goes through the out buffer
 * here, under one mutex, so frames from any thread never interleave. Once
 * the app has loaded, RV_IN_RELAY hands the reading over too: the loop's
 * epoll watches the socket, the frames read become inbox messages, and the
 * VM's messages for Go become frames, written at the end of the loop's
 * turn with one sendmsg. A request then wakes no Go thread in the worker:
 * with as many VM threads as cores, each Go thread woken took a core from
 * a VM thread (docs/benchmarks.md, "Cluster mode"). Go keeps the control
 * replies, its own frames (rv_relay_send) and the urgent socket (internal/cluster/worker);
 * RV_OUT_RELAY_END tells it the socket is done.
 */
#include "rv_internal.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_FDS RV_FRAME_MAX_FDS
#define FLUSH_AT (256 << 10) /* the VM thread writes at once past this much */

_Thread_local int rv_vm_thread; /* set on the VM thread (rv_boot.c) */

/* Descriptors in the order their frames come, oldest first. */
typedef struct fd_queue {
    int *fd;
    int n, cap;
} fd_queue;

static void fd_push(fd_queue *q, int fd)
{
    if (q->n == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 16;
        q->fd = realloc(q->fd, (size_t)q->cap * sizeof(int));
        if (!q->fd)
            abort();
    }
    q->fd[q->n++] = fd;
}

/* Takes the k oldest off the queue, closing them. */
static void fd_close_front(fd_queue *q, int k)
{
    for (int i = 0; i < k; i++)
        close(q->fd[i]);
    memmove(q->fd, q->fd + k, (size_t)(q->n - k) * sizeof(int));
    q->n -= k;
}

static struct {
    int fd; /* -1: no relay (one process) */

    /* out: any thread, under mu */
    pthread_mutex_t mu;
    char *out;
    size_t off, len, cap;
    fd_queue out_fds; /* descriptors of frames not yet sent */
    uint64_t written; /* bytes written since the start */
    int broken;       /* a write failed: what comes is dropped */
    int closed;       /* rv_relay_finish ran */

    /* in: the VM thread only (reading is read by any) */
    _Atomic int reading;
    uint64_t app; /* the app requests are for */
    int out_armed; /* EPOLLOUT is in the epoll set */
    char *in;
    size_t in_len, in_cap;
    fd_queue in_fds; /* descriptors received, not yet taken by a frame */
} R = {.fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

/* Requests read and those not yet final (an int64): the held reporter
 * reads them (rv_held.c), and Go atomically without a call
 * (vm.RelayCounts). */
static _Atomic uint64_t counts[2];
enum { ADMITTED, INFLIGHT };

/* ---- out ---- */

static void reserve(size_t n)
{
    if (R.off > 0 && R.off == R.len)
        R.off = R.len = 0;
    if (R.len + n <= R.cap)
        return;
    if (R.off > 0) { /* move what is left to the front first */
        memmove(R.out, R.out + R.off, R.len - R.off);
        R.len -= R.off;
        R.off = 0;
        if (R.len + n <= R.cap)
            return;
    }
    size_t cap = R.cap ? R.cap : 64 << 10;
    while (cap < R.len + n)
        cap *= 2;
    R.out = realloc(R.out, cap);
    if (!R.out)
        abort();
    R.cap = cap;
}

static void put_frame(uint32_t kind, uint64_t stream, uint32_t flags, uint64_t aux, const void *p, size_t n)
{
    reserve(RV_FRAME_HEADER + n);
    char *h = R.out + R.len;
    uint32_t len32 = (uint32_t)n, zero = 0;
    memcpy(h, &kind, 4);
    memcpy(h + 4, &flags, 4);
    memcpy(h + 8, &stream, 8);
    memcpy(h + 16, &aux, 8);
    memcpy(h + 24, &len32, 4);
    memcpy(h + 28, &zero, 4);
    if (n)
        memcpy(h + RV_FRAME_HEADER, p, n);
    R.len += RV_FRAME_HEADER + n;
}

static void drop_out(void)
{
    fd_close_front(&R.out_fds, R.out_fds.n);
    R.off = R.len = 0;
}

/* Writes what it can without blocking, under mu: 1 when all is out (or
 * dropped), 0 when the socket is full. */
static int flush_locked(void)
{
    while (!R.broken && R.off < R.len) {
        ssize_t n;
        if (R.out_fds.n > 0) {
            /* A frame's descriptor goes no later than its first byte:
             * with the sendmsg that starts at or before that frame. */
            int k = R.out_fds.n < MAX_FDS ? R.out_fds.n : MAX_FDS;
            char cbuf[CMSG_SPACE(MAX_FDS * sizeof(int))];
            memset(cbuf, 0, sizeof cbuf);
            struct iovec iov = {R.out + R.off, R.len - R.off};
            struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                                .msg_controllen = CMSG_SPACE(k * sizeof(int))};
            struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(k * sizeof(int));
            memcpy(CMSG_DATA(c), R.out_fds.fd, k * sizeof(int));
            n = sendmsg(R.fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n > 0)
                fd_close_front(&R.out_fds, k); /* they crossed: the front end has its own */
        } else {
            n = send(R.fd, R.out + R.off, R.len - R.off, MSG_DONTWAIT | MSG_NOSIGNAL);
        }
        if (n > 0) {
            R.off += (size_t)n;
            R.written += (uint64_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return 0;
        } else {
            R.broken = 1; /* the front end is gone: the read side says so */
            drop_out();
        }
    }
    if (R.off == R.len)
        R.off = R.len = 0;
    return 1;
}

/* Writes until the bytes up to target are out (or the socket broke, or
 * the deadline passed), waiting for room: for threads other than the VM
 * thread, which may be held by Ruby code and flush nothing meanwhile. */
static void flush_until(uint64_t target, uint64_t deadline)
{
    while (!flush_locked() && R.written < target && rv_now() < deadline) {
        pthread_mutex_unlock(&R.mu);
        struct pollfd p = {.fd = R.fd, .events = POLLOUT};
        poll(&p, 1, 100);
        pthread_mutex_lock(&R.mu);
    }
}

/* Gives back the out buffer once it is empty (the idle release,
 * rv_release_memory): a burst of responses the front end reads slower than
 * the VM makes them grows it (128 stalled 256 KiB responses: 64 MiB), and
 * it would keep that size for good. */
void rv_relay_trim(void)
{
    pthread_mutex_lock(&R.mu);
    if (R.off == R.len && R.cap > (64 << 10)) {
        free(R.out);
        R.out = NULL;
        R.off = R.len = R.cap = 0;
    }
    pthread_mutex_unlock(&R.mu);
}

static int take(rv_msg *m);

void rv_relay_open(int fd)
{
    pthread_mutex_lock(&R.mu);
    R.fd = fd;
    pthread_mutex_unlock(&R.mu);
    rv_outbox_divert(take);
}

/* Who hears that a request came to a worker with none in flight (the
 * held reporter, which then looks again). */
static void (*_Atomic on_busy)(void);

void rv_relay_on_busy(void (*fn)(void))
{
    atomic_store(&on_busy, fn);
}

void rv_relay_send(uint32_t kind, uint64_t stream, uint32_t flags, uint64_t aux, const void *data, size_t len)
{
    pthread_mutex_lock(&R.mu);
    if (R.fd >= 0 && !R.closed && !R.broken) {
        put_frame(kind, stream, flags, aux, data, len);
        flush_until(R.written + (R.len - R.off), UINT64_MAX);
    }
    pthread_mutex_unlock(&R.mu);
}

/* A message for the front end, from Go (before the VM reads the socket)
 * or from the VM: frame it, and take a file's descriptor along. */
static void put_msg(rv_msg *m)
{
    if (m->flags & RV_FLAG_FINAL)
        atomic_fetch_sub_explicit(&counts[INFLIGHT], 1, memory_order_relaxed); /* wraps as an int64 */
    int32_t fd = -1;
    if (m->kind == RV_OUT_FILE && m->len >= RV_RESP_FD_AT + 4)
        memcpy(&fd, m->data + RV_RESP_FD_AT, 4);
    if (R.fd < 0 || R.closed || R.broken) {
        if (fd >= 0)
            close(fd);
        return;
    }
    if (fd >= 0)
        fd_push(&R.out_fds, fd);
    put_frame(m->kind, m->stream, m->flags, m->aux, m->data, m->len);
}

void rv_relay_send_msg(rv_msg *m)
{
    pthread_mutex_lock(&R.mu);
    put_msg(m);
    flush_until(R.written + (R.len - R.off), UINT64_MAX);
    pthread_mutex_unlock(&R.mu);
    rv_msg_free(m);
}

static void arm_out(int want)
{
    if (R.out_armed == want)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.fd = R.fd};
    if (epoll_ctl(rv_L->epfd, EPOLL_CTL_MOD, R.fd, &ev) == 0)
        R.out_armed = want;
}

/* The outbox's divert: a message for the front end, once the relay reads
 * the socket; 1 when it took it. */
static int take(rv_msg *m)
{
    if (!R.reading || m->kind == RV_OUT_REPLY || m->kind == RV_OUT_RELAY_END)
        return 0;
    pthread_mutex_lock(&R.mu);
    put_msg(m);
    if (!rv_vm_thread) {
        /* The VM thread may sleep: write now, and have it watch for room
         * if there is none. */
        if (!flush_locked())
            rv_inbox_wake(&rv_to_vm);
    } else if (R.len - R.off >= FLUSH_AT) {
        flush_locked();
    }
    pthread_mutex_unlock(&R.mu);
    rv_msg_free(m);
    return 1;
}

void rv_relay_flush(void)
{
    if (!R.reading)
        return;
    pthread_mutex_lock(&R.mu);
    int done = flush_locked();
    pthread_mutex_unlock(&R.mu);
    arm_out(!done);
}

/* From the held reporter once Ruby code has held the VM thread: what a fiber
 * sent meanwhile (a streamed chunk, a log line) waits for the end of the
 * loop's turn, which may be long in coming; write it now. A turn of short
 * requests is not cut: its batch stays one write. */
void rv_relay_flush_held(void)
{
    if (!R.reading)
        return;
    pthread_mutex_lock(&R.mu);
    if (!flush_locked())
        rv_inbox_wake(&rv_to_vm); /* the loop watches for room once it runs */
    pthread_mutex_unlock(&R.mu);
}

/* The VM thread is about to be busy with no request (a GC step between
 * requests, rv_gc_idle.c), or is done: said to the front end at once as
 * the held reporter says a hold, so that it sends new requests to other
 * workers meanwhile. */
void rv_relay_busy(int busy)
{
    if (!R.reading)
        return;
    pthread_mutex_lock(&R.mu);
    put_frame(RV_WORKER_HELD, 0, 0, (uint64_t)busy, NULL, 0);
    flush_locked();
    pthread_mutex_unlock(&R.mu);
}

void rv_relay_finish(void)
{
    pthread_mutex_lock(&R.mu);
    if (R.fd >= 0 && !R.closed) {
        flush_until(UINT64_MAX, rv_now() + 5000000000u);
        drop_out();
        R.closed = 1;
        shutdown(R.fd, SHUT_WR);
    }
    pthread_mutex_unlock(&R.mu);
}

uint64_t *rv_relay_counts(void)
{
    return (uint64_t *)counts;
}

/* ---- in: the VM thread ---- */

/* The VM stops reading: what it sends from now on goes through Go
 * (rv_relay_send_msg), after what it sent so far. */
static void end(uint64_t why, const char *text)
{
    if (!R.reading)
        return;
    R.reading = 0;
    epoll_ctl(rv_L->epfd, EPOLL_CTL_DEL, R.fd, NULL);
    pthread_mutex_lock(&R.mu);
    flush_locked();
    pthread_mutex_unlock(&R.mu);
    size_t n = text ? strlen(text) : 0;
    rv_msg *m = rv_msg_new(RV_OUT_RELAY_END, 0, 0, why, n);
    if (n)
        memcpy(m->data, text, n);
    rv_inbox_push(&rv_to_go, m);
}

static int take_fd(void)
{
    if (R.in_fds.n == 0)
        return -1;
    int fd = R.in_fds.fd[0];
    memmove(R.in_fds.fd, R.in_fds.fd + 1, (size_t)(R.in_fds.n - 1) * sizeof(int));
    R.in_fds.n--;
    return fd;
}

/* One frame read: the message the worker's Go side would have submitted. */
static void frame_in(uint32_t kind, uint64_t stream, uint32_t flags, uint64_t aux, const char *p, size_t n)
{
    if (kind >= RV_WORKER_CONFIG)
        return;
    switch (kind) {
    case RV_IN_STOP:
        end(RV_RELAY_STOP, NULL);
        return;
    case RV_IN_REQUEST:
        aux = R.app; /* the front end's number for it is not the VM's */
        atomic_fetch_add_explicit(&counts[ADMITTED], 1, memory_order_relaxed);
        if (atomic_fetch_add(&counts[INFLIGHT], 1) == 0) {
            void (*busy)(void) = atomic_load(&on_busy);
            if (busy)
                busy();
        }
        break;
    case RV_IN_CANCEL: {
        uint32_t index = RV_INDEX(stream);
        if (index < rv_L->nstreams)
            atomic_store_explicit(&rv_L->cancelled[index], stream, memory_order_relaxed);
        break;
    }
    case RV_IN_HIJACKED:
        if (!(flags & RV_FLAG_FAILED)) {
            int fd = take_fd();
            if (fd >= 0) {
                aux = (uint64_t)fd;
                n = 0;
            } else {
                flags = RV_FLAG_FAILED;
                p = "its descriptor was lost on the way to the worker";
                n = strlen(p);
            }
        }
        break;
    }
    rv_msg *m = rv_msg_new(kind, stream, flags, aux, n);
    if (n)
        memcpy(m->data, p, n);
    rv_inbox_push(&rv_to_vm, m);
}

/* Hands on the whole frames at the front of the in buffer. */
static void frames_in(void)
{
    size_t at = 0;
    while (R.reading && R.in_len - at >= RV_FRAME_HEADER) {
        const char *h = R.in + at;
        uint32_t kind, flags, len32;
        uint64_t stream, aux;
        memcpy(&kind, h, 4);
        memcpy(&flags, h + 4, 4);
        memcpy(&stream, h + 8, 8);
        memcpy(&aux, h + 16, 8);
        memcpy(&len32, h + 24, 4);
        if (len32 > RV_FRAME_MAX) {
            end(RV_RELAY_FAILED, "a frame from the front end is too long");
            return;
        }
        if (R.in_len - at < RV_FRAME_HEADER + (size_t)len32)
            break;
        frame_in(kind, stream, flags, aux, h + RV_FRAME_HEADER, len32);
        at += RV_FRAME_HEADER + (size_t)len32;
    }
    memmove(R.in, R.in + at, R.in_len - at);
    R.in_len -= at;
}

static void keep_fds(struct msghdr *mh)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            fd_push(&R.in_fds, fd);
        }
    }
}

static void readable(void)
{
    for (int reads = 0; R.reading && reads < 16; reads++) {
        if (R.in_cap - R.in_len < (64 << 10)) {
            size_t cap = R.in_cap ? R.in_cap * 2 : 128 << 10;
            R.in = realloc(R.in, cap);
            if (!R.in)
                abort();
            R.in_cap = cap;
        }
        char cbuf[CMSG_SPACE((MAX_FDS + 16) * sizeof(int))];
        struct iovec iov = {R.in + R.in_len, R.in_cap - R.in_len};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
        ssize_t n = recvmsg(R.fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n < 0) {
            end(RV_RELAY_FAILED, strerror(errno));
            return;
        }
        if (mh.msg_controllen > 0)
            keep_fds(&mh);
        if (mh.msg_flags & MSG_CTRUNC) { /* the kernel closed the rest */
            end(RV_RELAY_FAILED, "a descriptor from the front end was lost (control message cut short)");
            return;
        }
        if (n == 0) {
            end(R.in_len ? RV_RELAY_FAILED : RV_RELAY_CLOSED, R.in_len ? "the front end's socket ended within a frame" : NULL);
            return;
        }
        R.in_len += (size_t)n;
        frames_in();
        /* A frame longer than the buffer: room for the whole of it. */
        if (R.in_len >= RV_FRAME_HEADER) {
            uint32_t len32;
            memcpy(&len32, R.in + 24, 4);
            size_t want = RV_FRAME_HEADER + (size_t)len32 + (64 << 10);
            if (len32 <= RV_FRAME_MAX && want > R.in_cap) {
                R.in = realloc(R.in, want);
                if (!R.in)
                    abort();
                R.in_cap = want;
            }
        }
    }
}

void rv_relay_begin(rv_msg *m)
{
    R.in_len = 0;
    if (m->len) {
        R.in = realloc(R.in, m->len + (128 << 10));
        if (!R.in)
            abort();
        R.in_cap = m->len + (128 << 10);
        memcpy(R.in, m->data, m->len);
        R.in_len = m->len;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = (int)m->aux};
    if (R.fd != (int)m->aux || epoll_ctl(rv_L->epfd, EPOLL_CTL_ADD, R.fd, &ev) != 0) {
        const char *why = "the worker's socket cannot be watched";
        rv_send_reply(0, why, strlen(why));
        return;
    }
    R.reading = 1;
    R.app = m->flags;
    rv_send_reply(1, "", 0);
    frames_in();
}

int rv_relay_fd(void)
{
    return R.reading ? R.fd : -1;
}

void rv_relay_events(uint32_t events)
{
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
        readable();
    if (R.reading && (events & EPOLLOUT))
        rv_relay_flush();
}
