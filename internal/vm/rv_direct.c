/*
 * rv_direct.c: a request's handler waiting for its own answer.
 *
 * Go's dispatcher takes the VM's messages from one inbox and hands each to
 * its request's goroutine: the VM writes an eventfd, Go's netpoller wakes a
 * thread for the dispatcher, the dispatcher readies the handler, and Go's
 * scheduler wakes idle processors to look for work. Under load one wake-up
 * carries many messages; a lone request pays all of it for one answer.
 *
 * So a handler may claim one of a few direct lines before its request goes
 * to the VM (rv_direct_claim), then wait on its own thread (rv_direct_wait):
 * while the line is claimed, every message the VM sends for that request
 * goes into the line's list and wakes that one thread. The handler routes
 * them as the dispatcher would. It gives the line back (rv_direct_release,
 * until it returns nothing) when it stops waiting: the line is free only
 * once its list is empty, so what the VM sends afterwards, through the
 * inbox, comes after everything the handler routed itself.
 */
#include "rv_internal.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

typedef struct rv_direct {
    _Atomic uint64_t stream; /* 0: free; read without the lock by senders */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    rv_msg *head, *tail;
    atomic_int has; /* head is not NULL: read without the lock while spinning */
    int waiting;
} rv_direct;

/* A waiting handler first yields its core for this long, looking for its
 * answer between yields, before it sleeps: on this machine a thread's
 * sleep and wake-up cost more CPU than yielding for a quick answer does
 * (docs/benchmarks.md, "One connection"). */
#ifndef RV_DIRECT_SPIN_NS
#define RV_DIRECT_SPIN_NS 50000
#endif

static rv_direct lines[RV_DIRECT_MAX];
static atomic_int limit; /* lines in use: set by Go before the first claim */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    for (int i = 0; i < RV_DIRECT_MAX; i++) {
        pthread_mutex_init(&lines[i].mu, NULL);
        pthread_cond_init(&lines[i].cond, &a);
    }
    pthread_condattr_destroy(&a);
}

void rv_direct_limit(int n)
{
    pthread_once(&once, init);
    atomic_store(&limit, n < 0 ? 0 : n > RV_DIRECT_MAX ? RV_DIRECT_MAX : n);
}

int rv_direct_claim(uint64_t stream)
{
    int n = atomic_load_explicit(&limit, memory_order_relaxed);
    for (int i = 0; i < n; i++) {
        uint64_t free = 0;
        if (atomic_load_explicit(&lines[i].stream, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong(&lines[i].stream, &free, stream))
            return i;
    }
    return -1;
}

static rv_msg *take(rv_direct *d)
{
    rv_msg *m = d->head;
    d->head = d->tail = NULL;
    atomic_store_explicit(&d->has, 0, memory_order_relaxed);
    return m;
}

rv_msg *rv_direct_wait(int line, uint64_t timeout_ns)
{
    rv_direct *d = &lines[line];
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ns / 1000000000;
    until.tv_nsec += timeout_ns % 1000000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    uint64_t end = rv_monotonic_ns() + RV_DIRECT_SPIN_NS;
    while (!atomic_load_explicit(&d->has, memory_order_relaxed) && rv_monotonic_ns() < end)
        sched_yield();
    pthread_mutex_lock(&d->mu);
    d->waiting = 1;
    while (!d->head && pthread_cond_timedwait(&d->cond, &d->mu, &until) == 0)
        ;
    d->waiting = 0;
    rv_msg *m = take(d);
    pthread_mutex_unlock(&d->mu);
    return m;
}

rv_msg *rv_direct_release(int line)
{
    rv_direct *d = &lines[line];
    pthread_mutex_lock(&d->mu);
    rv_msg *m = take(d);
    if (!m)
        atomic_store(&d->stream, 0);
    pthread_mutex_unlock(&d->mu);
    return m;
}

/* Puts m in its request's direct line, if one is claimed for it: 1 when
 * it did (rv_outbox.c). Any thread may call it. */
int rv_direct_take(rv_msg *m)
{
    int n = atomic_load_explicit(&limit, memory_order_relaxed);
    for (int i = 0; i < n; i++) {
        rv_direct *d = &lines[i];
        if (atomic_load(&d->stream) != m->stream)
            continue;
        pthread_mutex_lock(&d->mu);
        if (atomic_load(&d->stream) == m->stream) {
            m->next = NULL;
            if (d->tail)
                d->tail->next = m;
            else
                d->head = m;
            d->tail = m;
            atomic_store_explicit(&d->has, 1, memory_order_relaxed);
            if (d->waiting)
                pthread_cond_signal(&d->cond);
            pthread_mutex_unlock(&d->mu);
            return 1;
        }
        pthread_mutex_unlock(&d->mu); /* released meanwhile */
        return 0;
    }
    return 0;
}
