/*
 * rv_response.c: turning an app's [status, headers, body] into messages,
 * and how a request that raised ends.
 *
 * RV_OUT_HEAD and RV_OUT_FILE carry a response head (wire.h,
 * rv_response_head.c); RV_OUT_DATA carries body bytes only
 * (rv_response_body.c). The head is held until the first body bytes (or
 * until the fiber first waits), so a body that fails before producing
 * anything can still become a 500.
 */
#include "rv_response.h"

VALUE rv_eMalformed;

/* How a request whose app or body raised exc ends (what: which, for the
 * log). Nobody listens any more (its client left, or it was cancelled):
 * the response is cut, and nothing is logged. The stop or a request
 * timeout interrupted it: a log line with where it was, and 503. The
 * client's fault (a malformed or too large request body, which a
 * streaming body or the app read): 400 or 413. Anything else: a log line
 * with the backtrace, and 500. Once the head is out, the response is cut
 * instead. */
void rv_request_failed(rv_stream *s, VALUE exc, const char *what)
{
    int status;
    if (s->cancelled || rb_obj_is_kind_of(exc, rv_eClientDisconnected)) {
        s->reset = 1;
        return;
    } else if (rb_obj_is_kind_of(exc, rv_eShutdown)) {
        rv_log_exception(s, "the stop cut a request short", exc);
        status = 503;
    } else if (rb_obj_is_kind_of(exc, rv_eRequestTimeout)) {
        rv_log_exception(s, "a request ran past its timeout", exc);
        status = 503;
    } else if (rb_obj_is_kind_of(exc, rv_eBadRequest)) {
        status = 400;
    } else if (rb_obj_is_kind_of(exc, rv_eBodyTooLarge)) {
        status = 413;
    } else {
        rv_log_exception(s, what, exc);
        status = 500;
    }
    if (s->head_sent)
        s->reset = 1;
    else
        rv_respond_error(s, status);
}

struct hijack_args {
    rv_stream *s;
    VALUE callable;
};

static VALUE respond_hijack(VALUE arg)
{
    struct hijack_args *a = (struct hijack_args *)arg;
    rv_hijack_respond(a->s, a->callable);
    return Qnil;
}

/* A body that failed: the exception decides, as for the app (a malformed
 * body is the app's fault too). */
static void body_failed(resp *r, VALUE exc)
{
    rv_request_failed(r->s, exc,
                      rb_obj_is_kind_of(exc, rv_eMalformed) ? "the app returned a malformed response"
                                                            : "the response body raised");
}

/* A response that hands the connection to the app once its head is out:
 * a rack.hijack header's callable (partial hijack), or a 101 whose body
 * responds to call (a Rack 3 upgrade). Where the connection cannot be
 * handed over (HTTP/2 and 3), the header is ignored, as rack.hijack? said,
 * and a 101 is a malformed response. Reports whether the response was
 * taken care of. */
static int upgrade(resp *r)
{
    rv_stream *s = r->s;
    int can = (s->request->data[RV_REQ_FLAGS_AT] & RV_REQ_HIJACK) != 0;
    VALUE callable = Qnil;
    if (can && !NIL_P(r->hijack))
        callable = r->hijack;
    else if (can && r->status == 101 && !rb_respond_to(r->body, rv_id_each) && rb_respond_to(r->body, rv_id_call))
        callable = r->body;
    if (NIL_P(callable) && r->status != 101)
        return 0;
    if (NIL_P(callable)) {
        rv_resp_log_malformed(&(resp){.s = s, .malformed_name = Qnil,
                              .malformed = can ? "a 101 answer's body must respond to call (and not to each): it gets the connection"
                                               : "a 101 answer needs an HTTP/1.1 connection to switch (this request came over HTTP/2 or 3, or with a body)"});
        rv_resp_close_body(r);
        rv_respond_error(s, 500);
        return 1;
    }
    if (callable != r->body)
        rv_resp_close_body(r);
    int state = 0;
    struct hijack_args a = {s, callable};
    rb_protect(respond_hijack, (VALUE)&a, &state);
    if (state) {
        VALUE exc = rb_errinfo();
        rb_set_errinfo(Qnil);
        body_failed(r, exc);
    }
    return 1;
}

static VALUE check_triple(VALUE res)
{
    VALUE ary = rb_check_array_type(res);
    if (NIL_P(ary) || RARRAY_LEN(ary) != 3)
        return Qnil;
    return ary;
}

void rv_respond(rv_stream *s, VALUE env, VALUE res)
{
    resp r = {.s = s, .env = env, .declared = -1, .body = Qnil, .array = Qnil, .malformed_name = Qnil, .hijack = Qnil};
    int state = 0;
    VALUE ary = rb_protect(check_triple, res, &state);
    if (state || NIL_P(ary)) {
        rb_set_errinfo(Qnil);
        rv_log_exception(s, "the app returned a malformed response",
                         rb_exc_new_cstr(rv_eMalformed, "the app did not return [status, headers, body]"));
        rv_respond_error(s, 500);
        return;
    }
    r.status_v = rb_ary_entry(ary, 0);
    r.headers = rb_ary_entry(ary, 1);
    r.body = rb_ary_entry(ary, 2);

    rb_protect(rv_resp_build_head, (VALUE)&r, &state);
    if (state || r.malformed) {
        if (state) {
            VALUE exc = rb_errinfo();
            rb_set_errinfo(Qnil);
            rv_log_exception(s, "the app returned a malformed response", exc);
        } else {
            rv_resp_log_malformed(&r);
        }
        rv_resp_close_body(&r);
        rv_respond_error(s, 500);
        return;
    }

    if (upgrade(&r))
        return;
    r.no_body = (s->request->data[0] & RV_REQ_HEAD) || r.status == 204 || r.status == 304;

    VALUE (*send)(VALUE) = NULL;
    if (RB_TYPE_P(r.body, T_ARRAY)) {
        r.array = r.body;
        send = rv_resp_send_array;
    } else if (rv_resp_try_array(&r, &state))
        send = rv_resp_send_array; /* also for HEAD: its length goes in the head */
    else if (state) {
        VALUE exc = rb_errinfo();
        rb_set_errinfo(Qnil);
        body_failed(&r, exc);
        rv_resp_close_body(&r);
        return;
    } else if (r.no_body)
        send = NULL;
    else if (rv_resp_try_file(&r))
        send = NULL;
    else if (rb_respond_to(r.body, rv_id_each))
        send = rv_resp_send_each;
    else if (rb_respond_to(r.body, rv_id_call))
        send = rv_resp_stream_body;
    else {
        rv_resp_log_malformed(&(resp){.s = s, .malformed = "the body responds to neither each nor call", .malformed_name = Qnil});
        rv_resp_close_body(&r);
        rv_respond_error(s, 500);
        return;
    }

    if (send) {
        rb_protect(send, (VALUE)&r, &state);
        if (state) {
            VALUE exc = rb_errinfo();
            rb_set_errinfo(Qnil);
            body_failed(&r, exc);
        } else if (r.declared >= 0 && r.sent < r.declared && !r.no_body) {
            body_failed(&r, rb_exc_new_cstr(rv_eMalformed, "the body is shorter than its Content-Length"));
        } else if (r.declared < 0 && !r.no_body && !s->head_sent && send != rv_resp_stream_body) {
            rv_stream_head_length(s, r.sent); /* the whole body is here: no chunked encoding */
        }
    }
    rv_resp_close_body(&r);
}

void rv_response_init(void)
{
    rv_eMalformed = rb_define_class_under(rv_mRuvoy, "MalformedResponse", rb_eStandardError);
}
