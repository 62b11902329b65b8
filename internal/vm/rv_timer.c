/*
 * rv_timer.c: a binary min-heap of timers. Each timer knows its place in
 * the heap, so a wait that ends early removes its timer in O(log n).
 */
#include "rv_internal.h"

#include <stdlib.h>
#include <time.h>

uint64_t rv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void place(rv_timers *h, size_t i, rv_timer *t)
{
    h->heap[i] = t;
    t->heap_at = i + 1;
}

static void sift_up(rv_timers *h, size_t i)
{
    rv_timer *t = h->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->heap[parent]->deadline <= t->deadline)
            break;
        place(h, i, h->heap[parent]);
        i = parent;
    }
    place(h, i, t);
}

static void sift_down(rv_timers *h, size_t i)
{
    rv_timer *t = h->heap[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->len)
            break;
        if (child + 1 < h->len && h->heap[child + 1]->deadline < h->heap[child]->deadline)
            child++;
        if (t->deadline <= h->heap[child]->deadline)
            break;
        place(h, i, h->heap[child]);
        i = child;
    }
    place(h, i, t);
}

void rv_timer_add(rv_timers *h, rv_timer *t)
{
    if (h->len == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 64;
        h->heap = realloc(h->heap, h->cap * sizeof *h->heap);
        if (!h->heap)
            abort();
    }
    h->heap[h->len] = t;
    sift_up(h, h->len++);
}

void rv_timer_remove(rv_timers *h, rv_timer *t)
{
    if (!t->heap_at)
        return;
    size_t i = t->heap_at - 1;
    t->heap_at = 0;
    rv_timer *last = h->heap[--h->len];
    if (i == h->len)
        return;
    place(h, i, last);
    if (i > 0 && h->heap[(i - 1) / 2]->deadline > last->deadline)
        sift_up(h, i);
    else
        sift_down(h, i);
}

rv_timer *rv_timer_peek(rv_timers *h)
{
    return h->len ? h->heap[0] : NULL;
}
