/*
 * rv_ruby.c: the Ruby names the C side uses, and the few primitives the Ruby
 * half of Ruvoy (lib/ruvoy) calls: reading a request body chunk, writing to
 * a streaming response. They take a request's stream id; an id whose request
 * has ended reads as end-of-body and refuses writes.
 */
#include "rv_internal.h"

VALUE rv_mRuvoy, rv_eClientDisconnected, rv_eBodyTooLarge, rv_eBadRequest, rv_eRequestTimeout, rv_eShutdown, rv_cInput, rv_empty_input, rv_cFiber,
    rv_eFiberError;
ID rv_id_call, rv_id_each, rv_id_close, rv_id_to_path, rv_id_raise, rv_id_new, rv_id_to_ary,
    rv_id_load_app, rv_id_error_fields, rv_id_after_reply;

static rv_stream *stream_of(VALUE id)
{
    return rv_stream_find(NUM2ULL(id));
}

static VALUE read_chunk(VALUE self, VALUE id)
{
    (void)self;
    rv_stream *s = stream_of(id);
    return s ? rv_input_read_chunk(s) : Qnil;
}

static VALUE write_chunk(VALUE self, VALUE id, VALUE str)
{
    (void)self;
    rv_stream *s = stream_of(id);
    if (!s || s->ended)
        rb_raise(rb_eIOError, "the response is already complete");
    StringValue(str);
    rv_stream_write(s, str, 1);
    return Qnil;
}


static VALUE signal_fixup(VALUE self, VALUE sig)
{
    (void)self;
    rv_signal_fixup(NUM2INT(sig));
    return Qnil;
}

/* The offload threads' figures for the metrics; called on any Ruby thread. */
static VALUE offload_busy(VALUE self, VALUE delta)
{
    (void)self;
    atomic_fetch_add_explicit(&rv_stat.offload_busy, (uint64_t)NUM2LL(delta), memory_order_relaxed);
    return Qnil;
}

static VALUE offload_waiting(VALUE self, VALUE delta)
{
    (void)self;
    atomic_fetch_add_explicit(&rv_stat.offload_waiting, (uint64_t)NUM2LL(delta), memory_order_relaxed);
    return Qnil;
}

static VALUE live_requests(VALUE self)
{
    (void)self;
    return UINT2NUM(rv_L->live);
}

void rv_ruby_init(void)
{
    rv_id_call = rb_intern("call");
    rv_id_each = rb_intern("each");
    rv_id_close = rb_intern("close");
    rv_id_to_path = rb_intern("to_path");
    rv_id_raise = rb_intern("raise");
    rv_id_new = rb_intern("new");
    rv_id_to_ary = rb_intern("to_ary");
    rv_id_load_app = rb_intern("load_app");
    rv_id_error_fields = rb_intern("error_fields");
    rv_id_after_reply = rb_intern("after_reply");

    rv_cFiber = rb_const_get(rb_cObject, rb_intern("Fiber"));
    rv_eFiberError = rb_const_get(rb_cObject, rb_intern("FiberError"));
    rv_mRuvoy = rb_define_module("Ruvoy");
    rb_define_const(rv_mRuvoy, "REWIND_IN_MEMORY", INT2FIX(RV_REWIND_IN_MEMORY));
    rv_eClientDisconnected = rb_define_class_under(rv_mRuvoy, "ClientDisconnected", rb_eIOError);
    rv_eBodyTooLarge = rb_define_class_under(rv_mRuvoy, "BodyTooLarge", rb_eIOError);
    rv_eBadRequest = rb_define_class_under(rv_mRuvoy, "BadRequest", rb_eIOError);
    /* Raised in a request's fiber from outside it (rv_interrupt.c). Not
     * StandardErrors, so that an app's `rescue => e` does not swallow them. */
    rv_eRequestTimeout = rb_define_class_under(rv_mRuvoy, "RequestTimeout", rb_eException);
    rv_eShutdown = rb_define_class_under(rv_mRuvoy, "Shutdown", rb_eException);
    rb_define_module_function(rv_mRuvoy, "_read_chunk", read_chunk, 1);
    rb_define_module_function(rv_mRuvoy, "_write", write_chunk, 2);
    rb_define_module_function(rv_mRuvoy, "live_requests", live_requests, 0);
    rb_define_module_function(rv_mRuvoy, "_signal_fixup", signal_fixup, 1);
    rb_define_module_function(rv_mRuvoy, "_offload_busy", offload_busy, 1);
    rb_define_module_function(rv_mRuvoy, "_offload_waiting", offload_waiting, 1);
}

/* Constants the Ruby library defines; read once it is loaded. */
void rv_ruby_bind(void)
{
    rv_cInput = rb_const_get(rv_mRuvoy, rb_intern("Input"));
    rv_empty_input = rb_const_get(rv_mRuvoy, rb_intern("EMPTY_INPUT"));
    rb_gc_register_mark_object(rv_cInput);
    rb_gc_register_mark_object(rv_empty_input);
}
