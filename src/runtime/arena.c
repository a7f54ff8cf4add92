/* arena.c - per-graph arena for call-local buffers (see arena.h).
 *
 * Offsets come from a greedy first fit over lifetimes, largest buffer
 * first: a buffer goes at the lowest 64-byte aligned offset where it
 * overlaps no placed buffer whose steps overlap its own.  That is what a
 * memory planner for a static graph usually does; plans here have at most
 * a few hundred buffers, so the quadratic search costs nothing next to a
 * compile.
 */
#include "arena.h"
#include "torch_tensor.h"

#include <stdlib.h>
#include <string.h>

/* Arenas larger than this are not kept between calls: holding that much
 * host memory while idle is worse than the page faults. */
#define TC_ARENA_MAX_BYTES ((int64_t)1 << 30)

struct tc_arena {
    const tc_plan *plan;   /* borrowed */
    int64_t size;
    int64_t *off;          /* [nbuffers]: byte offset, -1: not here */
    PyObject *storage;     /* uint8 tensor of size bytes, on first use */
    char *base;
    PyObject **views;      /* [nbuffers]: tensor buffers, on first use */
    unsigned long owner;   /* thread of the call holding it, 0: none */
};

static int64_t
align64(int64_t n)
{
    return (n + 63) & ~(int64_t)63;
}

typedef struct {
    int64_t lo, hi;
} span;

static int
by_lo(const void *x, const void *y)
{
    const span *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Lowest offset for n bytes that avoids every span of busy[0..nb). */
static int64_t
first_fit(span *busy, int nb, int64_t n)
{
    qsort(busy, (size_t)nb, sizeof(span), by_lo);
    int64_t at = 0;
    for (int i = 0; i < nb; i++) {
        if (busy[i].lo >= at + n) {
            break;
        }
        if (busy[i].hi > at) {
            at = align64(busy[i].hi);
        }
    }
    return at;
}

static int
place(tc_arena *ar, const int *order, int n, const int64_t *bytes,
      const int *first, const int *last)
{
    span *busy = malloc(sizeof(span) * (size_t)(n + 1));
    if (busy == NULL) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int b = order[i], nb = 0;
        for (int j = 0; j < i; j++) {
            int c = order[j];
            if (first[c] <= last[b] && first[b] <= last[c]) {
                busy[nb].lo = ar->off[c];
                busy[nb].hi = ar->off[c] + bytes[c];
                nb++;
            }
        }
        ar->off[b] = first_fit(busy, nb, bytes[b]);
        if (ar->off[b] + bytes[b] > ar->size) {
            /* whole 64-byte blocks: every buffer's tensor has the arena
             * as its storage, and torch ops that copy a tensor's storage
             * (slice_scatter's clone_preserve_strides) need its size to be
             * a multiple of the element size (a bool buffer last) */
            ar->size = align64(ar->off[b] + bytes[b]);
        }
    }
    free(busy);
    return 0;
}

static const int64_t *sort_bytes;

static int
by_size_desc(const void *x, const void *y)
{
    int64_t a = sort_bytes[*(const int *)x], b = sort_bytes[*(const int *)y];
    return a > b ? -1 : a < b;
}

tc_arena *
tc_arena_plan(const tc_plan *p, const int64_t *bytes, const int *first,
              const int *last)
{
    int nb = p->nbuffers, n = 0;
    tc_arena *ar = calloc(1, sizeof(*ar));
    int *order = malloc(sizeof(int) * (size_t)(nb + 1));
    if (ar != NULL) {
        ar->off = malloc(sizeof(int64_t) * (size_t)(nb + 1));
        ar->views = calloc((size_t)(nb + 1), sizeof(PyObject *));
    }
    if (ar == NULL || order == NULL || ar->off == NULL || ar->views == NULL) {
        goto oom;
    }
    ar->plan = p;
    for (int b = 0; b < nb; b++) {
        ar->off[b] = -1;
        if (bytes[b] > 0 && first[b] >= 0 && last[b] >= first[b]) {
            order[n++] = b;
        }
    }
    /* qsort has no context argument; plans are built under the GIL */
    sort_bytes = bytes;
    qsort(order, (size_t)n, sizeof(int), by_size_desc);
    if (n == 0 || place(ar, order, n, bytes, first, last) < 0) {
        int failed = n > 0;
        free(order);
        tc_arena_free(ar);
        return failed ? (PyErr_NoMemory(), NULL) : NULL;
    }
    free(order);
    if (ar->size > TC_ARENA_MAX_BYTES) {
        tc_arena_free(ar);
        return NULL;
    }
    return ar;
oom:
    free(order);
    tc_arena_free(ar);
    PyErr_NoMemory();
    return NULL;
}

void
tc_arena_free(tc_arena *ar)
{
    if (ar == NULL) {
        return;
    }
    for (int b = 0; ar->views != NULL && b < ar->plan->nbuffers; b++) {
        Py_XDECREF(ar->views[b]);
    }
    Py_XDECREF(ar->storage);
    free(ar->views);
    free(ar->off);
    free(ar);
}

/* storage[off : off + span].view(dtype).as_strided(sizes, strides) */
static PyObject *
buffer_view(tc_arena *ar, int b)
{
    const tc_buffer *buf = &ar->plan->buffers[b];
    size_t es = tc_dtype_size(buf->dtype);
    int64_t n = 1;
    for (int d = 0; d < buf->layout.ndim; d++) {
        n += (buf->layout.sizes[d] - 1) * buf->layout.strides[d];
    }
    PyObject *lo = PyLong_FromLongLong(ar->off[b]);
    PyObject *hi = PyLong_FromLongLong(ar->off[b] + n * (int64_t)es);
    PyObject *sl = lo && hi ? PySlice_New(lo, hi, NULL) : NULL;
    PyObject *bytes = sl ? PyObject_GetItem(ar->storage, sl) : NULL;
    PyObject *typed = bytes ? PyObject_CallMethod(
                                  bytes, "view", "O",
                                  tc_alloc_dtype_object(buf->dtype))
                            : NULL;
    PyObject *sizes = tc_int_tuple(buf->layout.ndim, buf->layout.sizes);
    PyObject *strides = tc_int_tuple(buf->layout.ndim, buf->layout.strides);
    PyObject *v = typed && sizes && strides
                      ? PyObject_CallMethod(typed, "as_strided", "OO", sizes,
                                            strides)
                      : NULL;
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    Py_XDECREF(sl);
    Py_XDECREF(bytes);
    Py_XDECREF(typed);
    Py_XDECREF(sizes);
    Py_XDECREF(strides);
    return v;
}

static int
materialize(tc_arena *ar, PyObject *device)
{
    PyObject *argv[4] = {NULL};
    int rc = tc_alloc_bytes_argv(argv, ar->size, device);
    if (rc == 0) {
        ar->storage = tc_alloc_empty(argv);
    }
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(argv[i]);
    }
    void *base = NULL;
    if (ar->storage == NULL || tc_alloc_data_ptr(ar->storage, &base) < 0) {
        Py_CLEAR(ar->storage);
        return -1;
    }
    ar->base = base;
    for (int b = 0; b < ar->plan->nbuffers; b++) {
        if (ar->off[b] < 0 || ar->plan->buffers[b].kind != TC_BUF_OUTPUT) {
            continue;
        }
        if ((ar->views[b] = buffer_view(ar, b)) == NULL) {
            return -1;
        }
    }
    return 0;
}

int
tc_arena_acquire(tc_arena *ar, PyObject *device)
{
    if (ar == NULL || ar->owner != 0) {
        return 0;
    }
    if (ar->storage == NULL && materialize(ar, device) < 0) {
        for (int b = 0; b < ar->plan->nbuffers; b++) {
            Py_CLEAR(ar->views[b]);
        }
        Py_CLEAR(ar->storage);
        return -1;
    }
    ar->owner = PyThread_get_thread_ident();
    return 1;
}

void
tc_arena_release(tc_arena *ar)
{
    if (ar != NULL && ar->owner == PyThread_get_thread_ident()) {
        ar->owner = 0;
    }
}

int
tc_arena_buffer(const tc_arena *ar, int b, void **ptr, PyObject **obj)
{
    if (ar == NULL || ar->off[b] < 0 || ar->storage == NULL
        || ar->owner != PyThread_get_thread_ident()) {
        return 0;
    }
    *ptr = ar->base + ar->off[b];
    *obj = ar->views[b];
    return 1;
}
