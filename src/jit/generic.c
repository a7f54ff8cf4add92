/* generic.c - CPU kernels shared by plans.
 *
 * A kernel compiled for one plan serves every later plan with a kernel
 * of the same code (kir.h tc_kernel_same_code: the buffers it reads are
 * its arguments, not compiled in).  A model's backward runs as several
 * graphs, one per layer between the kept attention calls
 * (docs/training.md), and each layer's kernels are the same: compiled
 * once, not once per layer.  tcjit.reset() forgets these records (the
 * code stays loaded: live plans call it), so a reset process compiles or
 * reads the on-disk cache again.
 *
 * Size-generic kernels (dynamic shapes) are shared the same way and kept
 * across resets:
 * When a code object's tensor sizes change, its later plans are compiled
 * with tc_plan.dynamic: their kernels read sizes, strides and offsets from
 * a block passed after the arguments (gccjit_emit.c, tc_loop_dims).  Such
 * a kernel serves every later plan whose kernel has the same generic code
 * (kir.h tc_kernel_same_generic_code), the same collapsed loop structure
 * and the same reduction schedule, so a new size costs a trace and a
 * schedule instead of a gcc run.
 *
 * What holds compiled functions (a gcc_jit_result or a loaded shared
 * object) is a tc_holder, counted: each plan's code using one of its
 * functions and each record of one hold a reference, and the last one
 * releases it.  Size-generic records live as long as the process (their
 * number is the number of distinct kernels compiled size-generic).
 * Records hold no Python state.  Callers hold the compile lock
 * (gccjit_emit.c), except for tc_holder_unref.
 */
#include "jit_internal.h"

#include <libgccjit.h>
#include <stdlib.h>
#include <string.h>

struct tc_holder {
    void *h;
    int lib;          /* a shared object (kcache.c), else a gcc_jit_result */
    int refs;
};

tc_holder *
tc_holder_new(void *h, int lib)
{
    tc_holder *o = malloc(sizeof(*o));
    if (o != NULL) {
        o->h = h;
        o->lib = lib;
        o->refs = 1;
    }
    return o;
}

tc_holder *
tc_holder_ref(tc_holder *o)
{
    __atomic_fetch_add(&o->refs, 1, __ATOMIC_RELAXED);
    return o;
}

void
tc_holder_unref(tc_holder *o)
{
    if (o == NULL || __atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL) > 0) {
        return;
    }
    if (o->lib) {
        tc_kcache_close(o->h);
    }
    else {
        gcc_jit_result_release(o->h);
    }
    free(o);
}

typedef struct rec {
    struct rec *next;
    int generic;                 /* size-generic code; else this kernel's */
    int variant;                 /* static: its reduction-schedule variant */
    tc_kernel k;                 /* insts and args copied */
    tc_loop l;                   /* strides copied */
    tc_red_plan plan;            /* reduction kernels */
    tc_kernel_fn fn;
    tc_holder *holder;           /* a reference */
} rec;

static rec *records;

/* Same collapsed loop nest up to the sizes and strides the generic code
 * reads at run time (which strides are 0 or 1 is compiled in). */
static int
same_loop(const tc_loop *a, const tc_loop *b)
{
    if (a->ndim != b->ndim || a->nred != b->nred || a->nargs != b->nargs
        || a->nphases != b->nphases || (a->nchunks > 0) != (b->nchunks > 0)
        || (a->red_numel > 0) != (b->red_numel > 0)) {
        return 0;
    }
    int nd = a->ndim + a->nred;
    for (int d = 0; d < nd; d++) {
        if ((a->sizes[d] > 1) != (b->sizes[d] > 1)) {
            return 0;
        }
        for (int x = 0; x < a->nargs; x++) {
            if (tc_stride_class(a->strides[x][d])
                != tc_stride_class(b->strides[x][d])) {
                return 0;
            }
        }
    }
    return 1;
}

static int
same_plan(const tc_red_plan *a, const tc_red_plan *b)
{
    return a->threads == b->threads && a->persist == b->persist
           && (a->nsplit > 1) == (b->nsplit > 1) && a->npasses == b->npasses
           && memcmp(a->sets, b->sets, sizeof(a->sets)) == 0
           && memcmp(a->levels, b->levels, sizeof(a->levels)) == 0
           && memcmp(a->passes, b->passes,
                     sizeof(tc_red_pass) * (size_t)a->npasses) == 0;
}

tc_kernel_fn
tc_generic_find(const tc_kernel *k, const tc_loop *l, tc_holder **holder)
{
    tc_red_plan plan;
    memset(&plan, 0, sizeof(plan));
    if (k->nphases > 0 && tc_jit_red_plan(k, l, &plan) < 0) {
        return NULL;
    }
    for (rec *r = records; r != NULL; r = r->next) {
        if (r->generic && tc_kernel_same_generic_code(&r->k, k)
            && same_loop(&r->l, l)
            && (k->nphases == 0 || same_plan(&r->plan, &plan))) {
            *holder = tc_holder_ref(r->holder);
            return r->fn;
        }
    }
    return NULL;
}

tc_kernel_fn
tc_shared_find(const tc_kernel *k, int variant, tc_holder **holder)
{
    /* the same code has the same loop nest and reduction schedule */
    for (rec *r = records; r != NULL; r = r->next) {
        if (!r->generic && r->variant == variant
            && tc_kernel_same_code(&r->k, k)) {
            *holder = tc_holder_ref(r->holder);
            return r->fn;
        }
    }
    return NULL;
}

static void
rec_free(rec *r)
{
    free(r->k.insts);
    free(r->k.args);
    tc_loop_clear(&r->l);
    tc_holder_unref(r->holder);
    free(r);
}

static int
add(const tc_kernel *k, const tc_loop *l, tc_kernel_fn fn, tc_holder *h,
    int generic, int variant)
{
    rec *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return -1;
    }
    r->holder = tc_holder_ref(h);
    r->generic = generic;
    r->variant = variant;
    r->k = *k;
    r->k.desc = NULL;
    r->k.insts = malloc(sizeof(tc_kinst) * (size_t)(k->ninsts + 1));
    r->k.args = malloc(sizeof(tc_karg) * (size_t)(k->nargs + 1));
    r->l = *l;
    r->l.strides = malloc(sizeof(*l->strides) * (size_t)(l->nargs + 1));
    r->fn = fn;
    if (r->k.insts == NULL || r->k.args == NULL || r->l.strides == NULL
        || (k->nphases > 0 && tc_jit_red_plan(k, l, &r->plan) < 0)) {
        rec_free(r);
        return -1;
    }
    memcpy(r->k.insts, k->insts, sizeof(tc_kinst) * (size_t)k->ninsts);
    memcpy(r->k.args, k->args, sizeof(tc_karg) * (size_t)k->nargs);
    memcpy(r->l.strides, l->strides, sizeof(*l->strides) * (size_t)l->nargs);
    r->next = records;
    records = r;
    return 0;
}

int
tc_generic_add(const tc_kernel *k, const tc_loop *l, tc_kernel_fn fn,
               tc_holder *h)
{
    return add(k, l, fn, h, 1, 0);
}

int
tc_shared_add(const tc_kernel *k, const tc_loop *l, int variant,
              tc_kernel_fn fn, tc_holder *h)
{
    return add(k, l, fn, h, 0, variant);
}

void
tc_shared_forget(void)
{
    for (rec **p = &records; *p != NULL;) {
        rec *r = *p;
        if (r->generic) {
            p = &r->next;
            continue;
        }
        *p = r->next;
        rec_free(r);
    }
}
