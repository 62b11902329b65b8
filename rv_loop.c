/*
 * rv_loop.c: the VM thread's event loop, and how fibers wait in it.
 *
 * The loop runs on the VM thread's root fiber. Each turn it takes every
 * message Go sent (starting request fibers, feeding bodies, credits and
 * cancels to waiting ones), resumes the fibers that became ready, fires due
 * timers, and then waits in one epoll_wait for the inbox eventfd, the
 * descriptors fibers wait on, and the next timer, without the GVL so that
 * Ruby threads run meanwhile (DESIGN.md, principle 6).
 *
 * A fiber waits by calling rv_wait with an rv_waiter on its own stack; the
 * wait switches to the root fiber, and the loop switches back when a timer,
 * descriptor, message or unblock makes the waiter ready. Every switch is a
 * Fiber#transfer.
 */
#include "rv_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/epoll.h>

#ifndef RV_YIELD_SPINS
#define RV_YIELD_SPINS 8
#endif

rv_loop *rv_L;
rv_inbox rv_to_vm, rv_to_go;
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
    rb_gc_mark(L->app_clusters);
    for (uint32_t i = 0; i < L->nstreams; i++) {
        rv_stream *s = L->streams[i];
        if (s) {
            rb_gc_mark(s->fiber);
            rb_gc_mark(s->app);
            rb_gc_mark(s->env);
            rb_gc_mark(s->response);
            rb_gc_mark(s->input);
            rb_gc_mark(s->interrupt_exc);
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
    L->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (!L->streams || !L->cancelled || L->epfd < 0)
        abort();
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = rv_to_vm.efd};
    epoll_ctl(L->epfd, EPOLL_CTL_ADD, rv_to_vm.efd, &ev);

    L->root_fiber = rb_fiber_current();
    L->thread = rb_thread_current();
    L->apps = rb_ary_new();
    L->app_clusters = rb_ary_new();
    L->scheduler = Qnil;
    rb_gc_register_mark_object(TypedData_Wrap_Struct(rb_cObject, &loop_type, L));
}

/* ---- the ready list ---- */

static void ready_unlink(rv_waiter *w)
{
    if (!w->ready_next)
        return;
    w->ready_prev->ready_next = w->ready_next;
    w->ready_next->ready_prev = w->ready_prev;
    w->ready_next = w->ready_prev = NULL;
}

static int ready_empty(void)
{
    return L->ready.ready_next == &L->ready;
}

void rv_make_ready(rv_waiter *w, VALUE result)
{
    if (w->state != RV_W_WAITING)
        return;
    w->state = RV_W_READY;
    w->result = result;
    rv_timer_remove(&L->timers, &w->timer);
    rv_fd_unwatch(w);
    w->ready_prev = L->ready.ready_prev;
    w->ready_next = &L->ready;
    L->ready.ready_prev->ready_next = w;
    L->ready.ready_prev = w;
}

void rv_wake_from_other_thread(void)
{
    if (rb_thread_current() != L->thread)
        rv_inbox_wake(&rv_to_vm);
}

/* ---- waiting ---- */

void rv_waiter_init(rv_waiter *w, int reason)
{
    memset(w, 0, sizeof *w);
    w->reason = reason;
    w->fd = -1;
    w->result = Qnil;
    w->held = Qnil;
    w->fiber = Qnil;
}

static void waiter_timer_fired(rv_timer *t)
{
    rv_waiter *w = (rv_waiter *)((char *)t - offsetof(rv_waiter, timer));
    rv_make_ready(w, w->result);
}

static void waiter_detach(rv_waiter *w)
{
    ready_unlink(w);
    rv_timer_remove(&L->timers, &w->timer);
    rv_fd_unwatch(w);
}

struct switch_args {
    rv_waiter *w;
    VALUE target;
};

static VALUE wait_switch(VALUE arg)
{
    struct switch_args *a = (struct switch_args *)arg;
    rb_fiber_transfer(a->target, 0, NULL);
    return a->w->result;
}

static VALUE wait_cleanup(VALUE arg)
{
    rv_waiter *w = (rv_waiter *)arg;
    st_data_t key = (st_data_t)w->fiber;
    waiter_detach(w);
    st_delete(L->waiting, &key, NULL);
    if (w->stream && w->stream->waiter == w)
        w->stream->waiter = NULL;
    w->state = RV_W_IDLE;
    return Qnil;
}

/* Suspends the current fiber until the waiter is made ready (its result is
 * returned) or interrupted (the exception is raised here). A non-root target
 * runs that fiber first; the caller is then ready to continue at once. */
VALUE rv_wait_switching(rv_waiter *w, VALUE target)
{
    VALUE fiber = rb_fiber_current();
    if (fiber == L->root_fiber)
        rb_raise(rv_eFiberError, "ruvoy: the event loop's fiber cannot wait");
    w->fiber = fiber;

    rv_stream *s = L->current;
    if (s && s->fiber == fiber) {
        rv_stream_flush(s);
        if (s->interrupt_pending && !w->uninterruptible) {
            s->interrupt_pending = 0;
            rb_exc_raise(rv_pending_exception(s));
        }
        w->stream = s;
        s->waiter = w;
    }
    if (L->pending->num_entries) {
        st_data_t key = (st_data_t)fiber, exc;
        if (st_delete(L->pending, &key, &exc)) {
            if (!w->uninterruptible) {
                if (w->stream)
                    w->stream->waiter = NULL;
                rb_exc_raise((VALUE)exc);
            }
            w->held = (VALUE)exc;
        }
    }

    w->state = RV_W_WAITING;
    st_insert(L->waiting, (st_data_t)fiber, (st_data_t)w);
    if (w->timer.deadline) {
        w->timer.fire = waiter_timer_fired;
        rv_timer_add(&L->timers, &w->timer);
    }
    if (w->fd >= 0)
        rv_fd_watch(w);
    if (target != L->root_fiber)
        rv_make_ready(w, w->result);

    struct switch_args a = {w, target};
    VALUE result = rb_ensure(wait_switch, (VALUE)&a, wait_cleanup, (VALUE)w);
    if (!NIL_P(w->held))
        rb_exc_raise(w->held);
    return result;
}

VALUE rv_wait(rv_waiter *w)
{
    return rv_wait_switching(w, L->root_fiber);
}

/* ---- switching from the loop into fibers ---- */

static VALUE transfer_to(VALUE fiber)
{
    return rb_fiber_transfer(fiber, 0, NULL);
}

struct raise_args {
    VALUE fiber, exc;
};

static VALUE raise_in(VALUE arg)
{
    struct raise_args *a = (struct raise_args *)arg;
    return rb_funcall(a->fiber, rv_id_raise, 1, a->exc);
}

static void report_escape(const char *what)
{
    VALUE exc = rb_errinfo();
    rb_set_errinfo(Qnil);
    rv_log_exception(NULL, what, exc);
}

/* Ruby code has the thread from now until it hands it back to the loop. */
static void running(rv_stream *s)
{
    L->current = s;
    atomic_store_explicit(&rv_stat.running_stream, s ? s->id : 0, memory_order_relaxed);
    atomic_store(&rv_stat.running_since, rv_now());
}

static void back_in_loop(void)
{
    L->current = NULL;
    atomic_store(&rv_stat.running_since, 0);
    atomic_store_explicit(&rv_stat.running_stream, 0, memory_order_relaxed);
}

static void resume(rv_waiter *w)
{
    running(w->stream);
    int state = 0;
    rb_protect(transfer_to, w->fiber, &state);
    back_in_loop();
    if (state)
        report_escape("an exception escaped a fiber");
}

struct start_args {
    VALUE fiber, slot;
};

static VALUE start_in(VALUE arg)
{
    struct start_args *a = (struct start_args *)arg;
    return rb_fiber_transfer(a->fiber, NIL_P(a->slot) ? 0 : 1, &a->slot);
}

/* Runs a request's fiber until it first waits or ends: a new one, or a
 * parked one (rv_fiber_pool.c), which is handed the request's slot.
 * Returns 0 when the switch itself failed before the fiber took the
 * request (Ruby maps a new fiber's stack at its first switch, and under a
 * memory limit that raises FiberError): the request is then still the
 * caller's to answer, and the exception is left in rb_errinfo. */
int rv_run_fiber(rv_stream *s, VALUE fiber, VALUE slot)
{
    uint32_t at = s->slot; /* s is freed if the request ends meanwhile */
    running(s);
    int state = 0;
    struct start_args a = {fiber, slot};
    rb_protect(start_in, (VALUE)&a, &state);
    back_in_loop();
    if (!state)
        return 1;
    if (L->streams[at] == s && !s->started)
        return 0;
    report_escape("an exception escaped a request fiber");
    return 1;
}

/* Raises exc in fiber at the point where it waits. A fiber that cannot take
 * it now (it is not waiting in the scheduler, or its wait is one that must
 * finish) gets it at its next wait, or when the wait ends. */
void rv_interrupt(VALUE fiber, VALUE exc)
{
    st_data_t found;
    if (!st_lookup(L->waiting, (st_data_t)fiber, &found)) {
        st_insert(L->pending, (st_data_t)fiber, (st_data_t)exc);
        return;
    }
    rv_waiter *w = (rv_waiter *)found;
    if (w->uninterruptible) {
        if (NIL_P(w->held))
            w->held = exc;
        return;
    }
    waiter_detach(w);
    w->state = RV_W_IDLE;
    struct raise_args a = {fiber, exc};
    running(w->stream);
    int state = 0;
    rb_protect(raise_in, (VALUE)&a, &state);
    back_in_loop();
    if (state)
        report_escape("an exception escaped a fiber");
}

/* ---- descriptors ---- */

static int ruby_events(uint32_t got, uint32_t wanted);

static uint32_t interest(rv_fdwait *f)
{
    uint32_t want = 0;
    for (rv_waiter *w = f->first; w; w = w->fd_next)
        want |= w->events;
    return want;
}

static void arm(int fd)
{
    rv_fdwait *f = &L->fds[fd];
    uint32_t want = interest(f);
    if (!want || (f->armed & want) == want)
        return;
    struct epoll_event ev = {.events = want | f->armed | EPOLLONESHOT, .data.fd = fd};
    int op = f->added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    int rc = epoll_ctl(L->epfd, op, fd, &ev);
    if (rc < 0 && errno == ENOENT && op == EPOLL_CTL_MOD)
        rc = epoll_ctl(L->epfd, EPOLL_CTL_ADD, fd, &ev);
    else if (rc < 0 && errno == EEXIST && op == EPOLL_CTL_ADD)
        rc = epoll_ctl(L->epfd, EPOLL_CTL_MOD, fd, &ev);
    if (rc == 0) {
        f->added = 1;
        f->armed = ev.events & ~(uint32_t)EPOLLONESHOT;
        return;
    }
    /* epoll refuses regular files (EPERM): they are always ready. Other
     * errors (a closed descriptor) also end the wait: the IO call then
     * reports the real error. */
    for (rv_waiter *w = f->first, *next; w; w = next) {
        next = w->fd_next;
        rv_make_ready(w, INT2FIX(ruby_events(EPOLLIN | EPOLLOUT | EPOLLPRI, w->events)));
    }
}

void rv_fd_watch(rv_waiter *w)
{
    int fd = w->fd;
    if (fd >= L->nfds) {
        int n = L->nfds ? L->nfds : 64;
        while (n <= fd)
            n *= 2;
        L->fds = realloc(L->fds, (size_t)n * sizeof *L->fds);
        if (!L->fds)
            abort();
        memset(L->fds + L->nfds, 0, (size_t)(n - L->nfds) * sizeof *L->fds);
        L->nfds = n;
    }
    rv_fdwait *f = &L->fds[fd];
    w->fd_prev = NULL;
    w->fd_next = f->first;
    if (f->first)
        f->first->fd_prev = w;
    f->first = w;
    arm(fd);
}

void rv_fd_unwatch(rv_waiter *w)
{
    if (w->fd < 0)
        return;
    rv_fdwait *f = &L->fds[w->fd];
    if (w->fd_prev)
        w->fd_prev->fd_next = w->fd_next;
    else if (f->first == w)
        f->first = w->fd_next;
    else
        return; /* not linked */
    if (w->fd_next)
        w->fd_next->fd_prev = w->fd_prev;
    w->fd_next = w->fd_prev = NULL;
}

/* Ruby's IO::READABLE, IO::PRIORITY, IO::WRITABLE from epoll events. */
static int ruby_events(uint32_t got, uint32_t wanted)
{
    int r = 0;
    if (got & (EPOLLERR | EPOLLHUP))
        got |= EPOLLIN | EPOLLOUT;
    if (got & EPOLLRDHUP)
        got |= EPOLLIN;
    got &= wanted;
    if (got & EPOLLIN)
        r |= 1;
    if (got & EPOLLPRI)
        r |= 2;
    if (got & EPOLLOUT)
        r |= 4;
    return r;
}

static void fd_ready(int fd, uint32_t got)
{
    if (fd >= L->nfds)
        return;
    rv_fdwait *f = &L->fds[fd];
    f->armed = 0;
    for (rv_waiter *w = f->first, *next; w; w = next) {
        next = w->fd_next;
        int r = ruby_events(got, w->events);
        if (r)
            rv_make_ready(w, INT2FIX(r));
    }
    if (f->first)
        arm(fd);
}

/* ---- one turn of the loop ---- */

static rv_msg *backlog; /* messages taken from the inbox, not yet handled */

static void handle_control(rv_msg *m);

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
    default:
        handle_control(m);
    }
}

static void run_ready(void)
{
    /* Only those ready now: a fiber that readies itself again waits a turn. */
    rv_waiter *last = L->ready.ready_prev;
    while (!ready_empty()) {
        rv_waiter *w = L->ready.ready_next;
        ready_unlink(w);
        w->state = RV_W_IDLE;
        resume(w);
        if (w == last)
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

struct poll_args {
    struct epoll_event *events;
    int max, timeout, n, err;
};

static void *poll_nogvl(void *p)
{
    struct poll_args *a = p;
    a->n = epoll_wait(L->epfd, a->events, a->max, a->timeout);
    a->err = errno;
    return NULL;
}

static void poll_ubf(void *p)
{
    (void)p;
    rv_inbox_wake(&rv_to_vm);
}

static uint64_t turn_began; /* when the loop last woke */

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
    t->deadline = now + TICK_NS;
    rv_timer_add(&L->timers, t);
}

static int fds_waited_on(void)
{
    return L->waiting->num_entries > 0 && L->nfds > 0;
}

/* Before sleeping, hand the core to whoever is runnable (the Go threads
 * that are about to send the next request) a few times and look again: a
 * request that arrives meanwhile costs no sleep, no wakeup, no eventfd. */
static int yield_for_work(void)
{
    static int spins = RV_YIELD_SPINS;
    for (int i = 0; i < spins; i++) {
        sched_yield();
        if (atomic_load(&rv_to_vm.head))
            return 1;
    }
    return 0;
}

/* Lets Ruby threads that wait for the GVL in (offload threads done with a
 * call), at most once a millisecond while the loop stays busy: with another
 * Ruby thread alive (the interrupter, rv_interrupt.c, always is) each call
 * hands the GVL round, which cost the loop ~5% of its time when made every
 * turn. Ruby's timer makes the same handover every 100 ms anyway. */
static void let_threads_in(void)
{
    static uint64_t last;
    uint64_t now = rv_now();
    if (now - last >= 1000000) {
        last = now;
        rb_thread_schedule();
    }
}

static void poll_io(void)
{
    static struct epoll_event events[256];
    struct poll_args a = {events, 256, 0, 0, 0};
    int busy = backlog || !ready_empty() || atomic_load(&rv_to_vm.head);
    if (!busy) {
        rv_timer *t = rv_timer_peek(&L->timers);
        if (t) {
            uint64_t now = rv_now();
            a.timeout = t->deadline <= now ? 0 : (int)((t->deadline - now + 999999) / 1000000);
        } else {
            a.timeout = -1;
        }
    }
    if (a.timeout != 0 && yield_for_work())
        a.timeout = 0;
    if (a.timeout == 0) {
        if (fds_waited_on())
            a.n = epoll_wait(L->epfd, events, 256, 0);
        let_threads_in();
    } else if (rv_inbox_sleep(&rv_to_vm)) {
        uint64_t now = rv_now();
        atomic_fetch_add_explicit(&rv_stat.busy_ns, now - turn_began, memory_order_relaxed);
        atomic_store(&rv_stat.awake_since, 0);
        rb_nogvl(poll_nogvl, &a, poll_ubf, NULL, RB_NOGVL_UBF_ASYNC_SAFE);
        atomic_store(&rv_to_vm.sleeping, 0);
        turn_began = rv_now();
        atomic_store(&rv_stat.awake_since, turn_began);
    }
    for (int i = 0; i < a.n; i++) {
        int fd = events[i].data.fd;
        if (fd == rv_to_vm.efd)
            rv_inbox_drain_fd(&rv_to_vm);
        else
            fd_ready(fd, events[i].events);
    }
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
    poll_io();
    return Qnil;
}

void rv_loop_run(void)
{
    turn_began = rv_now();
    tick.fire = tick_fired;
    tick.deadline = turn_began + TICK_NS;
    rv_timer_add(&L->timers, &tick);
    while (!L->stopping) {
        int state = 0;
        rb_protect(loop_turn, Qnil, &state);
        L->current = NULL;
        if (state)
            report_escape("an exception reached the event loop");
    }
}

/* ---- control messages ---- */

struct load_args {
    VALUE path, environment, clusters;
};

static VALUE load_app(VALUE arg)
{
    struct load_args *a = (struct load_args *)arg;
    return rb_funcall(rv_mRuvoy, rv_id_load_app, 2, a->path, a->environment);
}

static VALUE describe_boot_error(VALUE exc)
{
    return rb_funcall(rv_mRuvoy, rb_intern("describe_boot_error"), 1, exc);
}

static void handle_control(rv_msg *m)
{
    switch (m->kind) {
    case RV_IN_LOAD_APP: {
        /* payload: rackup path, environment, upstream clusters (comma
         * separated; none: upstream calls are off), each ending in NUL */
        VALUE fields[3] = {Qnil, Qnil, Qnil};
        const char *p = m->data, *end = m->data + m->len;
        for (int i = 0; i < 3 && p < end; i++) {
            size_t n = strnlen(p, (size_t)(end - p));
            fields[i] = rb_str_new(p, (long)n);
            p += n + 1;
        }
        struct load_args a = {fields[0], fields[1], fields[2]};
        int state = 0;
        VALUE app = rb_protect(load_app, (VALUE)&a, &state);
        if (state) {
            VALUE exc = rb_errinfo();
            rb_set_errinfo(Qnil);
            VALUE text = rb_protect(describe_boot_error, exc, &state);
            if (state || !RB_TYPE_P(text, T_STRING)) {
                rb_set_errinfo(Qnil);
                text = rb_str_new_cstr("the application failed to load");
            }
            rv_send_reply(0, RSTRING_PTR(text), (size_t)RSTRING_LEN(text));
        } else {
            rb_ary_push(L->apps, app);
            VALUE clusters = Qnil;
            if (!NIL_P(a.clusters) && RSTRING_LEN(a.clusters) > 0)
                clusters = rb_obj_freeze(rb_str_split(a.clusters, ","));
            rb_ary_push(L->app_clusters, clusters);
            rv_send_reply((uint64_t)RARRAY_LEN(L->apps), "", 0);
        }
        break;
    }
    case RV_IN_UNLOAD_APP:
        /* Requests in flight hold the app themselves (rv_stream.app). */
        if (m->aux >= 1 && (long)m->aux <= RARRAY_LEN(L->apps))
            rb_ary_store(L->apps, (long)m->aux - 1, Qnil);
        rv_send_reply(1, "", 0);
        break;
    case RV_IN_STOP:
        L->stopping = 1;
        break;
    default:
        break;
    }
    rv_msg_free(m);
}
