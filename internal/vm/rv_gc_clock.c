/*
 * rv_gc_clock.c: the time Ruby spends in its garbage collector.
 *
 * Ruby 3.1's GC.stat(:time) reads the process CPU clock, which in ruvoy also
 * counts every Go thread working meanwhile: under load it reported a minor
 * GC of ~0.3 ms as 2-8 ms. This clock times each gc_enter/gc_exit pair
 * (a marking or sweeping step) on the thread that runs it, in monotonic
 * time: how long Ruby code was held up by the collector.
 */
#include "rv_internal.h"

#include <ruby/debug.h>

static uint64_t entered; /* when the running step began; GC runs under the GVL */

static void gc_event(VALUE tpval, void *data)
{
    (void)data;
    rb_trace_arg_t *arg = rb_tracearg_from_tracepoint(tpval);
    if (rb_tracearg_event_flag(arg) == RUBY_INTERNAL_EVENT_GC_ENTER) {
        entered = rv_now();
    } else if (entered) {
        atomic_fetch_add_explicit(&rv_stat.gc_time_ns, rv_now() - entered, memory_order_relaxed);
        entered = 0;
    }
}

void rv_gc_clock_init(void)
{
    VALUE tp = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_GC_ENTER | RUBY_INTERNAL_EVENT_GC_EXIT, gc_event, NULL);
    rb_gc_register_mark_object(tp);
    rb_tracepoint_enable(tp);
}
