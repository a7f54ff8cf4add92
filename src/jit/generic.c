/* generic.c - size-generic CPU kernels shared by plans (dynamic shapes).
 *
 * When a code object's tensor sizes change, its later plans are compiled
 * with tc_plan.dynamic: their kernels read sizes, strides and offsets from
 * a block passed after the arguments (gccjit_emit.c, tc_loop_dims).  Such
 * a kernel serves every later plan whose kernel has the same generic code
 * (kir.h tc_kernel_same_generic_code), the same collapsed loop structure
 * and the same reduction schedule, so a new size costs a trace and a
 * schedule instead of a gcc run.
 *
 * Records and the gcc results holding their functions live as long as
 * the process, like the code they stand for: they hold no Python state,
 * and their number is the number of distinct kernels compiled
 * size-generic.  Callers hold the compile lock (gccjit_emit.c).
 */
#include "jit_internal.h"

#include <libgccjit.h>
#include <stdlib.h>
#include <string.h>

typedef struct rec {
    struct rec *next;
    tc_kernel k;                 /* insts and args copied */
    tc_loop l;                   /* strides copied */
    tc_red_plan plan;            /* reduction kernels */
    tc_kernel_fn fn;
} rec;

static rec *records;
static void **kept;   /* gcc_jit_result or dlopen handles */
static int nkept, capkept;

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
tc_generic_find(const tc_kernel *k, const tc_loop *l)
{
    tc_red_plan plan;
    memset(&plan, 0, sizeof(plan));
    if (k->nphases > 0 && tc_jit_red_plan(k, l, &plan) < 0) {
        return NULL;
    }
    for (rec *r = records; r != NULL; r = r->next) {
        if (tc_kernel_same_generic_code(&r->k, k) && same_loop(&r->l, l)
            && (k->nphases == 0 || same_plan(&r->plan, &plan))) {
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
    free(r);
}

int
tc_generic_add(const tc_kernel *k, const tc_loop *l, tc_kernel_fn fn)
{
    rec *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return -1;
    }
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
tc_generic_keep(void *result)
{
    if (nkept == capkept) {
        int cap = capkept ? 2 * capkept : 16;
        void **v = realloc(kept, sizeof(*v) * (size_t)cap);
        if (v == NULL) {
            return -1;
        }
        kept = v;
        capkept = cap;
    }
    kept[nkept++] = result;
    return 0;
}
