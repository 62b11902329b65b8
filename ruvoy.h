/*
 * ruvoy.h: what Go and the VM thread share.
 *
 * Go and the VM thread exchange owned messages (rv_msg): the sender builds a
 * message in malloc'd memory, pushes it on the receiver's inbox, and the
 * receiver frees it. Nothing else is shared. Go never touches a Ruby VALUE.
 */
#ifndef RUVOY_H
#define RUVOY_H

#include <stddef.h>
#include <stdint.h>

/* Message kinds, Go -> VM. */
enum {
    RV_IN_REQUEST = 1, /* a new request: payload is an encoded request head */
    RV_IN_BODY,        /* request body bytes */
    RV_IN_BODY_END,    /* request body complete; flags say how it ended */
    RV_IN_CREDIT,      /* the client took aux response bytes: open the window */
    RV_IN_CANCEL,      /* the client went away (RV_F_MALFORMED: its body was malformed) */
    RV_IN_DONE,        /* the response was written (flags: RV_F_ERROR if not) */
    RV_IN_LOAD_APP,    /* control: load a rackup; payload is its fields */
    RV_IN_UNLOAD_APP,  /* control: drop app aux once its requests end */
    RV_IN_STOP,        /* control: leave the loop and shut the VM down */
    RV_IN_UPSTREAM_REPLY, /* the outcome of upstream call aux (rv_upstream.c) */
    RV_IN_INTERRUPT,   /* raise in request stream's fiber (0: every request); aux: RV_INTR_* */
};

/* Message kinds, VM -> Go. */
enum {
    RV_OUT_HEAD = 32, /* status (aux) and headers, then maybe body bytes */
    RV_OUT_DATA,      /* response body bytes */
    RV_OUT_FILE,      /* send the file named by the payload (aux: its size) */
    RV_OUT_RESET,     /* the body failed after the head went out: cut it */
    RV_OUT_END,       /* nothing but flags (RV_F_END / RV_F_FINAL) */
    RV_OUT_LOG,       /* a log entry: flags is the level, payload its fields */
    RV_OUT_REPLY,     /* reply to a control message; aux is its result */
    RV_OUT_CREDIT,    /* the app took aux request body bytes: Go may read on */
    RV_OUT_UPSTREAM,  /* call an upstream cluster; aux is the call id */
    RV_OUT_UPSTREAM_CANCEL, /* the caller of upstream call aux stopped waiting */
};

/* Message flags. */
enum {
    RV_F_END = 1,       /* out: the response is complete */
    RV_F_FINAL = 2,     /* out: the VM is done with this stream */
    RV_F_WANT_DONE = 4, /* out: send RV_IN_DONE once the response is written */
    RV_F_ERROR = 8,     /* in: the body or the write failed */
    RV_F_TOO_LARGE = 16, /* in: the body went over --max-body-bytes */
    RV_F_FAILED = 32,    /* in (upstream reply): the call failed; payload says why */
    RV_F_MALFORMED = 64  /* in (body end, cancel): the request body's framing is invalid */
};

/* Why a request is interrupted (RV_IN_INTERRUPT's aux, rv_interrupt.c). */
enum {
    RV_INTR_TIMEOUT = 1, /* it ran past its request timeout: Ruvoy::RequestTimeout */
    RV_INTR_SHUTDOWN,    /* the stop's grace period is over: Ruvoy::Shutdown */
    RV_INTR_RUBY,        /* Ruby code gave the exception (Rack::Timeout) */
    RV_INTR_EXIT         /* internal: the interrupter thread ends */
};

/* Log levels carried in an RV_OUT_LOG message's flags. */
enum { RV_LOG_DEBUG = 0, RV_LOG_INFO, RV_LOG_WARN, RV_LOG_ERROR };

/* Request head flags (first byte of an RV_IN_REQUEST payload). */
enum {
    RV_REQ_TLS = 1,      /* arrived over TLS */
    RV_REQ_BODY = 2,     /* a body follows in RV_IN_BODY messages */
    RV_REQ_ASTERISK = 4, /* request target was "*" (OPTIONS *) */
    RV_REQ_HEAD = 8,     /* method is HEAD: no body is sent */
};

typedef struct rv_msg {
    struct rv_msg *next;
    uint64_t stream; /* stream id; 0 for control messages */
    uint32_t kind;
    uint32_t flags;
    uint64_t aux;
    size_t len; /* payload bytes in data */
    char data[];
} rv_msg;

/* Where a message's payload starts (cgo cannot name a flexible array). */
enum { RV_MSG_DATA = offsetof(rv_msg, data) };

/* Startup settings, handed to rv_start. All strings are copied. */
typedef struct rv_config {
    const char *program;  /* $0 */
    const char *argv;     /* ARGV, NUL-separated, argc entries */
    int argc;
    const char *rubylib;  /* embedded Ruby library source */
    size_t rubylib_len;
    uint32_t max_streams; /* stream slots: the admission limit */
    uint64_t window;      /* response bytes in flight per stream */
} rv_config;

/* What the VM thread reports about itself, read by Go at any time. */
typedef struct rv_vm_stats {
    uint64_t busy_ns;         /* time the VM thread spent outside its wait, up to
                                 its last wait */
    uint64_t awake_since;     /* CLOCK_MONOTONIC ns when it last woke; 0 while it waits */
    uint64_t lag_ns;          /* how late the loop's last 250 ms tick fired */
    uint64_t running_since;   /* CLOCK_MONOTONIC ns when Ruby code last got the
                                 thread from the loop; 0 while the loop has it */
    uint64_t running_stream;  /* the request whose fiber runs, or 0 */
    uint64_t requests;        /* request fibers alive */
    uint64_t fibers;          /* other fibers the scheduler runs (Fiber.schedule) */
    uint64_t response_bytes;  /* response bytes sent to Go, not yet written */
    uint64_t gc_count, gc_time_ns, heap_live_slots;
    uint64_t offload_busy, offload_waiting;
} rv_vm_stats;

/* Go-facing API (rv_boot.c). */
int rv_start(const rv_config *cfg, char **error);
void rv_submit(uint32_t kind, uint64_t stream, uint32_t flags, uint64_t aux,
               const void *data, size_t len);
rv_msg *rv_out_poll(void);
int rv_out_fd(void);
int rv_join(void);
void rv_msg_free(rv_msg *m);
void rv_release_memory(void);
void rv_read_stats(rv_vm_stats *out);
void rv_stall_check(uint64_t since);
void rv_cancel(uint64_t stream, uint32_t flags);
void rv_interrupt_request(uint64_t stream, uint32_t reason);
uint64_t rv_monotonic_ns(void);
const char *rv_header_name(int code);
const char *rv_ruby_version(void);
const char *rv_ruby_platform(void);
const char *rv_built_abi(void);

#endif
