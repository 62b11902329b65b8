/*
 * wire.h: the messages Go and the VM thread exchange, declared once.
 *
 * Both sides read this file: the C sources include it, and Go reads
 * internal/wire/wire_gen.go, generated from it (go generate ./internal/wire;
 * a test in internal/wire fails when the two differ). Every integer in a
 * payload is in the host's byte order: both sides run on one machine, in
 * one process or (workers) in two processes of the same binary.
 *
 * A message (rv_msg) is owned by one side at a time: the sender builds it
 * in malloc'd memory, pushes it on the receiver's queue, and the receiver
 * frees it. Its payload is one of the layouts below.
 */
#ifndef RV_WIRE_H
#define RV_WIRE_H

#include <stddef.h>
#include <stdint.h>

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

/* Message kinds, Go -> VM. */
enum {
    RV_IN_REQUEST = 1, /* a new request: payload is a request head; aux is the app id */
    RV_IN_BODY,        /* request body bytes */
    RV_IN_BODY_END,    /* request body complete; flags say how it ended */
    RV_IN_CREDIT,      /* the client took aux response bytes: open the window */
    RV_IN_CANCEL,      /* the client went away (RV_FLAG_MALFORMED: its body was malformed) */
    RV_IN_DONE,        /* the response was written (flags: RV_FLAG_ERROR if not) */
    RV_IN_LOAD_APP,    /* control: load a rackup; payload is strings: rackup, environment, upstreams */
    RV_IN_UNLOAD_APP,  /* control: drop app aux once its requests end */
    RV_IN_STOP,        /* control: leave the loop and shut the VM down */
    RV_IN_UPSTREAM_REPLY, /* the outcome of upstream call aux: an upstream reply */
    RV_IN_INTERRUPT,   /* raise in request stream's fiber (0: every request); aux: RV_INTR_* */
    RV_IN_HIJACKED,    /* the connection is the app's: aux is its descriptor (the VM owns it; RV_FLAG_TCP: the client's socket); RV_FLAG_FAILED: it could not be handed over, payload says why */
    RV_IN_RELAY,       /* control (a worker): read and write the front end's socket, descriptor aux, from now on, its requests for app flags; payload: bytes of it already read (rv_relay.c) */
    RV_IN_FORK,        /* control (a template): fork a worker; aux: its socket (low 32 bits) and urgent socket (high), flags: its slot (rv_template.c) */
    RV_IN_HOOKS,       /* control: run the app's hooks of aux (RV_HOOKS_*); flags: the worker's index; the reply's text is what a block raised (rv_hooks.c) */
};

/* Which of the app's hooks RV_IN_HOOKS runs (lib/ruvoy/hooks.rb). */
enum {
    RV_HOOKS_BEFORE_FORK = 1, /* Ruvoy.before_fork's: in a template, before its first fork */
    RV_HOOKS_WORKER_BOOT      /* Ruvoy.on_worker_boot's: before a worker, or the one process, serves */
};

/* Message kinds, VM -> Go. */
enum {
    RV_OUT_HEAD = 32, /* status and queue time (aux) and a response head, then maybe body bytes */
    RV_OUT_DATA,      /* response body bytes */
    RV_OUT_FILE,      /* a response head whose body is the file it carries (aux: as RV_OUT_HEAD's) */
    RV_OUT_RESET,     /* the response failed: cut it; before the head, aux is the status to answer (0: 500) */
    RV_OUT_END,       /* nothing but flags (RV_FLAG_END / RV_FLAG_FINAL) */
    RV_OUT_LOG,       /* a log entry: flags is the level; payload is strings: message, then name/value pairs (a name ending in _ms: a number) */
    RV_OUT_REPLY,     /* reply to a control message; aux is its result, payload a text */
    RV_OUT_CREDIT,    /* the app took aux request body bytes: Go may read on */
    RV_OUT_UPSTREAM,  /* call an upstream; aux is the call id; payload an upstream call */
    RV_OUT_UPSTREAM_CANCEL, /* the caller of upstream call aux stopped waiting */
    RV_OUT_EARLY_HINTS, /* send a 103 before the head; payload is strings: name/value pairs */
    RV_OUT_HIJACK,      /* hand the connection to the app: no payload (env["rack.hijack"]), or a response head Go writes first (aux: as an RV_OUT_HEAD's, status 0 without a head) */
    RV_OUT_RELAY_END,   /* a worker's socket is done (aux: RV_RELAY_*): its Go side stops the worker */
};

/* Why a worker's relay ended (RV_OUT_RELAY_END's aux). */
enum {
    RV_RELAY_STOP = 0, /* the front end sent RV_IN_STOP */
    RV_RELAY_CLOSED,   /* the front end closed the socket */
    RV_RELAY_FAILED    /* reading or writing it failed, or a frame was broken: payload says how */
};

/*
 * Workers (cluster mode): the same messages cross between the front end and
 * a worker process over a unix socket, each as a frame: a header of
 * RV_FRAME_HEADER bytes (u32 kind, u32 flags, u64 stream, u64 aux, u32
 * payload length, u32 zero), then the payload. The worker hands RV_IN_*
 * frames to its VM and sends its VM's RV_OUT_* messages back as frames;
 * these kinds are the worker's own. An RV_IN_HIJACKED frame carries its
 * descriptor with it (SCM_RIGHTS), as an RV_OUT_FILE frame does its file's;
 * the receiver puts its own number in the message. Once its app has loaded
 * the worker's VM thread reads and writes these frames itself (rv_relay.c).
 * A second socket, the worker's urgent socket, carries RV_IN_INTERRUPT and
 * RV_IN_STOP frames a second time, to the worker's Go side: they must reach
 * a VM thread that Ruby code holds, which reads nothing meanwhile.
 */
enum {
    RV_WORKER_CONFIG = 96, /* front end -> worker, first: JSON settings (the app, the VM's options) */
    RV_WORKER_READY,       /* worker -> front end: aux 1 the app loaded, 0 it failed (payload: Ruby's error) */
    RV_WORKER_STATS,       /* worker -> front end: the VM's figures, RV_WORKER_STATS_COUNT u64s (vm.h's rv_vm_stats order), then its RSS */
    RV_WORKER_HELD,        /* worker -> front end: aux 1 Ruby code holds the VM thread, 0 it let go */
};

/*
 * Templates (--preload): a template process boots the app once and forks
 * the workers (rv_template.c). Its socket to the front end carries frames
 * as a worker's does. The front end sends RV_TEMPLATE_BOOT first, its
 * payload strings: $0, ARGV (NUL-separated), the embedded Ruby library
 * (name, NUL, source, NUL, ...), an RV_IN_LOAD_APP payload; then u32 ARGV's
 * count, u32 the stream table's size, u64 the response window. Every frame the
 * front end sends gets one RV_TEMPLATE_REPLY.
 */
enum {
    RV_TEMPLATE_BOOT = 112,     /* front end -> template, first: its settings (above) */
    RV_TEMPLATE_FORK,           /* front end -> template: fork the worker of slot flags; its socket and urgent socket come with the frame (SCM_RIGHTS) */
    RV_TEMPLATE_REPLY,          /* template -> front end: aux the app's number once it loaded, or the forked worker's pid; 0: it failed, payload says why */
};
enum {
    RV_FRAME_HEADER = 32,
    RV_WORKER_STATS_COUNT = 18,
    RV_FRAME_MAX = 1 << 30, /* a longer frame is a broken stream: the worker is replaced */
    RV_FRAME_MAX_FDS = 200  /* descriptors one sendmsg carries (the kernel's SCM_MAX_FD is 253) */
};

/* Message flags. */
enum {
    RV_FLAG_END = 1,       /* out: the response is complete */
    RV_FLAG_FINAL = 2,     /* out: the VM is done with this stream */
    RV_FLAG_WANT_DONE = 4, /* out: send RV_IN_DONE once the response is written */
    RV_FLAG_ERROR = 8,     /* in: the body or the write failed */
    RV_FLAG_TOO_LARGE = 16, /* in: the body went over the max body size */
    RV_FLAG_FAILED = 32,    /* in (upstream reply): the call failed; payload says why */
    RV_FLAG_MALFORMED = 64, /* in (body end, cancel): the request body's framing is invalid */
    RV_FLAG_TCP = 128       /* in (hijacked): the descriptor is the client's TCP socket itself, not a pumped one */
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

/*
 * A string is a u32 length and its bytes; an absent string has the length
 * RV_ABSENT and no bytes. "Strings" is a payload of strings to its end.
 */
#define RV_ABSENT 0xffffffff

/*
 * Request head (RV_IN_REQUEST):
 *   u8 flags (RV_REQ_*), u8[3] zero, u32 response window (0: the default),
 *   u64 when its head arrived (CLOCK_MONOTONIC ns, the clock every process
 *   of the machine shares; 0: unknown), RV_FIELD_COUNT strings (RV_FIELD_*), u16 header count, then per header:
 *   u16 code (its index in RV_HEADER_NAMES; 0 for others, followed by a u16
 *   length and the CGI name, HTTP_...), then the value as a string.
 */
enum {
    RV_REQ_TLS = 1,      /* arrived over TLS */
    RV_REQ_BODY = 2,     /* a body follows in RV_IN_BODY messages */
    RV_REQ_ASTERISK = 4, /* request target was "*" (OPTIONS *) */
    RV_REQ_HEAD = 8,     /* method is HEAD: no body is sent */
    RV_REQ_HIJACK = 16,  /* the connection can be handed to the app (HTTP/1.x, no request body) */
    RV_REQ_EARLY_HINTS = 32, /* 103 Early Hints reach this client: env["rack.early_hints"] */
};

enum {
    RV_REQ_FLAGS_AT = 0,  /* u8 */
    RV_REQ_WINDOW_AT = 4,   /* u32 */
    RV_REQ_ARRIVED_AT = 8,  /* u64 */
    RV_REQ_FIELDS_AT = 16,  /* the first field */
};

enum {
    RV_FIELD_METHOD,
    RV_FIELD_PATH,           /* PATH_INFO, still escaped */
    RV_FIELD_QUERY,
    RV_FIELD_URI,            /* REQUEST_URI */
    RV_FIELD_SERVER_NAME,
    RV_FIELD_SERVER_PORT,
    RV_FIELD_PROTOCOL,
    RV_FIELD_REMOTE_ADDR,
    RV_FIELD_CONTENT_LENGTH, /* absent without one */
    RV_FIELD_CONTENT_TYPE,   /* absent without one */
    RV_FIELD_CONTEXT,        /* JSON for env["ruvoy.context"]; absent unless the app asked */
    RV_FIELD_SCRIPT_NAME,    /* where a server in front mounted the app; empty: at the root */
    RV_FIELD_REMOTE_USER,    /* the user a server in front authenticated; absent without one */
    RV_FIELD_COUNT
};

/* Request headers common enough to get a ready-made env key, by code
 * (code 0 is none). */
#define RV_HEADER_NAMES                                                        \
    "", "Accept", "Accept-Charset", "Accept-Encoding", "Accept-Language",      \
        "Authorization", "Cache-Control", "Connection", "Cookie", "Dnt",       \
        "Host", "If-Modified-Since", "If-None-Match", "Keep-Alive", "Origin",  \
        "Pragma", "Range", "Referer", "Sec-Ch-Ua", "Sec-Ch-Ua-Mobile",         \
        "Sec-Ch-Ua-Platform", "Sec-Fetch-Dest", "Sec-Fetch-Mode",              \
        "Sec-Fetch-Site", "Sec-Fetch-User", "Te", "Upgrade",                   \
        "Upgrade-Insecure-Requests", "User-Agent", "Via", "X-Csrf-Token",      \
        "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",            \
        "X-Request-Id", "X-Requested-With"

/*
 * Response head (RV_OUT_HEAD and RV_OUT_FILE; aux is the status in its low
 *   32 bits and, above RV_AUX_QUEUED_SHIFT, how long the request waited
 *   from its head's arrival to the app's call, in microseconds):
 *   i64 content length (-1: unknown), i32 file descriptor (FILE only, else
 *   -1), u16 header count, then per header: u16 name length + name, then the
 *   value as a string. The rest of an RV_OUT_HEAD payload is the first body
 *   bytes.
 */
enum { RV_AUX_QUEUED_SHIFT = 32 };

enum {
    RV_RESP_LENGTH_AT = 0,  /* i64 */
    RV_RESP_FD_AT = 8,      /* i32 */
    RV_RESP_COUNT_AT = 12,  /* u16 */
    RV_RESP_HEADERS_AT = 14 /* the first header */
};

/*
 * Upstream call (RV_OUT_UPSTREAM): u32 timeout in ms (0: the upstream's),
 *   strings upstream, method, path, u16 header count, name/value strings,
 *   then the body.
 * Upstream reply (RV_IN_UPSTREAM_REPLY): u16 status, u16 header count,
 *   name/value strings, then the body; with RV_FLAG_FAILED, the reason the
 *   call failed and nothing else.
 */

/* Limits both sides keep. */
enum {
    /* What rack.input keeps in memory for rewind before it moves to a file
     * (lib/ruvoy/input.rb reads Ruvoy::REWIND_IN_MEMORY); the body budget
     * counts it. */
    RV_REWIND_IN_MEMORY = 128 << 10,
};

#endif
