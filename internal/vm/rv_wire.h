/*
 * rv_wire.h: building and reading the payloads wire.h lays out. Plain C,
 * no Ruby: the VM thread uses these, and Go's tests of the wire call them
 * too (internal/vm/wirecheck.go).
 */
#ifndef RV_WIRE_READ_H
#define RV_WIRE_READ_H

#include "wire.h"

rv_msg *rv_msg_new(uint32_t kind, uint64_t stream, uint32_t flags, uint64_t aux, size_t len);
void rv_msg_free(rv_msg *m);

/* ---- building (rv_buf.c): a message whose size is not known up front ---- */

typedef struct rv_buf {
    rv_msg *m;
    size_t cap;
} rv_buf;

void rv_buf_start(rv_buf *b, uint32_t kind, uint64_t stream, size_t hint);
void rv_buf_put(rv_buf *b, const void *p, size_t n);
void rv_buf_put_u16(rv_buf *b, uint16_t v);
void rv_buf_put_u32(rv_buf *b, uint32_t v);
void rv_buf_put_str(rv_buf *b, const char *p, size_t n); /* a string */
rv_msg *rv_buf_finish(rv_buf *b);

/* A response head: its fixed part with no length, no file and no headers;
 * then headers one by one, counted as they come. */
void rv_resp_head_start(rv_buf *b, uint32_t kind, uint64_t stream, uint64_t status, size_t hint);
void rv_resp_head_put(rv_buf *b, const char *name, uint16_t nlen, const char *value, size_t vlen);
void rv_resp_head_set_length(rv_msg *m, int64_t length);
void rv_resp_head_set_fd(rv_msg *m, int32_t fd);

/* ---- reading (rv_wire.c) ---- */

typedef struct rv_reader {
    const char *p, *end;
} rv_reader;

/* Each takes what it reads off the front and returns 1, or 0 when too few
 * bytes are left. */
int rv_read_u16(rv_reader *r, uint16_t *v);
int rv_read_u32(rv_reader *r, uint32_t *v);
int rv_read_bytes(rv_reader *r, size_t n, const char **out);
/* A string: *p is NULL and *len -1 when it is absent. */
int rv_read_str(rv_reader *r, const char **p, long *len);

/* A request head's fixed part; headers stays on the first header. */
typedef struct rv_req_head {
    uint8_t flags;
    uint32_t window;
    uint64_t arrived; /* CLOCK_MONOTONIC ns; 0: unknown */
    const char *field[RV_FIELD_COUNT];
    long field_len[RV_FIELD_COUNT]; /* -1: absent */
    uint16_t nheaders;
    rv_reader headers;
} rv_req_head;

int rv_req_head_read(const char *p, size_t n, rv_req_head *h);

/* One header of a request head: code is 0 when name carries the CGI name. */
typedef struct rv_req_header {
    uint16_t code;
    const char *name;
    uint16_t name_len;
    const char *value;
    long value_len;
} rv_req_header;

int rv_req_header_read(rv_reader *r, rv_req_header *out);

/* A template's settings (wire.h, "Templates"): strings point into the
 * payload; each *_len is its length. */
typedef struct rv_template_settings {
    const char *program, *argv, *rubylib, *load;
    long program_len, argv_len, rubylib_len, load_len;
    uint32_t argc, max_streams;
    uint64_t window;
} rv_template_settings;

int rv_template_settings_read(const char *p, size_t n, rv_template_settings *s);

/* The request header a code names, or NULL. */
const char *rv_header_name(int code);
enum { RV_HEADER_COUNT = sizeof((const char *[]){RV_HEADER_NAMES}) / sizeof(const char *) };

#endif
