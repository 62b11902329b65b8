/*
 * rv_buf.c: building an outgoing message whose size is not known up front.
 * The message itself is the buffer; finishing hands it over as is.
 */
#include "rv_internal.h"

#include <stdlib.h>
#include <string.h>

void rv_buf_start(rv_buf *b, uint32_t kind, uint64_t stream, size_t hint)
{
    b->cap = hint < 256 ? 256 : hint;
    b->m = rv_msg_new(kind, stream, 0, 0, b->cap);
    b->m->len = 0;
}

static void reserve(rv_buf *b, size_t n)
{
    if (b->m->len + n <= b->cap)
        return;
    while (b->m->len + n > b->cap)
        b->cap *= 2;
    b->m = realloc(b->m, sizeof *b->m + b->cap);
    if (!b->m)
        abort();
}

void rv_buf_put(rv_buf *b, const void *p, size_t n)
{
    reserve(b, n);
    memcpy(b->m->data + b->m->len, p, n);
    b->m->len += n;
}

void rv_buf_put_u16(rv_buf *b, uint16_t v)
{
    rv_buf_put(b, &v, sizeof v);
}

void rv_buf_put_u32(rv_buf *b, uint32_t v)
{
    rv_buf_put(b, &v, sizeof v);
}

void rv_buf_put_str(rv_buf *b, const char *p, size_t n)
{
    rv_buf_put_u32(b, (uint32_t)n);
    rv_buf_put(b, p, n);
}

rv_msg *rv_buf_finish(rv_buf *b)
{
    rv_msg *m = b->m;
    b->m = NULL;
    return m;
}
