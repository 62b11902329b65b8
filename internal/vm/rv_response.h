/*
 * rv_response.h: what the files that turn an app's response into messages
 * share (rv_response.c, rv_response_head.c, rv_response_body.c).
 */
#ifndef RV_RESPONSE_H
#define RV_RESPONSE_H

#include "rv_internal.h"

typedef struct resp {
    rv_stream *s;
    VALUE env, status_v, headers, body;
    VALUE array; /* the body's parts when it is (or converts to) an Array */
    int status;
    int no_body;      /* HEAD request, or a status without a body */
    int64_t declared; /* Content-Length the app gave, or -1 */
    int64_t sent;     /* body bytes the app produced */
    const char *malformed;
    VALUE malformed_name;
    VALUE hijack; /* a rack.hijack header's callable (partial hijack), or nil */
} resp;

/* Ruvoy::MalformedResponse: what the app returned breaks Rack's rules. */
extern VALUE rv_eMalformed;

/* The head (rv_response_head.c). */
VALUE rv_resp_build_head(VALUE r);                /* under rb_protect; sets r->malformed */
void rv_stream_head_length(rv_stream *s, int64_t length);
void rv_resp_log_malformed(resp *r);

/* The body (rv_response_body.c); the VALUE (VALUE) ones run under rb_protect. */
VALUE rv_resp_send_array(VALUE r);
VALUE rv_resp_send_each(VALUE r);
VALUE rv_resp_stream_body(VALUE r);
int rv_resp_try_file(resp *r);
int rv_resp_try_array(resp *r, int *state);
void rv_resp_close_body(resp *r);

#endif
