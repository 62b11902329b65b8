/*
 * rv_gc_idle.c: Ruby's GC between requests (--gc-when-idle).
 *
 * When the last request in flight ends, a timer is set; a request that
 * starts removes it. When it fires (no request for the setting's time) and
 * no work waits (Go's messages, ready fibers, a worker's socket), the loop
 * runs one step on the VM thread, outside any fiber, if Ruby would collect
 * in the next request anyway: the minor collection it would run then.
 * A request that comes meanwhile waits for that step and no longer.
 *
 * Why a minor, and only then (docs/benchmarks.md, "GC when idle"): on the
 * Rails page's heap a minor here took 2-3 ms of CPU and a major 100 ms
 * (the same heap; GC.compact 180 ms; starting an incremental major ~1 ms,
 * but it leaves the marking to the next requests, which then paid 20 ms
 * more each). Run between requests, a minor finds the requests' objects
 * dead, so it leaves more free than one in a request does, and the majors
 * Ruby made because a minor freed too little stopped. A minor is asked
 * for only when Ruby has no major due, since it would make the asked
 * minor a major; and only when its next collection is within a request's
 * allocations, so that steps replace collections rather than add to them.
 */
#include "rv_internal.h"

#include <poll.h>
#include <ruby/debug.h>

#define L rv_L

/* How close to Ruby's next collection a step may run: within this many
 * requests' allocations. 1: the collection the next request would make. */
#define NEAR_REQUESTS 1.0

static _Atomic uint64_t idle_ns; /* the setting; 0: off */
static rv_timer timer;
static uint64_t requests;        /* requests started, ever */

static VALUE stat_hash, info_hash, minor_args;
static ID id_start;
static VALUE sym_total_allocated_objects, sym_heap_available_slots, sym_heap_marked_slots,
    sym_heap_allocatable_pages, sym_heap_allocatable_slots, sym_heap_allocated_pages, sym_old_objects,
    sym_old_objects_limit, sym_remembered_wb_unprotected_objects, sym_remembered_wb_unprotected_objects_limit,
    sym_oldmalloc_increase_bytes, sym_oldmalloc_increase_bytes_limit, sym_malloc_increase_bytes,
    sym_malloc_increase_bytes_limit, sym_need_major_by, sym_state, sym_marking, sym_major_by;

/* Objects allocated when Ruby's last collection began (its GC_START
 * event): what has been allocated since counts towards the next. */
static size_t allocated_at_gc;

/* What a request allocates (objects; malloc'd bytes), averaged over the
 * looks, and where the last look left the counts. */
static double per_request, malloc_per_request;
static size_t last_allocated, last_malloc, last_gc_count;
static uint64_t last_requests;

void rv_gc_idle_set(uint64_t ns)
{
    atomic_store(&idle_ns, ns);
}

/* On the VM thread, inside Ruby's GC: reads a number, allocates nothing. */
static void gc_started(VALUE tpval, void *data)
{
    (void)tpval, (void)data;
    allocated_at_gc = rb_gc_stat(sym_total_allocated_objects);
}

static void fired(rv_timer *t);

/* Ruvoy._gc_idle_count: the steps run so far, for the tests to tell them
 * from Ruby's own collections. */
static VALUE idle_count(VALUE self)
{
    (void)self;
    return ULL2NUM(atomic_load_explicit(&rv_stat.gc_idle_count, memory_order_relaxed));
}

void rv_gc_idle_init(void)
{
#define SYM(name) sym_##name = ID2SYM(rb_intern(#name))
    SYM(total_allocated_objects);
    SYM(heap_available_slots);
    SYM(heap_marked_slots);
    SYM(heap_allocatable_pages);
    SYM(heap_allocatable_slots);
    SYM(heap_allocated_pages);
    SYM(old_objects);
    SYM(old_objects_limit);
    SYM(remembered_wb_unprotected_objects);
    SYM(remembered_wb_unprotected_objects_limit);
    SYM(oldmalloc_increase_bytes);
    SYM(oldmalloc_increase_bytes_limit);
    SYM(malloc_increase_bytes);
    SYM(malloc_increase_bytes_limit);
    SYM(need_major_by);
    SYM(state);
    SYM(marking);
    SYM(major_by);
#undef SYM
    id_start = rb_intern("start");
    /* Filled in place at each look: GC.stat and GC.latest_gc_info take a
     * Hash to fill, and keys change between Rubies. */
    stat_hash = rb_hash_new();
    info_hash = rb_hash_new();
    rb_gc_register_mark_object(stat_hash);
    rb_gc_register_mark_object(info_hash);
    /* The sweep is left to Ruby's lazy sweeping, a little at each
     * allocation: it made two thirds of an immediate sweep's 6 ms. */
    minor_args = rb_hash_new();
    rb_hash_aset(minor_args, ID2SYM(rb_intern("full_mark")), Qfalse);
    rb_hash_aset(minor_args, ID2SYM(rb_intern("immediate_sweep")), Qfalse);
    rb_obj_freeze(minor_args);
    rb_gc_register_mark_object(minor_args);
    /* Ruby makes its own symbols for GC.stat's keys at the first call: not
     * in the GC event, where nothing may be allocated. */
    allocated_at_gc = last_allocated = rb_gc_stat(sym_total_allocated_objects);
    VALUE tp = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_GC_START, gc_started, NULL);
    rb_gc_register_mark_object(tp);
    rb_tracepoint_enable(tp);
    timer.fire = fired;
    rb_define_module_function(rv_mRuvoy, "_gc_idle_count", idle_count, 0);
}

/* A request starts: no step until the next quiet spell. */
void rv_gc_idle_busy(void)
{
    requests++;
    if (timer.heap_at)
        rv_timer_remove(&L->timers, &timer);
}

/* The last request in flight ended. */
void rv_gc_idle_quiet(void)
{
    uint64_t ns = atomic_load_explicit(&idle_ns, memory_order_relaxed);
    if (!ns || timer.heap_at)
        return;
    timer.deadline = rv_now() + ns;
    rv_timer_add(&L->timers, &timer);
}

/* Work a step would delay: Go's messages, fibers ready to run, bytes on a
 * worker's socket (a request the loop has not read yet). */
static int work_waiting(void)
{
    if (atomic_load(&rv_to_vm.head) || !rv_ready_empty())
        return 1;
    int fd = rv_relay_fd();
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return fd >= 0 && poll(&p, 1, 0) > 0;
}

static size_t figure(VALUE h, VALUE key)
{
    VALUE v = rb_hash_lookup2(h, key, Qnil);
    return RB_INTEGER_TYPE_P(v) ? NUM2SIZET(v) : 0;
}

static VALUE read_figures(VALUE unused)
{
    (void)unused;
    rb_gc_stat(stat_hash);
    rb_gc_latest_gc_info(info_hash);
    return Qnil;
}

static VALUE start_minor(VALUE unused)
{
    (void)unused;
    return rb_funcallv_kw(rb_mGC, id_start, 1, &minor_args, RB_PASS_KEYWORDS);
}

/* Whether Ruby's next collection is a major. Ruby 3.3 says so
 * (need_major_by); before it, the limits GC.stat shows say most of it,
 * and the rest is how little the last collection, a minor, left free:
 * under GC_HEAP_FREE_SLOTS_MIN_RATIO (20%) of the heap, Ruby makes the
 * next one a major ("nofree": every major on the Rails page under Ruby
 * 3.1; after a major it grows the heap instead). */
static int major_due(size_t available, size_t marked)
{
    VALUE need = rb_hash_lookup2(info_hash, sym_need_major_by, Qundef);
    if (need != Qundef)
        return RTEST(need);
    VALUE h = stat_hash;
    return figure(h, sym_old_objects) >= figure(h, sym_old_objects_limit) ||
           figure(h, sym_remembered_wb_unprotected_objects) >= figure(h, sym_remembered_wb_unprotected_objects_limit) ||
           figure(h, sym_oldmalloc_increase_bytes) >= figure(h, sym_oldmalloc_increase_bytes_limit) ||
           (NIL_P(rb_hash_lookup2(info_hash, sym_major_by, Qnil)) &&
            (available - (marked < available ? marked : available)) * 5 < available);
}

static double average(double avg, double sample)
{
    return avg > 0 ? 0.75 * avg + 0.25 * sample : sample;
}

/* Whether Ruby would collect within NEAR_REQUESTS requests: its heap's
 * room (what the last collection left free, and pages it may still add)
 * or its malloc limit would be used up. */
static int collection_near(size_t available, size_t marked)
{
    VALUE h = stat_hash;
    size_t allocated = figure(h, sym_total_allocated_objects), malloced = figure(h, sym_malloc_increase_bytes);
    size_t gcs = rb_gc_count();
    if (requests > last_requests) {
        double n = (double)(requests - last_requests);
        if (allocated > last_allocated)
            per_request = average(per_request, (double)(allocated - last_allocated) / n);
        if (gcs == last_gc_count && malloced > last_malloc) /* malloc_increase restarts at each GC */
            malloc_per_request = average(malloc_per_request, (double)(malloced - last_malloc) / n);
    }
    last_allocated = allocated, last_malloc = malloced, last_gc_count = gcs, last_requests = requests;

    size_t pages = figure(h, sym_heap_allocated_pages);
    double room = available > marked ? (double)(available - marked) : 0;
    room += (double)figure(h, sym_heap_allocatable_slots); /* Ruby 3.4 */
    if (pages)
        room += (double)figure(h, sym_heap_allocatable_pages) * (double)(available / pages);
    double since = allocated > allocated_at_gc ? (double)(allocated - allocated_at_gc) : 0;
    size_t malloc_limit = figure(h, sym_malloc_increase_bytes_limit);
    return since + NEAR_REQUESTS * per_request >= room ||
           (malloc_limit && (double)malloced + NEAR_REQUESTS * malloc_per_request >= (double)malloc_limit);
}

static void step(void)
{
    int state = 0;
    rb_protect(read_figures, Qnil, &state);
    if (state) {
        rb_set_errinfo(Qnil);
        return;
    }
    size_t available = figure(stat_hash, sym_heap_available_slots), marked = figure(stat_hash, sym_heap_marked_slots);
    /* An incremental major under way would be finished first: a major's
     * marking, not a minor. */
    if (!collection_near(available, marked) || major_due(available, marked) ||
        rb_hash_lookup2(info_hash, sym_state, Qnil) == sym_marking)
        return;
    rv_relay_busy(1); /* a worker: new requests go to other workers meanwhile */
    uint64_t began = rv_now();
    rb_protect(start_minor, Qnil, &state);
    uint64_t took = rv_now() - began;
    rv_relay_busy(0);
    if (state) {
        rv_report_escape("GC.start between requests raised");
        return;
    }
    atomic_fetch_add_explicit(&rv_stat.gc_idle_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&rv_stat.gc_idle_ns, took, memory_order_relaxed);
    if (took > atomic_load_explicit(&rv_stat.gc_idle_max_ns, memory_order_relaxed))
        atomic_store_explicit(&rv_stat.gc_idle_max_ns, took, memory_order_relaxed);
}

static void fired(rv_timer *t)
{
    uint64_t ns = atomic_load_explicit(&idle_ns, memory_order_relaxed);
    if (!ns || L->live || L->stopping)
        return;
    if (work_waiting()) { /* it may be no request: look again later */
        t->deadline = rv_now() + ns;
        rv_timer_add(&L->timers, t);
        return;
    }
    step();
}
