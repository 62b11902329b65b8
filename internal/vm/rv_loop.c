/*
 * rv_loop.c: the VM thread's event loop.
 *
 * The loop runs on the VM thread's root fiber. Each turn it takes every
 * message Go sent (starting request fibers, feeding bodies, credits and
 * cancels to waiting ones), resumes the fibers that became ready, fires due
 * timers, and then waits in one epoll_wait for the inbox eventfd, the
 * descriptors fibers wait on, and the next timer, without the GVL so that
 * Ruby threads run meanwhile (rv_selector.c). How fibers wait and are
 * switched into is in rv_wait.c; control messages, in rv_control.c.
 */
#include "rv_internal.h"

#include <stdlib.h>

rv_loop *rv_L;
rv_stats rv_stat;

#define L rv_L

static int mark_waiting(st_data_t key, st_data_t value, st_data_t arg)
{
    (void)value, (void)arg;
    rb_gc_mark((VALUE)key);
    return ST_CONTINUE;
}

static int mark_pending(st_data_t key, st_data_t value, st_data_t arg)
{
    (void)arg;
    rb_gc_mark((VALUE)key);
    rb_gc_mark((VALUE)value);
    return ST_CONTINUE;
}

static void loop_mark(void *p)
{
    (void)p;
    rb_gc_mark(L->root_fiber);
    rb_gc_mark(L->thread);
    rb_gc_mark(L->scheduler);
    rb_gc_mark(L->apps);
    rb_gc_mark(L->app_upstreams);
    for (uint32_t i = 0; i < L->nstreams; i++) {
        rv_stream *s = L->streams[i];
        if (s) {
            rb_gc_mark(s->fiber);
            rb_gc_mark(s->app);
            rb_gc_mark(s->env);
            rb_gc_mark(s->response);
            rb_gc_mark(s->input);
            rb_gc_mark(s->interrupt_exc);
            rb_gc_mark(s->hijack_io);
            rb_gc_mark(s->hijack_call);
        }
    }
    st_foreach(L->waiting, mark_waiting, 0);
    st_foreach(L->pending, mark_pending, 0);
}

/* Not write-barrier protected: the loop stores VALUEs in plain C memory. */
static const rb_data_type_t loop_type = {
    .wrap_struct_name = "ruvoy/loop",
    .function = {.dmark = loop_mark},
};

void rv_loop_init(const rv_config *cfg)
{
    L = calloc(1, sizeof *L);
    if (!L)
        abort();
    L->nstreams = cfg->max_streams;
    L->streams = calloc(L->nstreams, sizeof *L->streams);
    L->cancelled = calloc(L->nstreams, sizeof *L->cancelled);
    L->window = cfg->window;
    L->waiting = st_init_numtable();
    L->pending = st_init_numtable();
    L->calls = st_init_numtable();
    L->ready.ready_next = L->ready.ready_prev = &L->ready;
    if (!L->streams || !L->cancelled)
        abort();
    rv_selector_init();

    L->root_fiber = rb_fiber_current();
    L->thread = rb_thread_current();
    L->apps = rb_ary_new();
    L->app_upstreams = rb_ary_new();
    L->scheduler = Qnil;
    rb_gc_register_mark_object(TypedData_Wrap_Struct(rb_cObject, &loop_type, L));
}

/* ---- one turn of the loop ---- */

static rv_msg *backlog; /* messages taken from the inbox, not yet handled */

static void handle(rv_msg *m)
{
    switch (m->kind) {
    case RV_IN_REQUEST:
        rv_request_start(m);
        break;
    case RV_IN_BODY:
    case RV_IN_BODY_END:
    case RV_IN_CREDIT:
    case RV_IN_CANCEL:
    case RV_IN_DONE:
        rv_stream_deliver(m);
        break;
    case RV_IN_UPSTREAM_REPLY:
        rv_upstream_deliver(m);
        break;
    case RV_IN_INTERRUPT:
        rv_interrupt_deliver(m);
        break;
    case RV_IN_HIJACKED:
        rv_hijack_deliver(m);
        break;
    default:
        rv_control_handle(m);
    }
}

/* How long a turn resumes ready fibers while Go's messages wait. Without a
 * bound, a turn runs every fiber that was ready when it began: under a
 * body overload, 256 uploads each copying their chunks to rack.input's
 * file made turns of 100 ms and more, and a request that came meanwhile
 * (another app's, a health check) waited for all of them. */
#define TURN_NS 2000000u

/* Resumes the fibers ready now: one that readies itself again waits a turn.
 * Past TURN_NS with messages in the inbox, the turn ends early: the fibers
 * not yet resumed stay first in line for the next turn, after its messages
 * are handled (new requests start, bodies are delivered). */
static void run_ready(void)
{
    rv_waiter *last = rv_ready_last();
    uint64_t until = rv_now() + TURN_NS;
    for (rv_waiter *w; (w = rv_ready_first());) {
        rv_ready_unlink(w);
        w->state = RV_W_IDLE;
        rv_resume(w);
        if (w == last)
            break;
        if (atomic_load_explicit(&rv_to_vm.head, memory_order_relaxed) && rv_now() >= until)
            break;
    }
}

static void fire_timers(void)
{
    uint64_t now = rv_now();
    rv_timer *t;
    while ((t = rv_timer_peek(&L->timers)) && t->deadline <= now) {
        rv_timer_remove(&L->timers, t);
        t->fire(t);
    }
}

/* Every 250 ms: how late the loop is, and Ruby's GC figures, for metrics. */
#define TICK_NS 250000000u
static rv_timer tick;

static void tick_fired(rv_timer *t)
{
    uint64_t now = rv_now();
    atomic_store_explicit(&rv_stat.lag_ns, now - t->deadline, memory_order_relaxed);
    atomic_store_explicit(&rv_stat.gc_count, rb_gc_count(), memory_order_relaxed);
    atomic_store_explicit(&rv_stat.heap_live_slots, rb_gc_stat(ID2SYM(rb_intern("heap_live_slots"))),
                          memory_order_relaxed);
    rv_hijack_count();
    t->deadline = now + TICK_NS;
    rv_timer_add(&L->timers, t);
}

static VALUE loop_turn(VALUE unused)
{
    (void)unused;
    if (!backlog)
        backlog = rv_inbox_take(&rv_to_vm);
    while (backlog) {
        rv_msg *m = backlog;
        backlog = m->next;
        handle(m);
        if (L->stopping)
            return Qnil;
    }
    run_ready();
    fire_timers();
    rv_selector_poll(backlog != NULL);
    return Qnil;
}

void rv_loop_run(void)
{
    tick.fire = tick_fired;
    tick.deadline = rv_now() + TICK_NS;
    rv_timer_add(&L->timers, &tick);
    while (!L->stopping) {
        int state = 0;
        rb_protect(loop_turn, Qnil, &state);
        L->current = NULL;
        if (state)
            rv_report_escape("an exception reached the event loop");
    }
}

