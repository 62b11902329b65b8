/*
 * rv_internal.h: the VM thread's own declarations. Only C files include this;
 * everything here runs on the VM thread (or on Ruby threads holding the GVL),
 * except the inbox functions, which any thread may call.
 */
#ifndef RV_INTERNAL_H
#define RV_INTERNAL_H

#include <ruby.h>
#include <ruby/io.h>
#include <ruby/thread.h>
#include <ruby/st.h>
#include <stdatomic.h>

#include <signal.h>
#include "vm.h"
#include "rv_wire.h"

/* ---- inboxes (rv_queue.c) ---- */

typedef struct rv_inbox {
    _Atomic(rv_msg *) head;
    atomic_int sleeping;
    int efd;
} rv_inbox;

int rv_inbox_init(rv_inbox *q);
void rv_inbox_push(rv_inbox *q, rv_msg *m);
rv_msg *rv_inbox_take(rv_inbox *q);
int rv_inbox_sleep(rv_inbox *q);
void rv_inbox_wake(rv_inbox *q);
void rv_inbox_drain_fd(rv_inbox *q);

extern rv_inbox rv_to_vm, rv_to_go;

/* ---- the way out to Go (rv_outbox.c) ---- */
/* A message for Go: to a worker's relay, its request's direct line, or
 * rv_to_go. */
void rv_to_go_push(rv_msg *m);
void rv_send_reply(uint64_t result, const char *text, size_t len); /* a control message's answer */
void rv_outbox_divert(int (*take)(rv_msg *m)); /* a worker's relay takes what it can */
int rv_direct_take(rv_msg *m);                 /* 1: it went to its direct line (rv_direct.c) */

/* ---- a worker's relay (rv_relay.c) ---- */
extern _Thread_local int rv_vm_thread;   /* 1 on the VM thread */
void rv_relay_on_busy(void (*fn)(void)); /* fn hears of a request to a worker with none in flight */
void rv_relay_begin(rv_msg *m);         /* RV_IN_RELAY */
void rv_relay_flush(void);              /* the loop, before it waits */
int rv_relay_fd(void);                  /* the socket the loop reads, or -1 */
void rv_relay_events(uint32_t events);  /* epoll says the socket is ready */
void rv_relay_flush_held(void);         /* writes what a held VM thread sent */
void rv_relay_trim(void);               /* gives back an empty out buffer (idle) */
void rv_relay_busy(int busy);           /* busy with no request (a GC step): the front end hears at once */

/* ---- timers (rv_timer.c): a min-heap of deadlines ---- */

typedef struct rv_timer rv_timer;
struct rv_timer {
    uint64_t deadline; /* CLOCK_MONOTONIC nanoseconds */
    size_t heap_at;    /* 1-based heap position; 0 when not scheduled */
    void (*fire)(rv_timer *t);
};

typedef struct rv_timers {
    rv_timer **heap;
    size_t len, cap;
} rv_timers;

uint64_t rv_now(void);
void rv_timer_add(rv_timers *h, rv_timer *t);
void rv_timer_remove(rv_timers *h, rv_timer *t);
rv_timer *rv_timer_peek(rv_timers *h);

/* ---- waiting fibers (rv_wait.c) ---- */

enum { RV_W_IDLE, RV_W_WAITING, RV_W_READY };

/* Why a request's own fiber waits; other waits are RV_WAIT_OTHER. */
enum { RV_WAIT_OTHER, RV_WAIT_INPUT, RV_WAIT_CREDIT, RV_WAIT_DONE, RV_WAIT_BLOCK, RV_WAIT_SLEEP, RV_WAIT_IO };

typedef struct rv_stream rv_stream;
typedef struct rv_waiter rv_waiter;

/* A suspended fiber. It lives on that fiber's own stack for as long as the
 * fiber waits; rv_wait's ensure unlinks it from everything it is in. */
struct rv_waiter {
    VALUE fiber;
    VALUE result;        /* what rv_wait returns */
    int state;           /* RV_W_* */
    int reason;          /* RV_WAIT_* */
    int uninterruptible; /* interrupts are held until the wait ends */
    VALUE held;          /* an interrupt that arrived while uninterruptible */
    rv_waiter *ready_next, *ready_prev;
    rv_timer timer;
    int fd;              /* io_wait: the descriptor, or -1 */
    uint32_t events;     /* io_wait: wanted epoll events */
    rv_waiter *fd_next, *fd_prev;
    rv_stream *stream;   /* the request whose own fiber this is, if any */
    rv_msg *reply;       /* an upstream call's reply (rv_upstream.c) */
};

/* One request as the VM thread sees it. */
struct rv_stream {
    uint64_t id;
    uint32_t index; /* in the stream table */
    VALUE fiber, app, env;
    VALUE response;                /* what the app returned, for response_finished */
    VALUE input;                   /* the request's Ruvoy::Input, released at the end */
    rv_msg *request;               /* the RV_IN_REQUEST message, kept until the end */
    rv_msg *in_first, *in_last;    /* body chunks not yet taken by the app */
    int in_state;                  /* RV_BODY_* */
    uint64_t inflight;             /* response bytes sent but not yet credited */
    uint64_t window;               /* the most that may be in flight */
    uint64_t arrived;              /* when its head arrived (CLOCK_MONOTONIC ns; 0: unknown) */
    uint32_t queued_us;            /* from then to the app's call (RV_AUX_QUEUED_SHIFT) */
    rv_buf out;                    /* response message built but not yet pushed */
    size_t out_body;               /* body bytes in it */
    int head_sent;                 /* a head went to Go */
    int reset;                     /* the body failed after the head went out */
    int ended;                     /* an END went to Go before the final message */
    int cancelled;                 /* RV_CANCEL_*: Go is done with the request */
    int interrupt_pending;         /* an exception waits for the fiber's next wait */
    int interrupt;                 /* RV_INTR_*: why it is being interrupted, or 0 */
    int interrupt_delivered;       /* its exception was raised */
    VALUE interrupt_exc;           /* RV_INTR_RUBY's exception */
    int done, done_error;          /* RV_IN_DONE arrived */
    int started;                   /* its fiber began serving it */
    int finishing;                 /* the app is done; after-reply hooks may run */
    rv_waiter *waiter;             /* the request fiber's current wait */
    rv_waiter *input_waiter;       /* who waits for body bytes */
    rv_waiter *credit_waiter;      /* who waits for the response window */
    rv_waiter *done_waiter;        /* who waits for the response to be written */
    rv_waiter *hijack_waiter;      /* who waits for the connection (rv_hijack.c) */
    VALUE hijack_io, hijack_call;  /* the app's end of the connection, and who gets it */
};

enum { RV_BODY_OPEN, RV_BODY_EOF, RV_BODY_FAILED, RV_BODY_TOO_LARGE, RV_BODY_MALFORMED };

/* Why Go gave up on a request: its client went away, or its body was
 * malformed (Go answered 400 itself). */
enum { RV_CANCEL_NONE, RV_CANCEL_GONE, RV_CANCEL_MALFORMED };

typedef struct rv_fdwait {
    rv_waiter *first;
    uint32_t armed; /* events registered with epoll (oneshot) */
    int added;      /* the fd is in the epoll set */
} rv_fdwait;

typedef struct rv_loop {
    VALUE root_fiber, thread, scheduler;
    _Atomic uint64_t *cancelled;  /* by index: the id of a request whose client left */
    VALUE apps;                 /* Array: app id -> app, or nil */
    rv_stream **streams;        /* by index */
    uint32_t nstreams, live;
    uint64_t window;
    rv_stream *current;         /* the request whose fiber runs now, if any */
    rv_waiter ready;            /* sentinel of the ready list */
    rv_timers timers;
    st_table *waiting;          /* fiber -> rv_waiter*, every suspended fiber */
    st_table *pending;          /* fiber -> exception to raise at its next wait */
    st_table *calls;            /* upstream call id -> rv_waiter* */
    VALUE app_upstreams;        /* Array: app id -> upstreams it may call, or nil */
    int epfd;
    rv_fdwait *fds;
    int nfds;
    int stopping;
    int booted;
} rv_loop;

extern rv_loop *rv_L;

/* The VM thread writes these; Go reads them (rv_stats_view, rv_api.c). */
typedef struct rv_stats {
    _Atomic uint64_t busy_ns, awake_since, lag_ns, held_since, held_stream, requests, fibers,
        response_bytes, gc_count, gc_time_ns, heap_live_slots, offload_busy, offload_waiting, hijacked,
        gc_idle_count, gc_idle_ns, gc_idle_max_ns;
} rv_stats;
extern rv_stats rv_stat;

void rv_loop_init(const rv_config *cfg); /* rv_loop.c */
void rv_loop_run(void);
void rv_control_handle(rv_msg *m);        /* rv_control.c */
void rv_selector_init(void);              /* rv_selector.c */
void rv_selector_poll(int busy);
void rv_gc_clock_init(void);
void rv_gc_idle_init(void);               /* rv_gc_idle.c */
void rv_gc_idle_busy(void);               /* a request starts */
void rv_gc_idle_quiet(void);              /* the last request ended */
int rv_run_fiber(rv_stream *s, VALUE fiber, VALUE index); /* rv_wait.c */
void rv_run_alone(void);
void rv_resume(rv_waiter *w);
void rv_wait_hook(void (*before_wait)(rv_waiter *w));
void rv_report_escape(const char *what);
int rv_ready_empty(void);                 /* rv_selector.c: the ready list */
rv_waiter *rv_ready_first(void);
rv_waiter *rv_ready_last(void);
void rv_ready_unlink(rv_waiter *w);
void rv_fiber_cache_init(void);
VALUE rv_fiber_take(void);
VALUE rv_fiber_park(void);
void rv_waiter_init(rv_waiter *w, int reason);
VALUE rv_wait(rv_waiter *w);
VALUE rv_wait_switching(rv_waiter *w, VALUE target);
void rv_make_ready(rv_waiter *w, VALUE result);
void rv_interrupt(VALUE fiber, VALUE exc);
void rv_fd_watch(rv_waiter *w);
void rv_fd_unwatch(rv_waiter *w);
void rv_wake_from_other_thread(void);

/* ---- streams, requests and responses ---- */

rv_stream *rv_stream_find(uint64_t id);
void rv_stream_push(rv_stream *s, rv_msg *m);
void rv_stream_flush(rv_stream *s);
void rv_stream_wait(rv_stream *s, rv_waiter **where, int reason);
VALUE rv_stream_wait_done(VALUE where);
void rv_stream_end(rv_stream *s);
void rv_stream_finish(rv_stream *s);
VALUE rv_cancel_exception(rv_stream *s);
VALUE rv_pending_exception(rv_stream *s);
VALUE rv_interrupt_exception(rv_stream *s);
void rv_stream_init(void);
void rv_interrupt_deliver(rv_msg *m);
void rv_interrupt_init(void);
void rv_interrupt_restart(void);
void rv_early_hints_init(void);
void rv_request_start(rv_msg *m);
void rv_stream_deliver(rv_msg *m);
VALUE rv_request_main(RB_BLOCK_CALL_FUNC_ARGLIST(yielded, index));
VALUE rv_env_build(rv_stream *s);
void rv_respond(rv_stream *s, VALUE env, VALUE response);
void rv_respond_error(rv_stream *s, int status);
void rv_request_failed(rv_stream *s, VALUE exc, const char *what); /* the app or its body raised */
void rv_stream_write(rv_stream *s, VALUE str, int now);
void rv_response_init(void);
void rv_request_init(void);
void rv_upstream_init(void);
void rv_upstream_deliver(rv_msg *m);
VALUE rv_input_read_chunk(rv_stream *s);
void rv_hijack_init(void);                /* rv_hijack.c */
void rv_hijack_deliver(rv_msg *m);
void rv_hijack_respond(rv_stream *s, VALUE callable);
void rv_hijack_run(rv_stream *s);
void rv_hijack_returned(VALUE response, int state);
void rv_hijack_count(void);

/* ---- logging (rv_log.c) ---- */

void rv_log(int level, const char *msg, int nfields, const char *const *fields);
void rv_log_exception(rv_stream *s, const char *what, VALUE exc);

/* ---- Ruby-side names (rv_ruby.c) ---- */

extern VALUE rv_mRuvoy, rv_eClientDisconnected, rv_eBodyTooLarge, rv_eBadRequest, rv_eRequestTimeout, rv_eShutdown, rv_cInput, rv_empty_input, rv_cFiber,
    rv_eFiberError, rv_eUpstreamError;
extern ID rv_id_call, rv_id_each, rv_id_close, rv_id_to_path, rv_id_raise, rv_id_new,
    rv_id_to_ary, rv_id_load_app, rv_id_error_fields, rv_id_after_reply;
void rv_ruby_init(void);
void rv_ruby_bind(void);
void rv_scheduler_install(void);

/* ---- signals (rv_signals.c) and the hold reporter (rv_hold.c) ---- */

void rv_signals_save(void);
void rv_signals_fix(void);
void rv_signals_refix(const struct sigaction *was);
void rv_fork(rv_msg *m); /* rv_fork.c */
void rv_hooks_handle(rv_msg *m); /* rv_hooks.c */
void rv_hooks_shutdown(void);
void rv_fork_prepare(int template_fd, char *argv0, size_t room);
int rv_read_full(int fd, void *p, size_t n);
void rv_write_full(int fd, const void *p, size_t n);
void rv_signals_block(void);
void rv_signal_fixup(int sig);
void rv_hold_init(void);
int rv_hold_signal(void);
void rv_scheduler_init(void);
void rv_env_init(void);

#define RV_INDEX(id) ((uint32_t)((id) & 0xffffffffu))

#endif
