/*
 * rv_held.c: a worker's watch on its VM thread, from a plain thread.
 *
 * While the worker has requests in flight (and for QUIET_NS after), the
 * watch looks every HELD_NS / 2: once Ruby code has held the VM thread past
 * HELD_NS it tells the front end (RV_WORKER_HELD), which sends new requests
 * to other workers meanwhile, and writes what the held VM sent (a streamed
 * chunk, a log line: rv_relay_flush_held); it says so again when Ruby lets
 * go. A quiet worker's watch sleeps on the relay's eventfd until a request
 * comes. It used to be a goroutine: each of its looks woke Go's timer
 * thread, often twice, and sysmon after the cgo call, about five switches
 * a look where this thread makes one (docs/benchmarks.md, "Cluster mode").
 */
#include "rv_internal.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#define HELD_NS (10 * 1000000ull)   /* held this long, a worker takes no new requests */
#define QUIET_NS (100 * 1000000ull) /* this long without one in flight, the watch sleeps */

enum { INFLIGHT = 1, ARMED = 2 }; /* rv_relay_counts' order */

/* Sleeps until a request comes, unless one is in flight already: the
 * relay writes the eventfd when it counts one in and finds ARMED set. */
static void sleep_until_busy(_Atomic uint64_t *counts, int busy_fd)
{
    atomic_store(&counts[ARMED], 1);
    if (atomic_load(&counts[INFLIGHT]) == 0) {
        struct pollfd p = {.fd = busy_fd, .events = POLLIN};
        while (poll(&p, 1, -1) < 0 && errno == EINTR)
            ;
        uint64_t n;
        while (read(busy_fd, &n, sizeof n) < 0 && errno == EINTR)
            ;
    }
    atomic_store(&counts[ARMED], 0);
}

static int held_now(void)
{
    uint64_t since = atomic_load_explicit(&rv_stat.running_since, memory_order_relaxed);
    uint64_t now = rv_now();
    return since && now > since && now - since > HELD_NS;
}

static void *watch(void *arg)
{
    (void)arg;
    rv_signals_block(); /* the process's signals are Go's */
    _Atomic uint64_t *counts = (_Atomic uint64_t *)rv_relay_counts();
    int busy_fd = rv_relay_busy_fd();
    int held = 0;
    uint64_t last_busy = rv_now();
    for (;;) {
        if ((int64_t)atomic_load(&counts[INFLIGHT]) > 0 || held)
            last_busy = rv_now();
        if (rv_now() - last_busy < QUIET_NS) {
            struct timespec ts = {0, (long)(HELD_NS / 2)};
            nanosleep(&ts, NULL);
            rv_relay_flush_held(HELD_NS);
        } else {
            sleep_until_busy(counts, busy_fd);
            last_busy = rv_now();
        }
        int now = held_now();
        if (now != held) {
            held = now;
            rv_relay_send(RV_WORKER_HELD, 0, 0, (uint64_t)held, NULL, 0);
        }
    }
    return NULL;
}

int rv_held_watch(void)
{
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64u << 10);
    int rc = pthread_create(&t, &attr, watch, NULL);
    pthread_attr_destroy(&attr);
    if (rc == 0)
        pthread_setname_np(t, "ruvoy-held");
    return -rc;
}
