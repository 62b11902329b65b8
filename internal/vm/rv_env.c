/*
 * rv_env.c: the Rack env, built from the request head Go encoded.
 *
 * The payload of RV_IN_REQUEST is a request head (wire.h), read with
 * rv_wire.c.
 *
 * Keys are frozen, deduplicated strings made once; values that rarely vary
 * (method, protocol, scheme) are shared frozen strings; path, query and
 * header values are new strings for every request.
 */
#include "rv_internal.h"

#include <string.h>

#define L rv_L

static VALUE header_keys[RV_HEADER_COUNT];
static VALUE k_method, k_script_name, k_path_info, k_query, k_uri, k_server_name,
    k_server_port, k_protocol, k_remote_addr, k_content_length, k_content_type,
    k_version, k_url_scheme, k_input, k_errors, k_multithread, k_multiprocess,
    k_run_once, k_hijackp, k_after_reply, k_response_finished, k_software, k_context, k_upstream,
    k_http_version, k_early_hints, k_remote_user, k_hijack;
static VALUE cContext, cUpstream, v_early_hints, v_hijack;
static VALUE v_empty, v_http, v_https, v_software, v_version, v_asterisk = Qundef;
static VALUE methods[8], protocols[4];

static VALUE key(const char *s)
{
    VALUE v = rb_interned_str(s, (long)strlen(s));
    rb_gc_register_mark_object(v);
    return v;
}

static VALUE cgi_key(const char *name)
{
    char buf[128] = "HTTP_";
    size_t n = 5;
    for (const char *p = name; *p && n < sizeof buf - 1; p++)
        buf[n++] = *p == '-' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    buf[n] = 0;
    return key(buf);
}

void rv_env_init(void)
{
    for (int i = 1; i < RV_HEADER_COUNT; i++)
        header_keys[i] = cgi_key(rv_header_name(i));
    k_method = key("REQUEST_METHOD");
    k_script_name = key("SCRIPT_NAME");
    k_path_info = key("PATH_INFO");
    k_query = key("QUERY_STRING");
    k_uri = key("REQUEST_URI");
    k_server_name = key("SERVER_NAME");
    k_server_port = key("SERVER_PORT");
    k_protocol = key("SERVER_PROTOCOL");
    k_http_version = key("HTTP_VERSION");
    k_remote_addr = key("REMOTE_ADDR");
    k_content_length = key("CONTENT_LENGTH");
    k_content_type = key("CONTENT_TYPE");
    k_software = key("SERVER_SOFTWARE");
    k_version = key("rack.version");
    k_url_scheme = key("rack.url_scheme");
    k_input = key("rack.input");
    k_errors = key("rack.errors");
    k_multithread = key("rack.multithread");
    k_multiprocess = key("rack.multiprocess");
    k_run_once = key("rack.run_once");
    k_hijackp = key("rack.hijack?");
    k_hijack = key("rack.hijack");
    k_after_reply = key("rack.after_reply");
    k_response_finished = key("rack.response_finished");
    k_context = key("ruvoy.context");
    k_upstream = key("ruvoy.upstream");
    k_early_hints = key("rack.early_hints");
    k_remote_user = key("REMOTE_USER");
    v_early_hints = rb_const_get(rv_mRuvoy, rb_intern("EARLY_HINTS"));
    rb_gc_register_mark_object(v_early_hints);
    v_hijack = rb_const_get(rv_mRuvoy, rb_intern("HIJACK"));
    rb_gc_register_mark_object(v_hijack);
    cContext = rb_const_get(rv_mRuvoy, rb_intern("Context"));
    cUpstream = rb_const_get(rv_mRuvoy, rb_intern("Upstream"));
    rb_gc_register_mark_object(cContext);
    rb_gc_register_mark_object(cUpstream);
    v_empty = key("");
    v_http = key("http");
    v_https = key("https");
    const char *m[] = {"GET", "POST", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT"};
    for (int i = 0; i < 8; i++)
        methods[i] = key(m[i]);
    const char *p[] = {"HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/3.0"};
    for (int i = 0; i < 4; i++)
        protocols[i] = key(p[i]);
}

/* Values fixed for the life of the process, known once Rack is loaded. */
static void load_constants(void)
{
    VALUE c = rb_funcall(rv_mRuvoy, rb_intern("env_constants"), 0);
    v_version = rb_hash_aref(c, ID2SYM(rb_intern("version")));
    v_software = rb_hash_aref(c, ID2SYM(rb_intern("software")));
    v_asterisk = rb_hash_aref(c, ID2SYM(rb_intern("asterisk_path_info")));
    rb_gc_register_mark_object(c);
}

static VALUE shared(const VALUE *table, int n, const char *p, long len)
{
    for (int i = 0; i < n; i++)
        if (RSTRING_LEN(table[i]) == len && memcmp(RSTRING_PTR(table[i]), p, (size_t)len) == 0)
            return table[i];
    return rb_str_new(p, len);
}

#define PUT(k, v) (kv[n++] = (k), kv[n++] = (v))
#define BATCH 64 /* pairs inserted per rb_hash_bulk_insert call */

VALUE rv_env_build(rv_stream *s)
{
    if (v_asterisk == Qundef)
        load_constants();
    rv_msg *m = s->request;
    rv_req_head h;
    if (!rv_req_head_read(m->data, m->len, &h))
        rb_raise(rb_eArgError, "ruvoy: truncated request head");
    uint8_t flags = h.flags;
    if (h.window)
        s->window = h.window;
    s->arrived = h.arrived;
    const char *const *fp = h.field;
    const long *fl = h.field_len;

    VALUE env = rb_hash_new();
    VALUE kv[2 * BATCH + 2 * 32]; /* the pairs before the headers: 27 at most */
    long n = 0;
    PUT(k_method, shared(methods, 8, fp[RV_FIELD_METHOD], fl[RV_FIELD_METHOD]));
    PUT(k_script_name, fl[RV_FIELD_SCRIPT_NAME] > 0 ? rb_str_new(fp[RV_FIELD_SCRIPT_NAME], fl[RV_FIELD_SCRIPT_NAME]) : v_empty);
    if (flags & RV_REQ_ASTERISK)
        PUT(k_path_info, rb_str_dup(v_asterisk));
    else
        PUT(k_path_info, rb_str_new(fp[RV_FIELD_PATH], fl[RV_FIELD_PATH]));
    PUT(k_query, rb_str_new(fp[RV_FIELD_QUERY], fl[RV_FIELD_QUERY]));
    PUT(k_uri, rb_str_new(fp[RV_FIELD_URI], fl[RV_FIELD_URI]));
    PUT(k_server_name, rb_interned_str(fp[RV_FIELD_SERVER_NAME], fl[RV_FIELD_SERVER_NAME]));
    PUT(k_server_port, rb_interned_str(fp[RV_FIELD_SERVER_PORT], fl[RV_FIELD_SERVER_PORT]));
    VALUE protocol = shared(protocols, 4, fp[RV_FIELD_PROTOCOL], fl[RV_FIELD_PROTOCOL]);
    PUT(k_protocol, protocol);
    /* The CGI-era copy of SERVER_PROTOCOL that Puma, Thin and WEBrick set,
     * and apps read (Sinatra picks 303 or 302 by it). */
    PUT(k_http_version, protocol);
    PUT(k_remote_addr, rb_interned_str(fp[RV_FIELD_REMOTE_ADDR], fl[RV_FIELD_REMOTE_ADDR]));
    if (fp[RV_FIELD_REMOTE_USER])
        PUT(k_remote_user, rb_str_new(fp[RV_FIELD_REMOTE_USER], fl[RV_FIELD_REMOTE_USER]));
    if (fp[RV_FIELD_CONTENT_LENGTH])
        PUT(k_content_length, rb_str_new(fp[RV_FIELD_CONTENT_LENGTH], fl[RV_FIELD_CONTENT_LENGTH]));
    if (fp[RV_FIELD_CONTENT_TYPE])
        PUT(k_content_type, rb_str_new(fp[RV_FIELD_CONTENT_TYPE], fl[RV_FIELD_CONTENT_TYPE]));
    PUT(k_software, v_software);
    PUT(k_version, v_version);
    PUT(k_url_scheme, flags & RV_REQ_TLS ? v_https : v_http);
    if (flags & RV_REQ_BODY)
        s->input = rb_class_new_instance(1, (VALUE[]){ULL2NUM(s->id)}, rv_cInput);
    PUT(k_input, flags & RV_REQ_BODY ? s->input : rv_empty_input);
    PUT(k_errors, rb_stderr);
    PUT(k_multithread, Qtrue);
    PUT(k_multiprocess, Qfalse);
    PUT(k_run_once, Qfalse);
    if (flags & RV_REQ_HIJACK) {
        PUT(k_hijackp, Qtrue);
        PUT(k_hijack, v_hijack);
    } else {
        PUT(k_hijackp, Qfalse);
    }
    PUT(k_after_reply, rb_ary_new());
    PUT(k_response_finished, rb_ary_new());
    if (flags & RV_REQ_EARLY_HINTS) /* absent, as under Puma, where none would go */
        PUT(k_early_hints, v_early_hints);
    if (fp[RV_FIELD_CONTEXT])
        PUT(k_context, rb_class_new_instance(1, (VALUE[]){rb_str_new(fp[RV_FIELD_CONTEXT], fl[RV_FIELD_CONTEXT])}, cContext));
    VALUE upstreams = rb_ary_entry(L->app_upstreams, (long)s->request->aux - 1);
    if (!NIL_P(upstreams))
        PUT(k_upstream, rb_class_new_instance(2, (VALUE[]){ULL2NUM(s->id), upstreams}, cUpstream));

    rv_reader r = h.headers;
    for (uint16_t i = 0; i < h.nheaders; i++) {
        rv_req_header hd;
        if (!rv_req_header_read(&r, &hd))
            rb_raise(rb_eArgError, "ruvoy: truncated request head");
        VALUE k = hd.code ? header_keys[hd.code] : rb_interned_str(hd.name, hd.name_len);
        PUT(k, rb_str_new(hd.value, hd.value_len));
        if (n >= 2 * BATCH) {
            rb_hash_bulk_insert(n, kv, env);
            n = 0;
        }
    }
    rb_hash_bulk_insert(n, kv, env);
    RB_GC_GUARD(env);
    return env;
}
