/*
 * rv_wire.c: building response heads and reading the payloads wire.h lays
 * out.
 */
#include "rv_wire.h"

#include <string.h>

void rv_resp_head_start(rv_buf *b, uint32_t kind, uint64_t stream, uint64_t status, size_t hint)
{
    rv_buf_start(b, kind, stream, hint);
    int64_t length = -1;
    int32_t fd = -1;
    uint16_t count = 0;
    rv_buf_put(b, &length, sizeof length);
    rv_buf_put(b, &fd, sizeof fd);
    rv_buf_put(b, &count, sizeof count);
    b->m->aux = status;
}

void rv_resp_head_put(rv_buf *b, const char *name, uint16_t nlen, const char *value, size_t vlen)
{
    rv_buf_put_u16(b, nlen);
    rv_buf_put(b, name, nlen);
    rv_buf_put_str(b, value, vlen);
    uint16_t count;
    memcpy(&count, b->m->data + RV_RESP_COUNT_AT, sizeof count);
    count++;
    memcpy(b->m->data + RV_RESP_COUNT_AT, &count, sizeof count);
}

void rv_resp_head_set_length(rv_msg *m, int64_t length)
{
    memcpy(m->data + RV_RESP_LENGTH_AT, &length, sizeof length);
}

void rv_resp_head_set_fd(rv_msg *m, int32_t fd)
{
    memcpy(m->data + RV_RESP_FD_AT, &fd, sizeof fd);
}

/* ---- reading ---- */

static const char *const header_names[] = {RV_HEADER_NAMES};

const char *rv_header_name(int code)
{
    return code > 0 && code < RV_HEADER_COUNT ? header_names[code] : NULL;
}

int rv_read_u16(rv_reader *r, uint16_t *v)
{
    if (r->end - r->p < 2)
        return 0;
    memcpy(v, r->p, 2);
    r->p += 2;
    return 1;
}

int rv_read_u32(rv_reader *r, uint32_t *v)
{
    if (r->end - r->p < 4)
        return 0;
    memcpy(v, r->p, 4);
    r->p += 4;
    return 1;
}

int rv_read_bytes(rv_reader *r, size_t n, const char **out)
{
    if ((size_t)(r->end - r->p) < n)
        return 0;
    *out = r->p;
    r->p += n;
    return 1;
}

int rv_read_str(rv_reader *r, const char **p, long *len)
{
    uint32_t n;
    if (!rv_read_u32(r, &n))
        return 0;
    if (n == RV_ABSENT) {
        *p = NULL;
        *len = -1;
        return 1;
    }
    *len = (long)n;
    return rv_read_bytes(r, n, p);
}

int rv_req_head_read(const char *p, size_t n, rv_req_head *h)
{
    rv_reader r = {p, p + n};
    const char *fixed;
    if (!rv_read_bytes(&r, RV_REQ_FIELDS_AT, &fixed))
        return 0;
    h->flags = (uint8_t)fixed[RV_REQ_FLAGS_AT];
    memcpy(&h->window, fixed + RV_REQ_WINDOW_AT, sizeof h->window);
    memcpy(&h->arrived, fixed + RV_REQ_ARRIVED_AT, sizeof h->arrived);
    for (int i = 0; i < RV_FIELD_COUNT; i++)
        if (!rv_read_str(&r, &h->field[i], &h->field_len[i]))
            return 0;
    if (!rv_read_u16(&r, &h->nheaders))
        return 0;
    h->headers = r;
    return 1;
}

int rv_req_header_read(rv_reader *r, rv_req_header *out)
{
    if (!rv_read_u16(r, &out->code))
        return 0;
    out->name = NULL;
    out->name_len = 0;
    if (out->code == 0 || out->code >= RV_HEADER_COUNT) {
        out->code = 0;
        if (!rv_read_u16(r, &out->name_len) || !rv_read_bytes(r, out->name_len, &out->name))
            return 0;
    }
    return rv_read_str(r, &out->value, &out->value_len) && out->value_len >= 0;
}

int rv_template_settings_read(const char *p, size_t n, rv_template_settings *s)
{
    rv_reader r = {p, p + n};
    const char *w;
    if (!rv_read_str(&r, &s->program, &s->program_len) || s->program_len < 0 ||
        !rv_read_str(&r, &s->argv, &s->argv_len) || s->argv_len < 0 ||
        !rv_read_str(&r, &s->rubylib, &s->rubylib_len) || s->rubylib_len < 0 ||
        !rv_read_str(&r, &s->load, &s->load_len) || s->load_len < 0 ||
        !rv_read_u32(&r, &s->argc) || !rv_read_u32(&r, &s->max_streams) || !rv_read_bytes(&r, 8, &w))
        return 0;
    memcpy(&s->window, w, 8);
    return r.p == r.end;
}
