/*
 * rv_held.c: a worker's held reporter: a plain thread that looks at its VM thread.
 *
 * While the worker has requests in flight (and for QUIET_NS after), the
 * reporter looks every HELD_NS / 2: once Ruby code has held the VM thread past
 * HELD_NS it tells the front end (RV_WORKER_HELD), which sends new requests
 * to other workers meanwhile, and writes what the held VM sent (a streamed
 * chunk, a log line: rv_relay_flush_held); it says so again when Ruby lets
 * go. A quiet worker's reporter sleeps on an eventfd written when the relay
 * counts a request in (busy, which the relay calls: rv_relay_on_busy). It used to be a goroutine: each of its
 * looks woke Go's timer thread, often twice, and sysmon after the cgo
 * call, about five switches a look where this thread makes one
 * (docs/benchmarks.md, "Cluster mode").
 */
#include "rv_internal.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define HELD_NS (10 * 1000000ull)   /* held this long, a worker takes no new requests */
#define QUIET_NS (100 * 1000000ull) /* this long without one in flight, the reporter sleeps */

enum { INFLIGHT = 1 }; /* rv_relay_counts' order */

/* Whether the reporter sleeps until a request comes: it sets armed, then
 * looks at the requests in flight; the relay counts one in, then looks at
 * armed (busy): whichever comes second sees the other. */
static _Atomic int armed;
static int wake_fd = -1; /* written when a request comes to an armed reporter */

static void busy(void)
{
    if (atomic_load(&armed) && atomic_exchange(&armed, 0)) {
        uint64_t one = 1;
        while (write(wake_fd, &one, sizeof one) < 0 && errno == EINTR)
            ;
    }
}

/* Sleeps until a request comes, unless one is in flight already. */
static void sleep_until_busy(_Atomic uint64_t *counts)
{
    atomic_store(&armed, 1);
    if (atomic_load(&counts[INFLIGHT]) == 0) {
        struct pollfd p = {.fd = wake_fd, .events = POLLIN};
        while (poll(&p, 1, -1) < 0 && errno == EINTR)
            ;
        uint64_t n;
        while (read(wake_fd, &n, sizeof n) < 0 && errno == EINTR)
            ;
    }
    atomic_store(&armed, 0);
}

static int held_now(void)
{
    uint64_t since = atomic_load_explicit(&rv_stat.held_since, memory_order_relaxed);
    uint64_t now = rv_now();
    return since && now > since && now - since > HELD_NS;
}

static void *report(void *arg)
{
    (void)arg;
    rv_signals_block(); /* the process's signals are Go's */
    _Atomic uint64_t *counts = (_Atomic uint64_t *)rv_relay_counts();
    int held = 0;
    uint64_t last_busy = rv_now();
    for (;;) {
        if ((int64_t)atomic_load(&counts[INFLIGHT]) > 0 || held)
            last_busy = rv_now();
        if (rv_now() - last_busy < QUIET_NS) {
            struct timespec ts = {0, (long)(HELD_NS / 2)};
            nanosleep(&ts, NULL);
        } else {
            sleep_until_busy(counts);
            last_busy = rv_now();
        }
        int now = held_now();
        if (now)
            rv_relay_flush_held();
        if (now != held) {
            held = now;
            rv_relay_send(RV_WORKER_HELD, 0, 0, (uint64_t)held, NULL, 0);
        }
    }
    return NULL;
}

int rv_held_start(void)
{
    wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd < 0)
        return -errno;
    rv_relay_on_busy(busy);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64u << 10);
    int rc = pthread_create(&t, &attr, report, NULL);
    pthread_attr_destroy(&attr);
    if (rc == 0)
        pthread_setname_np(t, "ruvoy-held");
    return -rc;
}
