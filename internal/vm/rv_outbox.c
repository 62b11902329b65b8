/*
 * rv_outbox.c: where every message for Go leaves the VM, from any thread.
 *
 * A worker that relays hands its messages to the front end's socket (the
 * relay plugs in with rv_outbox_divert); otherwise a message goes to its
 * request's direct line while the request's handler waits on one
 * (rv_direct.c), else to Go's inbox, which the dispatcher drains. The
 * replies to Go's control messages leave the same way.
 */
#include "rv_internal.h"

#include <string.h>

/* The relay's take: 1 when it took the message (a worker's, once it
 * relays); set once, before the VM thread runs. */
static int (*_Atomic divert)(rv_msg *m);

void rv_outbox_divert(int (*take)(rv_msg *m))
{
    atomic_store(&divert, take);
}

void rv_to_go_push(rv_msg *m)
{
    int (*take)(rv_msg *) = atomic_load_explicit(&divert, memory_order_relaxed);
    if (take && take(m))
        return;
    if (m->stream && rv_direct_take(m))
        return;
    rv_inbox_push(&rv_to_go, m);
}

void rv_send_reply(uint64_t result, const char *text, size_t len)
{
    rv_msg *m = rv_msg_new(RV_OUT_REPLY, 0, 0, result, len);
    memcpy(m->data, text, len);
    rv_to_go_push(m);
}
