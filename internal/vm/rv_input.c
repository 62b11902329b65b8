/*
 * rv_input.c: request body bytes, as rack.input and streaming bodies read
 * them. Each chunk Go sent is handed to Ruby whole; taking it returns its
 * bytes to the request's window, so Go reads more from the client.
 */
#include "rv_internal.h"

#define L rv_L

/* The next chunk of the body, or nil at its end. Waits in the scheduler
 * while Go has nothing yet. */
VALUE rv_input_read_chunk(rv_stream *s)
{
    for (;;) {
        rv_msg *m = s->in_first;
        if (m) {
            s->in_first = m->next;
            if (!s->in_first)
                s->in_last = NULL;
            VALUE chunk = rb_str_new(m->data, (long)m->len);
            /* Once the body's end has come, Go reads no more: no credit. */
            if (s->in_state == RV_BODY_OPEN)
                rv_to_go_push(rv_msg_new(RV_OUT_CREDIT, s->id, 0, m->len, 0));
            rv_msg_free(m);
            return chunk;
        }
        switch (s->in_state) {
        case RV_BODY_EOF:
            return Qnil;
        case RV_BODY_TOO_LARGE:
            rb_raise(rv_eBodyTooLarge, "the request body is larger than the server allows");
        case RV_BODY_MALFORMED:
            rb_raise(rv_eBadRequest, "the request body is malformed (its framing is invalid or it ended early)");
        case RV_BODY_FAILED:
            rb_raise(rv_eClientDisconnected, "the client stopped sending the request body");
        }
        rv_stream_wait(s, &s->input_waiter, RV_WAIT_INPUT);
    }
}
