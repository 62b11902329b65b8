/*
 * rv_api.c: the functions Go calls (vm.h) once the VM runs: messages in and
 * out, cancels, the VM's figures. rv_start and rv_join are in rv_boot.c.
 * Any Go thread may call these; none of them touches Ruby.
 */
#include "rv_internal.h"

#include <ruby/version.h>
#include <stddef.h>
#include <string.h>

void rv_submit(uint32_t kind, uint64_t stream, uint32_t flags, uint64_t aux, const void *data, size_t len)
{
    rv_msg *m = rv_msg_new(kind, stream, flags, aux, len);
    if (len)
        memcpy(m->data, data, len);
    rv_inbox_push(&rv_to_vm, m);
}

/* Go is done with a request (its client went away, or with RV_FLAG_MALFORMED
 * its body was malformed and Go answered 400): marked at once, so a request
 * still waiting in the inbox is dropped before it starts, then told by
 * message. */
void rv_cancel(uint64_t stream, uint32_t flags)
{
    uint32_t index = RV_INDEX(stream);
    if (rv_L && index < rv_L->nstreams)
        atomic_store_explicit(&rv_L->cancelled[index], stream, memory_order_relaxed);
    rv_submit(RV_IN_CANCEL, stream, flags, 0, NULL, 0);
}

rv_msg *rv_out_poll(void)
{
    rv_msg *m = rv_inbox_take(&rv_to_go);
    if (m || !rv_inbox_sleep(&rv_to_go))
        return m ? m : rv_inbox_take(&rv_to_go);
    return NULL;
}

int rv_out_fd(void)
{
    return rv_to_go.efd;
}

/* rv_stat as Go reads it: the same fields, in the same places, as
 * rv_vm_stats. */
#define RV_SAME_FIELD(f) _Static_assert(offsetof(rv_stats, f) == offsetof(rv_vm_stats, f), #f)
RV_SAME_FIELD(busy_ns);
RV_SAME_FIELD(awake_since);
RV_SAME_FIELD(lag_ns);
RV_SAME_FIELD(held_since);
RV_SAME_FIELD(held_stream);
RV_SAME_FIELD(requests);
RV_SAME_FIELD(fibers);
RV_SAME_FIELD(response_bytes);
RV_SAME_FIELD(gc_count);
RV_SAME_FIELD(gc_time_ns);
RV_SAME_FIELD(heap_live_slots);
RV_SAME_FIELD(offload_busy);
RV_SAME_FIELD(offload_waiting);
RV_SAME_FIELD(hijacked);
RV_SAME_FIELD(gc_idle_count);
RV_SAME_FIELD(gc_idle_ns);
RV_SAME_FIELD(gc_idle_max_ns);
_Static_assert(sizeof(rv_stats) == sizeof(rv_vm_stats), "rv_stats is rv_vm_stats");

const rv_vm_stats *rv_stats_view(void)
{
    return (const rv_vm_stats *)&rv_stat;
}

uint64_t rv_monotonic_ns(void)
{
    return rv_now();
}

const char *rv_ruby_version(void)
{
    return ruby_version;
}

const char *rv_ruby_platform(void)
{
    return ruby_platform;
}

/* The Ruby ABI this binary was compiled against (ruby_version, arch). */
const char *rv_built_abi(void)
{
#define RV_STR2(x) #x
#define RV_STR(x) RV_STR2(x)
    return RV_STR(RUBY_API_VERSION_MAJOR) "." RV_STR(RUBY_API_VERSION_MINOR) ".0 " RUBY_PLATFORM;
}
