/*
 * vm.h: the VM thread's API, what Go calls (rv_api.c). The messages that
 * cross are declared in wire.h.
 */
#ifndef RV_VM_H
#define RV_VM_H

#include "wire.h"

/* Startup settings, handed to rv_start. All strings are copied. */
typedef struct rv_config {
    const char *program;  /* $0 */
    const char *argv;     /* ARGV, NUL-separated, argc entries */
    int argc;
    const char *rubylib;  /* embedded Ruby library source */
    size_t rubylib_len;
    uint32_t max_streams; /* the stream table's size (ids' low 32 bits index it) */
    uint64_t window;      /* response bytes in flight per stream */
} rv_config;

/* What the VM thread reports about itself, read by Go at any time: each
 * field is written atomically, and read so (vm.ReadStats). */
typedef struct rv_vm_stats {
    uint64_t busy_ns;         /* time the VM thread spent outside its wait, up to
                                 its last wait */
    uint64_t awake_since;     /* CLOCK_MONOTONIC ns when it last woke; 0 while it waits */
    uint64_t lag_ns;          /* how late the loop's last 250 ms tick fired */
    uint64_t held_since;   /* CLOCK_MONOTONIC ns when Ruby code last got the
                                 thread from the loop; 0 while the loop has it */
    uint64_t held_stream;  /* the request whose fiber runs, or 0 */
    uint64_t requests;        /* request fibers alive */
    uint64_t fibers;          /* other fibers the scheduler runs (Fiber.schedule) */
    uint64_t response_bytes;  /* response bytes sent to Go, not yet written */
    uint64_t gc_count, gc_time_ns, heap_live_slots;
    uint64_t offload_busy, offload_waiting;
    uint64_t hijacked;        /* hijacked connections the app holds open */
    uint64_t gc_idle_count, gc_idle_ns, gc_idle_max_ns; /* GC steps run between requests (rv_gc_idle.c) */
} rv_vm_stats;

/* Go-facing API (rv_api.c). */
int rv_start(const rv_config *cfg, char **error);
void rv_submit(uint32_t kind, uint64_t stream, uint32_t flags, uint64_t aux,
               const void *data, size_t len);
rv_msg *rv_out_poll(void);
int rv_out_fd(void);
int rv_join(void);
extern int rv_forked_app;     /* a worker forked from a template: its VM runs (rv_fork.c) */
void rv_fork_attached(void); /* in such a worker, instead of rv_start */
rv_msg *rv_msg_new(uint32_t kind, uint64_t stream, uint32_t flags, uint64_t aux, size_t len);
void rv_msg_free(rv_msg *m);
void rv_release_memory(void);
void rv_gc_idle_set(uint64_t ns); /* GC when no request has been in flight for ns; 0: never */
/* The VM's figures, which Go reads with atomic loads, without a call:
 * a cgo call from an idle process wakes Go's sysmon, which then polls
 * for a while. */
const rv_vm_stats *rv_stats_view(void);
void rv_hold_report(uint64_t since);
void rv_cancel(uint64_t stream, uint32_t flags);
void rv_interrupt_request(uint64_t stream, uint32_t reason);
uint64_t rv_monotonic_ns(void);
const char *rv_ruby_version(void);
const char *rv_ruby_platform(void);
const char *rv_built_abi(void);

/* A worker's frames to the front end (rv_relay.c): open with the socket
 * before the VM boots; send frames Go makes, or messages (freed); finish
 * writes what is left and shuts the write side. counts: requests the
 * relay read, and those not yet final. held_watch starts the thread that
 * tells the front end when Ruby code holds the VM thread (rv_held.c): 0
 * or -errno. */
void rv_relay_open(int fd);
void rv_relay_send(uint32_t kind, uint64_t stream, uint32_t flags, uint64_t aux,
                   const void *data, size_t len);
void rv_relay_send_msg(rv_msg *m);
void rv_relay_finish(void);
int rv_held_start(void);
uint64_t *rv_relay_counts(void); /* atomically: admitted, inflight (an int64) */

/* A handler waiting for its own request's messages (rv_direct.c): at most
 * RV_DIRECT_MAX at once, limited further by rv_direct_limit. claim returns
 * a line or -1; wait returns the messages that arrived (oldest first) or
 * NULL after timeout_ns; release returns what is left, NULL once the line
 * is free (call it until then). */
#define RV_DIRECT_MAX 8
void rv_direct_limit(int n);
int rv_direct_claim(uint64_t stream);
rv_msg *rv_direct_wait(int line, uint64_t timeout_ns);
rv_msg *rv_direct_release(int line);

#endif
