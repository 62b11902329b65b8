/*
 * rv_scheduler.c: Ruvoy::Scheduler, the Fiber scheduler of the VM thread.
 *
 * Its hooks put the calling fiber to sleep in the event loop (rv_wait.c):
 * sleep and block get a timer, io_wait an epoll registration, unblock makes
 * a blocked fiber ready (from any Ruby thread), timeout_after raises in the
 * fiber when its timer fires. address_resolve and process_wait are Ruby
 * (lib/ruvoy/scheduler.rb): they hand the blocking call to a thread.
 */
#include "rv_internal.h"

#include <math.h>
#include <ruby/fiber/scheduler.h>
#include <sys/epoll.h>

#define L rv_L

static VALUE cScheduler;

static uint64_t deadline_after(VALUE seconds)
{
    double s = NUM2DBL(seconds);
    if (isnan(s) || s < 0)
        rb_raise(rb_eArgError, "time interval must not be negative");
    if (s > 1e9)
        s = 1e9;
    return rv_now() + (uint64_t)(s * 1e9);
}

static VALUE kernel_sleep(int argc, VALUE *argv, VALUE self)
{
    (void)self;
    rv_waiter w;
    rv_waiter_init(&w, RV_WAIT_SLEEP);
    if (argc > 0 && !NIL_P(argv[0]))
        w.timer.deadline = deadline_after(argv[0]);
    rv_wait(&w);
    return Qnil;
}

static VALUE io_wait(VALUE self, VALUE io, VALUE events, VALUE timeout)
{
    (void)self;
    rv_waiter w;
    rv_waiter_init(&w, RV_WAIT_IO);
    int ev = NUM2INT(events);
    w.fd = rb_io_descriptor(io);
    if (ev & 1)
        w.events |= EPOLLIN | EPOLLRDHUP;
    if (ev & 2)
        w.events |= EPOLLPRI;
    if (ev & 4)
        w.events |= EPOLLOUT;
    w.result = Qfalse; /* on timeout */
    if (!NIL_P(timeout))
        w.timer.deadline = deadline_after(timeout);
    return rv_wait(&w);
}

static VALUE block(int argc, VALUE *argv, VALUE self)
{
    (void)self;
    rb_check_arity(argc, 1, 2);
    rv_waiter w;
    rv_waiter_init(&w, RV_WAIT_BLOCK);
    w.result = Qfalse; /* on timeout */
    if (argc > 1 && !NIL_P(argv[1]))
        w.timer.deadline = deadline_after(argv[1]);
    return rv_wait(&w);
}

/* May run on any Ruby thread (a Queue pushed from an offload thread). Ruby
 * 3.1's Mutex#sleep (ConditionVariable#wait) waits in kernel_sleep and is
 * woken with unblock, so a sleep may end early too, as Ruby allows. */
static VALUE unblock(VALUE self, VALUE blocker, VALUE fiber)
{
    (void)self, (void)blocker;
    st_data_t found;
    if (st_lookup(L->waiting, (st_data_t)fiber, &found)) {
        rv_waiter *w = (rv_waiter *)found;
        if (w->reason == RV_WAIT_BLOCK)
            rv_make_ready(w, Qtrue);
        else if (w->reason == RV_WAIT_SLEEP)
            rv_make_ready(w, Qnil);
    }
    rv_wake_from_other_thread();
    return Qnil;
}

/* ---- Fiber.schedule ---- */

static VALUE call_block(VALUE block)
{
    return rb_proc_call_with_block(block, 0, NULL, Qnil);
}

static VALUE scheduled_main(RB_BLOCK_CALL_FUNC_ARGLIST(yielded, block))
{
    (void)yielded, (void)argc, (void)argv, (void)blockarg;
    int state = 0;
    atomic_fetch_add_explicit(&rv_stat.fibers, 1, memory_order_relaxed);
    rb_protect(call_block, block, &state);
    atomic_fetch_sub_explicit(&rv_stat.fibers, 1, memory_order_relaxed);
    if (state) {
        VALUE exc = rb_errinfo();
        rb_set_errinfo(Qnil);
        rv_log_exception(NULL, "a fiber started with Fiber.schedule raised", exc);
    }
    return Qnil;
}

static VALUE transfer_child(VALUE child)
{
    return rb_fiber_transfer(child, 0, NULL);
}

/* Runs the new fiber at once; the caller goes on when it first waits. */
static VALUE fiber(int argc, VALUE *argv, VALUE self)
{
    (void)argc, (void)argv, (void)self;
    VALUE block = rb_block_proc();
    VALUE child = rb_block_call(rv_cFiber, rv_id_new, 0, NULL, scheduled_main, block);
    if (rb_fiber_current() == L->root_fiber) {
        int state = 0;
        rb_protect(transfer_child, child, &state);
        if (state)
            rb_jump_tag(state);
        return child;
    }
    rv_waiter w;
    rv_waiter_init(&w, RV_WAIT_OTHER);
    rv_wait_switching(&w, child);
    return child;
}

/* ---- Timeout.timeout ---- */

typedef struct timeout {
    rv_timer timer;
    VALUE fiber, klass, message, duration;
} timeout;

static VALUE new_exception(VALUE arg)
{
    timeout *t = (timeout *)arg;
    return rb_funcall(t->klass, rv_id_new, 1, t->message);
}

static void timeout_fired(rv_timer *tm)
{
    timeout *t = (timeout *)tm;
    int state = 0;
    VALUE exc = rb_protect(new_exception, (VALUE)t, &state);
    if (state) {
        exc = rb_errinfo();
        rb_set_errinfo(Qnil);
    }
    rv_interrupt(t->fiber, exc);
}

static VALUE timeout_body(VALUE arg)
{
    timeout *t = (timeout *)arg;
    return rb_yield(t->duration);
}

static VALUE timeout_cleanup(VALUE arg)
{
    timeout *t = (timeout *)arg;
    st_data_t key = (st_data_t)t->fiber;
    rv_timer_remove(&L->timers, &t->timer);
    st_delete(L->pending, &key, NULL);
    return Qnil;
}

static VALUE timeout_after(int argc, VALUE *argv, VALUE self)
{
    (void)self;
    rb_check_arity(argc, 2, 3);
    timeout t = {{0, 0, timeout_fired}, rb_fiber_current(), argv[1],
                 argc > 2 && !NIL_P(argv[2]) ? argv[2] : rb_str_new_cstr("execution expired"), argv[0]};
    t.timer.deadline = deadline_after(argv[0]);
    rv_timer_add(&L->timers, &t.timer);
    VALUE result = rb_ensure(timeout_body, (VALUE)&t, timeout_cleanup, (VALUE)&t);
    RB_GC_GUARD(t.klass);
    RB_GC_GUARD(t.message);
    return result;
}

void rv_scheduler_init(void)
{
    cScheduler = rb_define_class_under(rv_mRuvoy, "Scheduler", rb_cObject);
    rb_define_method(cScheduler, "kernel_sleep", kernel_sleep, -1);
    rb_define_method(cScheduler, "io_wait", io_wait, 3);
    rb_define_method(cScheduler, "block", block, -1);
    rb_define_method(cScheduler, "unblock", unblock, 2);
    rb_define_method(cScheduler, "fiber", fiber, -1);
    rb_define_method(cScheduler, "timeout_after", timeout_after, -1);
}

/* Called once the Ruby half of the class (address_resolve, ...) is loaded. */
void rv_scheduler_install(void)
{
    L->scheduler = rb_class_new_instance(0, NULL, cScheduler);
    rb_fiber_scheduler_set(L->scheduler);
}
