/*
 * rv_env.c: the Rack env, built from the request head Go encoded.
 *
 * Payload of RV_IN_REQUEST (all integers little-endian, as the host):
 *   u8 flags (RV_REQ_*), u8[3] zero, u32 response window (0: the default),
 *   RV_F_COUNT fields, each u32 length + bytes (length 0xffffffff: absent),
 *   u16 header count, then per header: u16 code (index in rv_header_names,
 *   0 for others, then u16 length + the CGI name), u32 length + value.
 *
 * Keys are frozen, deduplicated strings made once; values that rarely vary
 * (method, protocol, scheme) are shared frozen strings; path, query and
 * header values are new strings for every request.
 */
#include "rv_internal.h"

#include <string.h>

#define L rv_L

/* Request headers common enough to get a ready-made env key. Go reads this
 * table (cgo) to pick the codes, so the two sides cannot disagree. */
const char *const rv_header_names[] = {
    "",
    "Accept",
    "Accept-Charset",
    "Accept-Encoding",
    "Accept-Language",
    "Authorization",
    "Cache-Control",
    "Connection",
    "Cookie",
    "Dnt",
    "Host",
    "If-Modified-Since",
    "If-None-Match",
    "Keep-Alive",
    "Origin",
    "Pragma",
    "Range",
    "Referer",
    "Sec-Ch-Ua",
    "Sec-Ch-Ua-Mobile",
    "Sec-Ch-Ua-Platform",
    "Sec-Fetch-Dest",
    "Sec-Fetch-Mode",
    "Sec-Fetch-Site",
    "Sec-Fetch-User",
    "Te",
    "Upgrade",
    "Upgrade-Insecure-Requests",
    "User-Agent",
    "Via",
    "X-Csrf-Token",
    "X-Forwarded-For",
    "X-Forwarded-Host",
    "X-Forwarded-Proto",
    "X-Request-Id",
    "X-Requested-With",
    NULL,
};

#define NHEADERS (sizeof rv_header_names / sizeof rv_header_names[0] - 1)

const char *rv_header_name(int i)
{
    return i > 0 && i < (int)NHEADERS ? rv_header_names[i] : NULL;
}

enum {
    F_METHOD, F_PATH, F_QUERY, F_URI, F_SERVER_NAME, F_SERVER_PORT,
    F_PROTOCOL, F_REMOTE_ADDR, F_CONTENT_LENGTH, F_CONTENT_TYPE,
    F_CONTEXT, /* JSON for env["ruvoy.context"]; absent unless the app asked */
    F_COUNT
};

static VALUE header_keys[NHEADERS];
static VALUE k_method, k_script_name, k_path_info, k_query, k_uri, k_server_name,
    k_server_port, k_protocol, k_remote_addr, k_content_length, k_content_type,
    k_version, k_url_scheme, k_input, k_errors, k_multithread, k_multiprocess,
    k_run_once, k_hijackp, k_after_reply, k_response_finished, k_software, k_context, k_upstream,
    k_http_version;
static VALUE cContext, cUpstream;
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
    for (size_t i = 1; i < NHEADERS; i++)
        header_keys[i] = cgi_key(rv_header_names[i]);
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
    k_after_reply = key("rack.after_reply");
    k_response_finished = key("rack.response_finished");
    k_context = key("ruvoy.context");
    k_upstream = key("ruvoy.upstream");
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

typedef struct reader {
    const char *p, *end;
} reader;

static int read_u16(reader *r, uint16_t *v)
{
    if (r->end - r->p < 2)
        return 0;
    memcpy(v, r->p, 2);
    r->p += 2;
    return 1;
}

static int read_u32(reader *r, uint32_t *v)
{
    if (r->end - r->p < 4)
        return 0;
    memcpy(v, r->p, 4);
    r->p += 4;
    return 1;
}

static int read_bytes(reader *r, size_t n, const char **out)
{
    if ((size_t)(r->end - r->p) < n)
        return 0;
    *out = r->p;
    r->p += n;
    return 1;
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
    reader r = {m->data, m->data + m->len};
    const char *ignored;
    uint8_t flags = (uint8_t)m->data[0];
    uint32_t window;
    if (!read_bytes(&r, 4, &ignored) || !read_u32(&r, &window))
        rb_raise(rb_eArgError, "ruvoy: truncated request head");
    if (window)
        s->window = window;

    const char *fp[F_COUNT];
    long fl[F_COUNT];
    for (int i = 0; i < F_COUNT; i++) {
        uint32_t len;
        if (!read_u32(&r, &len))
            rb_raise(rb_eArgError, "ruvoy: truncated request head");
        if (len == 0xffffffffu) {
            fp[i] = NULL;
            fl[i] = -1;
        } else if (!read_bytes(&r, len, &fp[i])) {
            rb_raise(rb_eArgError, "ruvoy: truncated request head");
        } else {
            fl[i] = (long)len;
        }
    }

    VALUE env = rb_hash_new();
    VALUE kv[2 * BATCH + 2 * 26];
    long n = 0;
    PUT(k_method, shared(methods, 8, fp[F_METHOD], fl[F_METHOD]));
    PUT(k_script_name, v_empty);
    if (flags & RV_REQ_ASTERISK)
        PUT(k_path_info, rb_str_dup(v_asterisk));
    else
        PUT(k_path_info, rb_str_new(fp[F_PATH], fl[F_PATH]));
    PUT(k_query, rb_str_new(fp[F_QUERY], fl[F_QUERY]));
    PUT(k_uri, rb_str_new(fp[F_URI], fl[F_URI]));
    PUT(k_server_name, rb_interned_str(fp[F_SERVER_NAME], fl[F_SERVER_NAME]));
    PUT(k_server_port, rb_interned_str(fp[F_SERVER_PORT], fl[F_SERVER_PORT]));
    VALUE protocol = shared(protocols, 4, fp[F_PROTOCOL], fl[F_PROTOCOL]);
    PUT(k_protocol, protocol);
    /* The CGI-era copy of SERVER_PROTOCOL that Puma, Thin and WEBrick set,
     * and apps read (Sinatra picks 303 or 302 by it). */
    PUT(k_http_version, protocol);
    PUT(k_remote_addr, rb_interned_str(fp[F_REMOTE_ADDR], fl[F_REMOTE_ADDR]));
    if (fp[F_CONTENT_LENGTH])
        PUT(k_content_length, rb_str_new(fp[F_CONTENT_LENGTH], fl[F_CONTENT_LENGTH]));
    if (fp[F_CONTENT_TYPE])
        PUT(k_content_type, rb_str_new(fp[F_CONTENT_TYPE], fl[F_CONTENT_TYPE]));
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
    PUT(k_hijackp, Qfalse);
    PUT(k_after_reply, rb_ary_new());
    PUT(k_response_finished, rb_ary_new());
    if (fp[F_CONTEXT])
        PUT(k_context, rb_class_new_instance(1, (VALUE[]){rb_str_new(fp[F_CONTEXT], fl[F_CONTEXT])}, cContext));
    VALUE clusters = rb_ary_entry(L->app_clusters, (long)s->request->aux - 1);
    if (!NIL_P(clusters))
        PUT(k_upstream, rb_class_new_instance(2, (VALUE[]){ULL2NUM(s->id), clusters}, cUpstream));

    uint16_t nheaders;
    if (!read_u16(&r, &nheaders))
        rb_raise(rb_eArgError, "ruvoy: truncated request head");
    for (uint16_t i = 0; i < nheaders; i++) {
        uint16_t code, namelen;
        uint32_t vlen;
        const char *name, *value;
        VALUE k;
        if (!read_u16(&r, &code))
            rb_raise(rb_eArgError, "ruvoy: truncated request head");
        if (code > 0 && code < NHEADERS) {
            k = header_keys[code];
        } else {
            if (!read_u16(&r, &namelen) || !read_bytes(&r, namelen, &name))
                rb_raise(rb_eArgError, "ruvoy: truncated request head");
            k = rb_interned_str(name, namelen);
        }
        if (!read_u32(&r, &vlen) || !read_bytes(&r, vlen, &value))
            rb_raise(rb_eArgError, "ruvoy: truncated request head");
        PUT(k, rb_str_new(value, vlen));
        if (n >= 2 * BATCH) {
            rb_hash_bulk_insert(n, kv, env);
            n = 0;
        }
    }
    rb_hash_bulk_insert(n, kv, env);
    RB_GC_GUARD(env);
    return env;
}
