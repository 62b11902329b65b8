/*
 * rv_queue.c: the two inboxes between Go and the VM thread.
 *
 * Each inbox is a lock-free stack: producers push with a CAS, the single
 * consumer takes everything at once with an exchange and reverses it back to
 * arrival order. The consumer sleeps on an eventfd; a producer writes the
 * eventfd only when the consumer said it is going to sleep, so a busy receiver
 * costs no syscall per message (DESIGN.md, principle 5).
 */
#include "rv_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

rv_inbox rv_to_vm, rv_to_go;

int rv_inbox_init(rv_inbox *q)
{
    atomic_store(&q->head, NULL);
    atomic_store(&q->sleeping, 0);
    q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return q->efd < 0 ? -1 : 0;
}

void rv_inbox_wake(rv_inbox *q)
{
    uint64_t one = 1;
    /* EAGAIN means the counter is already non-zero: the wake is pending. */
    while (write(q->efd, &one, sizeof one) < 0 && errno == EINTR)
        ;
}

void rv_inbox_push(rv_inbox *q, rv_msg *m)
{
    rv_msg *head = atomic_load_explicit(&q->head, memory_order_relaxed);
    do {
        m->next = head;
    } while (!atomic_compare_exchange_weak(&q->head, &head, m));
    /* seq_cst push, then a seq_cst read of the flag: pairs with rv_inbox_sleep. */
    if (atomic_load(&q->sleeping) && atomic_exchange(&q->sleeping, 0))
        rv_inbox_wake(q);
}

rv_msg *rv_inbox_take(rv_inbox *q)
{
    rv_msg *m = atomic_exchange(&q->head, NULL), *fifo = NULL;
    while (m) {
        rv_msg *next = m->next;
        m->next = fifo;
        fifo = m;
        m = next;
    }
    return fifo;
}

int rv_inbox_sleep(rv_inbox *q)
{
    atomic_store(&q->sleeping, 1);
    if (atomic_load(&q->head) == NULL)
        return 1;
    /* Something arrived meanwhile: stay awake. A producer may have cleared
     * the flag and written the eventfd already; that costs one spurious wake. */
    atomic_store(&q->sleeping, 0);
    return 0;
}

void rv_inbox_drain_fd(rv_inbox *q)
{
    uint64_t n;
    while (read(q->efd, &n, sizeof n) < 0 && errno == EINTR)
        ;
}

rv_msg *rv_msg_new(uint32_t kind, uint64_t stream, uint32_t flags, uint64_t aux, size_t len)
{
    rv_msg *m = malloc(sizeof *m + len);
    if (!m)
        abort(); /* as Ruby does on allocation failure outside the GC */
    m->next = NULL;
    m->stream = stream;
    m->kind = kind;
    m->flags = flags;
    m->aux = aux;
    m->len = len;
    return m;
}

void rv_msg_free(rv_msg *m)
{
    free(m);
}
