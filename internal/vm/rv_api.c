/*
 * rv_api.c: the functions Go calls (vm.h) once the VM runs: messages in and
 * out, cancels, the VM's figures. rv_start and rv_join are in rv_boot.c.
 * Any Go thread may call these; none of them touches Ruby.
 */
#include "rv_internal.h"

#include <ruby/version.h>
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
    uint32_t slot = RV_SLOT(stream);
    if (rv_L && slot < rv_L->nstreams)
        atomic_store_explicit(&rv_L->cancelled[slot], stream, memory_order_relaxed);
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

void rv_read_stats(rv_vm_stats *out)
{
    out->busy_ns = atomic_load_explicit(&rv_stat.busy_ns, memory_order_relaxed);
    out->lag_ns = atomic_load_explicit(&rv_stat.lag_ns, memory_order_relaxed);
    out->awake_since = atomic_load(&rv_stat.awake_since);
    out->running_since = atomic_load(&rv_stat.running_since);
    out->running_stream = atomic_load_explicit(&rv_stat.running_stream, memory_order_relaxed);
    out->requests = atomic_load_explicit(&rv_stat.requests, memory_order_relaxed);
    out->fibers = atomic_load_explicit(&rv_stat.fibers, memory_order_relaxed);
    out->response_bytes = atomic_load_explicit(&rv_stat.response_bytes, memory_order_relaxed);
    out->gc_count = atomic_load_explicit(&rv_stat.gc_count, memory_order_relaxed);
    out->gc_time_ns = atomic_load_explicit(&rv_stat.gc_time_ns, memory_order_relaxed);
    out->heap_live_slots = atomic_load_explicit(&rv_stat.heap_live_slots, memory_order_relaxed);
    out->offload_busy = atomic_load_explicit(&rv_stat.offload_busy, memory_order_relaxed);
    out->offload_waiting = atomic_load_explicit(&rv_stat.offload_waiting, memory_order_relaxed);
    out->hijacked = atomic_load_explicit(&rv_stat.hijacked, memory_order_relaxed);
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
