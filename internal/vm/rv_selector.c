/*
 * rv_selector.c: what is ready, and the loop's one wait (the io-event
 * selector's role). Waiters made ready (by a timer, a descriptor, a message
 * or an unblock) join the ready list, which the loop resumes in order. The
 * descriptors fibers wait on, the inbox's eventfd and the next timer share
 * one epoll_wait, made without the GVL so that Ruby threads run meanwhile
 * (DESIGN.md, principle 6); before it, the loop looks for work a few times.
 */
#include "rv_internal.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#ifndef RV_YIELD_SPINS
#define RV_YIELD_SPINS 8
#endif

#define L rv_L

static uint64_t turn_began; /* when the loop last woke */


void rv_selector_init(void)
{
    L->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (L->epfd < 0)
        abort();
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = rv_to_vm.efd};
    epoll_ctl(L->epfd, EPOLL_CTL_ADD, rv_to_vm.efd, &ev);
    turn_began = rv_now();
}

/* ---- the ready list ---- */

void rv_ready_unlink(rv_waiter *w)
{
    if (!w->ready_next)
        return;
    w->ready_prev->ready_next = w->ready_next;
    w->ready_next->ready_prev = w->ready_prev;
    w->ready_next = w->ready_prev = NULL;
}

int rv_ready_empty(void)
{
    return L->ready.ready_next == &L->ready;
}

void rv_make_ready(rv_waiter *w, VALUE result)
{
    if (w->state != RV_W_WAITING)
        return;
    w->state = RV_W_READY;
    w->result = result;
    rv_timer_remove(&L->timers, &w->timer);
    rv_fd_unwatch(w);
    w->ready_prev = L->ready.ready_prev;
    w->ready_next = &L->ready;
    L->ready.ready_prev->ready_next = w;
    L->ready.ready_prev = w;
}

void rv_wake_from_other_thread(void)
{
    if (rb_thread_current() != L->thread)
        rv_inbox_wake(&rv_to_vm);
}

rv_waiter *rv_ready_first(void)
{
    return rv_ready_empty() ? NULL : L->ready.ready_next;
}

rv_waiter *rv_ready_last(void)
{
    return rv_ready_empty() ? NULL : L->ready.ready_prev;
}

/* ---- descriptors ---- */

static int ruby_events(uint32_t got, uint32_t wanted);

static uint32_t interest(rv_fdwait *f)
{
    uint32_t want = 0;
    for (rv_waiter *w = f->first; w; w = w->fd_next)
        want |= w->events;
    return want;
}

static void arm(int fd)
{
    rv_fdwait *f = &L->fds[fd];
    uint32_t want = interest(f);
    if (!want || (f->armed & want) == want)
        return;
    struct epoll_event ev = {.events = want | f->armed | EPOLLONESHOT, .data.fd = fd};
    int op = f->added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    int rc = epoll_ctl(L->epfd, op, fd, &ev);
    if (rc < 0 && errno == ENOENT && op == EPOLL_CTL_MOD)
        rc = epoll_ctl(L->epfd, EPOLL_CTL_ADD, fd, &ev);
    else if (rc < 0 && errno == EEXIST && op == EPOLL_CTL_ADD)
        rc = epoll_ctl(L->epfd, EPOLL_CTL_MOD, fd, &ev);
    if (rc == 0) {
        f->added = 1;
        f->armed = ev.events & ~(uint32_t)EPOLLONESHOT;
        return;
    }
    /* epoll refuses regular files (EPERM): they are always ready. Other
     * errors (a closed descriptor) also end the wait: the IO call then
     * reports the real error. */
    for (rv_waiter *w = f->first, *next; w; w = next) {
        next = w->fd_next;
        rv_make_ready(w, INT2FIX(ruby_events(EPOLLIN | EPOLLOUT | EPOLLPRI, w->events)));
    }
}

void rv_fd_watch(rv_waiter *w)
{
    int fd = w->fd;
    if (fd >= L->nfds) {
        int n = L->nfds ? L->nfds : 64;
        while (n <= fd)
            n *= 2;
        L->fds = realloc(L->fds, (size_t)n * sizeof *L->fds);
        if (!L->fds)
            abort();
        memset(L->fds + L->nfds, 0, (size_t)(n - L->nfds) * sizeof *L->fds);
        L->nfds = n;
    }
    rv_fdwait *f = &L->fds[fd];
    w->fd_prev = NULL;
    w->fd_next = f->first;
    if (f->first)
        f->first->fd_prev = w;
    f->first = w;
    arm(fd);
}

void rv_fd_unwatch(rv_waiter *w)
{
    if (w->fd < 0)
        return;
    rv_fdwait *f = &L->fds[w->fd];
    if (w->fd_prev)
        w->fd_prev->fd_next = w->fd_next;
    else if (f->first == w)
        f->first = w->fd_next;
    else
        return; /* not linked */
    if (w->fd_next)
        w->fd_next->fd_prev = w->fd_prev;
    w->fd_next = w->fd_prev = NULL;
}

/* Ruby's IO::READABLE, IO::PRIORITY, IO::WRITABLE from epoll events. */
static int ruby_events(uint32_t got, uint32_t wanted)
{
    int r = 0;
    if (got & (EPOLLERR | EPOLLHUP))
        got |= EPOLLIN | EPOLLOUT;
    if (got & EPOLLRDHUP)
        got |= EPOLLIN;
    got &= wanted;
    if (got & EPOLLIN)
        r |= 1;
    if (got & EPOLLPRI)
        r |= 2;
    if (got & EPOLLOUT)
        r |= 4;
    return r;
}

static void fd_ready(int fd, uint32_t got)
{
    if (fd >= L->nfds)
        return;
    rv_fdwait *f = &L->fds[fd];
    f->armed = 0;
    for (rv_waiter *w = f->first, *next; w; w = next) {
        next = w->fd_next;
        int r = ruby_events(got, w->events);
        if (r)
            rv_make_ready(w, INT2FIX(r));
    }
    if (f->first)
        arm(fd);
}

/* ---- the wait ---- */

struct poll_args {
    struct epoll_event *events;
    int max, timeout, n, err;
};

static void *poll_nogvl(void *p)
{
    struct poll_args *a = p;
    a->n = epoll_wait(L->epfd, a->events, a->max, a->timeout);
    a->err = errno;
    return NULL;
}

static void poll_ubf(void *p)
{
    (void)p;
    rv_inbox_wake(&rv_to_vm);
}

static int fds_waited_on(void)
{
    return (L->waiting->num_entries > 0 && L->nfds > 0) || rv_relay_fd() >= 0;
}

/* Before sleeping, hand the core to whoever is runnable (the Go threads
 * that are about to send the next request) a few times and look again: a
 * request that arrives meanwhile costs no sleep, no wakeup, no eventfd. */
static int yield_for_work(void)
{
    static int spins = RV_YIELD_SPINS;
    for (int i = 0; i < spins; i++) {
        sched_yield();
        if (atomic_load(&rv_to_vm.head))
            return 1;
    }
    return 0;
}

/* Lets Ruby threads that wait for the GVL in (offload threads done with a
 * call), at most once a millisecond while the loop stays busy: with another
 * Ruby thread alive (the interrupter, rv_interrupt.c, always is) each call
 * hands the GVL round, which cost the loop ~5% of its time when made every
 * turn. Ruby's timer makes the same handover every 100 ms anyway. */
static void let_threads_in(void)
{
    static uint64_t last;
    uint64_t now = rv_now();
    if (now - last >= 1000000) {
        last = now;
        rb_thread_schedule();
    }
}

/* Takes the descriptors and the inbox that are ready, sleeping for them
 * unless busy (work is at hand) or a timer is due. */
void rv_selector_poll(int busy)
{
    static struct epoll_event events[256];
    struct poll_args a = {events, 256, 0, 0, 0};
    rv_relay_flush(); /* a worker: what this turn made goes out */
    busy = busy || !rv_ready_empty() || atomic_load(&rv_to_vm.head);
    if (!busy) {
        rv_timer *t = rv_timer_peek(&L->timers);
        if (t) {
            uint64_t now = rv_now();
            a.timeout = t->deadline <= now ? 0 : (int)((t->deadline - now + 999999) / 1000000);
        } else {
            a.timeout = -1;
        }
    }
    /* A worker's next request comes on its socket, which a yield does
     * not look at. */
    if (a.timeout != 0 && rv_relay_fd() < 0 && yield_for_work())
        a.timeout = 0;
    if (a.timeout == 0) {
        if (fds_waited_on())
            a.n = epoll_wait(L->epfd, events, 256, 0);
        let_threads_in();
    } else if (rv_inbox_sleep(&rv_to_vm)) {
        uint64_t now = rv_now();
        atomic_fetch_add_explicit(&rv_stat.busy_ns, now - turn_began, memory_order_relaxed);
        atomic_store(&rv_stat.awake_since, 0);
        rb_nogvl(poll_nogvl, &a, poll_ubf, NULL, RB_NOGVL_UBF_ASYNC_SAFE);
        atomic_store(&rv_to_vm.sleeping, 0);
        turn_began = rv_now();
        atomic_store(&rv_stat.awake_since, turn_began);
    }
    for (int i = 0; i < a.n; i++) {
        int fd = events[i].data.fd;
        if (fd == rv_to_vm.efd)
            rv_inbox_drain_fd(&rv_to_vm);
        else if (fd == rv_relay_fd())
            rv_relay_events(events[i].events);
        else
            fd_ready(fd, events[i].events);
    }
}
