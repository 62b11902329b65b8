/*
 * rv_malloc.c: how malloc keeps the memory messages pass through.
 */
#include "rv_internal.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>

/* Message buffers are malloc'd on one thread and freed on another, a
 * window's worth per response. glibc gives the free top of an arena back to
 * the kernel past 128 KiB (brk, or madvise in a thread's arena), and the
 * next response faults the same pages in again: measured, 1 MiB responses
 * spent a quarter of the VM thread's time in page faults. Keep up to 8 MiB
 * free per arena instead (32 MiB kept the peak of a body overload up; 4 MiB
 * cost 1 MiB responses 14%: docs/overload.md). Fixing the trim threshold
 * also fixes the mmap threshold (glibc otherwise raises it as it goes):
 * allocations under 4 MiB come from the arenas, as they would after a
 * warm-up.
 *
 * Request bodies are malloc'd on whichever Go thread copies them, and glibc
 * gives each thread that allocates an arena of its own, up to 8 per core:
 * under a body overload a dozen arenas held ~110 MiB between them, and kept
 * it. Two arenas do at the same throughput; MALLOC_ARENA_MAX, when set, is
 * left to decide. What stays free after a burst is given back when the
 * server goes idle (rv_release_memory). A constructor: it must run before
 * any thread but the first has allocated (glibc fixes how many arenas it
 * makes when it first needs one more), so before Go starts its threads. */
__attribute__((constructor(200))) static void tune_malloc(void)
{
#ifdef __GLIBC__
    mallopt(M_TRIM_THRESHOLD, 8 << 20);
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
    if (!getenv("MALLOC_ARENA_MAX"))
        mallopt(M_ARENA_MAX, 2);
#endif
}

/* Gives the kernel back the free memory of every malloc arena, the pages
 * inside them as well as their tops, and first a worker's relay buffer,
 * which a burst grew. */
void rv_release_memory(void)
{
    rv_relay_trim();
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}
