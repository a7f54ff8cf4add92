/* arena.h - one host allocation per compiled CPU graph for the buffers that
 * live only inside a call (temporaries, extern operands).
 *
 * Why: a fresh large allocation is a page fault per 4 KB on first touch.
 * glibc serves blocks above its (adaptive) mmap threshold with a new
 * mapping each time, so depending on the heap's history an intermediate
 * of a few MB costs hundreds of faults per call: a GPT-2 MLP (2x128x768)
 * took ~1500 faults and ~1.3 ms of its ~19 ms per call that way, and our
 * GELU kernel ran at a third of its speed while touching fresh pages.
 * Shapes are static per compiled graph, so the buffers get fixed offsets
 * in one arena, reused between buffers whose lifetimes (the plan's steps)
 * do not overlap, and the arena is kept between calls: after the first
 * call, no intermediate touches a new page.  What a call returns is never
 * in the arena.
 *
 * The arena is held by one call at a time; a concurrent call (another
 * thread while the GIL is released in a kernel) allocates as before.
 */
#ifndef TCJIT_ARENA_H
#define TCJIT_ARENA_H

#include <Python.h>
#include "../graph/schedule.h"

typedef struct tc_arena tc_arena;

/* Plans an arena for plan p: bytes[b] > 0 marks a candidate buffer (its
 * size), live [first[b], last[b]] in steps.  Returns the arena, NULL when
 * no buffer qualifies (not an error), or NULL with an exception set. */
tc_arena *tc_arena_plan(const tc_plan *p, const int64_t *bytes,
                        const int *first, const int *last);
void tc_arena_free(tc_arena *ar);

/* Takes the arena for the calling thread's call, creating its memory on
 * first use (device is the torch device of the plan's tensors).  1 if the
 * call holds it, 0 if another call does, -1 with an exception. */
int tc_arena_acquire(tc_arena *ar, PyObject *device);
void tc_arena_release(tc_arena *ar);

/* In a call holding ar: buffer b's memory and, for a tensor buffer, its
 * tensor (borrowed; NULL for a host-memory TEMP).  Returns 0 if b is not
 * in the arena or the call does not hold it. */
int tc_arena_buffer(const tc_arena *ar, int b, void **ptr, PyObject **obj);

#endif
