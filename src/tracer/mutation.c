/* mutation.c - in-place tensor ops as data flow (DESIGN.md, "Tensor
 * mutation is data flow").
 *
 * An in-place op is traced as its out-of-place value plus a new *current
 * value* of the storage it writes.  A storage is named by its root node: a
 * graph input, or a computed node (a view node's view_base is its root).
 * Mutating a view of a root builds the root's new value by placing the
 * written box into the old value (narrow + cat: no new kernel kind).  Then
 * every tensor var of that storage is rebound: the root's vars to the new
 * value, its views' vars to the same view chain on the new value (which
 * is laid out exactly like the root, so the views' strides and offsets
 * stay valid).  Vars are shared by the stack and the locals, so rebinding
 * a var is what eager's aliasing means: every name of the tensor sees the
 * write, and `y = x.add_(1)` pushes x's own var (`y is x`).
 *
 * Graph inputs keep their identity: at the exit a var bound to an input's
 * current value (or a view of it) is the input tensor (or that view of it)
 * again, and the runtime copies the final value into the input's storage
 * before the exit's values are built (tc_writeback, frame_eval/writeback.c),
 * moving its version counter by the number of in-place ops eager runs.
 *
 * What eager would raise for, or what this file does not model (writes
 * through expanded or strided views, operands that share memory with the
 * written tensor, advanced-index assignment), ends the segment with a
 * reason: the instruction then runs in CPython.  Every state change is
 * logged, so an inlined call that fails rolls back what it mutated
 * (tc_tr_mut_rollback) and the call runs once, in CPython.
 */
#include "tracer_internal.h"

#include <math.h>

#include "../graph/extern.h"

typedef struct {
    int ident;   /* the storage's first root: a graph input or computed node */
    int cur;     /* its current value, laid out exactly like ident */
    int bumps;   /* in-place ops on it so far (eager's version counter) */
    int gradw;   /* how many of them ran under grad mode (autograd records
                    those: tc_writeback.grad) */
    int first;   /* the first node the in-place op made (graph.h
                    overwritten_at): its own reads of the old value are
                    eager's original_self, not a stale saved tensor */
} mut_storage;

typedef struct {
    tc_var *var;
    int node;    /* the var's node before it was rebound */
} mut_undo;

struct tc_mut_state {
    mut_storage *st;    /* append-only: the latest record of a storage wins */
    int nst, stcap;
    mut_undo *undo;
    int nundo, undocap;
    int *idmap;         /* tc_tr_mut_identity's nodes: pairs old, new (one
                           node for one tensor however often the exit
                           names it) */
    int nid, idcap;
};

/* ---- state -------------------------------------------------------------- */

static int
grow(void **p, int *cap, int n, size_t elsize)
{
    if (n < *cap) {
        return OK;
    }
    int c = *cap ? 2 * *cap : 16;
    while (c <= n) {
        c *= 2;
    }
    void *q = PyMem_Realloc(*p, (size_t)c * elsize);
    if (q == NULL) {
        PyErr_NoMemory();
        return ERROR;
    }
    *p = q;
    *cap = c;
    return OK;
}

static struct tc_mut_state *
state(tracer *T)
{
    if (T->sh->mut == NULL) {
        T->sh->mut = PyMem_Calloc(1, sizeof(struct tc_mut_state));
        if (T->sh->mut == NULL) {
            PyErr_NoMemory();
        }
    }
    return T->sh->mut;
}

void
tc_tr_mut_free(struct tc_mut_state *m)
{
    if (m != NULL) {
        PyMem_Free(m->st);
        PyMem_Free(m->undo);
        PyMem_Free(m->idmap);
        PyMem_Free(m);
    }
}

void
tc_tr_mut_mark(tracer *T, int mark[2])
{
    struct tc_mut_state *m = T->sh->mut;
    mark[0] = m ? m->nst : 0;
    mark[1] = m ? m->nundo : 0;
}

void
tc_tr_mut_rollback(tracer *T, const int mark[2])
{
    struct tc_mut_state *m = T->sh->mut;
    if (m == NULL) {
        return;
    }
    while (m->nundo > mark[1]) {
        m->nundo--;
        m->undo[m->nundo].var->node = m->undo[m->nundo].node;
    }
    if (m->nst > mark[0]) {
        m->nst = mark[0];
    }
}

/* The latest record whose current value is node, or NULL. */
static const mut_storage *
record_of(const tracer *T, int node)
{
    const struct tc_mut_state *m = T->sh->mut;
    for (int i = m ? m->nst - 1 : -1; i >= 0; i--) {
        if (m->st[i].cur == node) {
            return &m->st[i];
        }
    }
    return NULL;
}

static int
root_of(const tc_graph *g, int node)
{
    return g->nodes[node].view_base >= 0 ? g->nodes[node].view_base : node;
}

static int
same_layout(const tc_layout *a, const tc_layout *b)
{
    if (a->ndim != b->ndim) {
        return 0;
    }
    for (int d = 0; d < a->ndim; d++) {
        if (a->sizes[d] != b->sizes[d]
            || (a->sizes[d] != 1 && a->strides[d] != b->strides[d])) {
            return 0;
        }
    }
    return 1;
}

/* Every size and stride equal (same_layout ignores size-1 dims' strides,
 * which a tensor's .stride() still shows). */
static int
exact_layout(const tc_layout *a, const tc_layout *b)
{
    return tc_layout_same_sizes(a, b) && tc_layout_same_strides(a, b);
}

/* ---- views on a new base --------------------------------------------------- */

/* Node `node` (a view chain down to its root, or the root itself) again,
 * on base: the same view ops with the same parameters (base is laid out
 * like the root, so every stride and offset still holds).  The copies are
 * remembered in map (pairs old, new; *n of them). */
static int
view_on(tc_graph *g, int node, int base, int *map, int *n, int cap)
{
    const tc_node *v = &g->nodes[node];
    if (v->view_base < 0) {
        return base;
    }
    for (int i = 0; i < *n; i++) {
        if (map[2 * i] == node) {
            return map[2 * i + 1];
        }
    }
    int parent = view_on(g, v->in[0], base, map, n, cap);
    if (parent < 0) {
        return -1;
    }
    tc_node c = g->nodes[node];
    c.in[0] = parent;
    c.view_base = base;
    int id = tc_graph_push_node(g, &c);
    if (id >= 0 && *n < cap) {
        map[2 * *n] = node;
        map[2 * *n + 1] = id;
        (*n)++;
    }
    return id;
}

/* ---- placing a written view into its root's value ------------------------- */

#define MUT_ERR(T, err) tc_tr_unsupported((T), "in-place write: %s", (err))

static tc_var *
node_var(tracer *T, int node)
{
    tc_var *v = tc_var_new(&T->sh->arena, TC_VAR_TENSOR, -1);
    if (v != NULL) {
        v->node = node;
    }
    return v;
}

static tc_var *
int_var(tracer *T, int64_t x)
{
    PyObject *o = PyLong_FromLongLong(x);
    tc_var *v = o ? tc_var_const(&T->sh->arena, o, -1) : NULL;
    Py_XDECREF(o);
    return v;
}

/* torch.slice_scatter(P, W, d, a, stop, step): a strided slice written
 * (a generic extern node: kernels have no scatter). */
static int
slice_scatter(tracer *T, int P, int W, int d, int64_t a, int64_t stop,
              int64_t step, int *out)
{
    static PyObject *fn;
    if (fn == NULL
        && (fn = PyObject_GetAttrString(tc_torch_module, "slice_scatter"))
           == NULL) {
        return ERROR;
    }
    tc_var *args[6] = {node_var(T, P), node_var(T, W), int_var(T, d),
                       int_var(T, a), int_var(T, stop), int_var(T, step)};
    for (int i = 0; i < 6; i++) {
        if (args[i] == NULL) {
            return ERROR;
        }
    }
    int sp = T->sp;
    int rc = tc_tr_call_generic(T, fn, args, 6, NULL, 0);
    if (rc == NOT_HANDLED || (rc == OK && T->sp != sp + 1)) {
        return tc_tr_unsupported(T, "in-place write through a strided "
                                 "slice: slice_scatter refused");
    }
    if (rc == OK) {
        tc_var *r = tc_tr_pop(T);
        if (r->kind != TC_VAR_TENSOR) {
            return tc_tr_unsupported(T, "slice_scatter: no tensor result");
        }
        *out = r->node;
    }
    return rc;
}

/* The value of P (a node) with the box of W placed at offsets off, every
 * step[d]-th element: W has P's rank, extent W.sizes[d] in every dim
 * d >= d0 (dims before d0 are already the box's).  narrow + cat for
 * steps of 1, slice_scatter for others, dim by dim. */
static int
box_place(tracer *T, int P, int W, const int64_t *off, const int64_t *step,
          int d0, int *out)
{
    tc_graph *g = T->out->graph;
    char err[256];
    int nd = g->nodes[P].layout.ndim;
    int d = d0;
    while (d < nd && g->nodes[W].layout.sizes[d] == g->nodes[P].layout.sizes[d]) {
        d++;
    }
    if (d == nd) {
        *out = W;
        return OK;
    }
    int64_t size = g->nodes[P].layout.sizes[d];
    int64_t len = g->nodes[W].layout.sizes[d], a = off[d], st = step[d];
    int64_t stop = len ? a + (len - 1) * st + 1 : a;
    int inner = st == 1 ? tc_graph_narrow(g, P, d, a, len, err, sizeof(err))
                        : tc_graph_slice(g, P, d, &a, &stop, st, err,
                                         sizeof(err));
    int placed = -1, rc;
    if (inner < 0) {
        return MUT_ERR(T, err);
    }
    if ((rc = box_place(T, inner, W, off, step, d + 1, &placed)) != OK) {
        return rc;
    }
    if (st != 1) {
        return slice_scatter(T, P, placed, d, a, stop, st, out);
    }
    int pieces[3], n = 0;
    if (a > 0) {
        pieces[n++] = tc_graph_narrow(g, P, d, 0, a, err, sizeof(err));
    }
    pieces[n++] = placed;
    if (a + len < size) {
        pieces[n++] = tc_graph_narrow(g, P, d, a + len, size - a - len, err,
                                      sizeof(err));
    }
    for (int k = 0; k < n; k++) {
        if (pieces[k] < 0) {
            return MUT_ERR(T, err);
        }
    }
    int64_t xa[TC_MAX_XATTR] = {0};
    xa[TC_XA_CAT_DIM] = d;
    *out = n == 1 ? placed
                  : tc_graph_extern(g, "cat", n, pieces, xa, 0, err,
                                    sizeof(err));
    return *out < 0 ? MUT_ERR(T, err) : OK;
}

/* The new value of view t's parent when t (a view node) is written with
 * w (t's sizes and dtype). */
static int
place_in_parent(tracer *T, int t, int w, int *out)
{
    tc_graph *g = T->out->graph;
    const tc_node *v = &g->nodes[t];
    int p = v->in[0];
    const tc_layout *pl = &g->nodes[p].layout, *tl = &v->layout;
    char err[256];
    if (!v->vmap_affine) {
        if (strcmp(tc_ops[v->op].name, "view") != 0) {
            return tc_tr_unsupported(T, "in-place write through a %s view "
                                     "(not traced yet)", tc_ops[v->op].name);
        }
        /* a reshaping view keeps the row-major order of the elements */
        *out = tc_graph_reshape(g, w, pl->ndim, pl->sizes, err, sizeof(err));
        return *out < 0 ? MUT_ERR(T, err) : OK;
    }
    /* the view's dims that index the parent, in the parent's dim order */
    int64_t perm[TC_MAX_DIMS], kept[TC_MAX_DIMS], full[TC_MAX_DIMS];
    int nk = 0;
    unsigned used = 0;
    for (int e = 0; e < tl->ndim; e++) {
        if (v->vsrc[e] < 0) {
            if (tl->sizes[e] != 1) {
                return tc_tr_unsupported(T, "in-place write through an "
                                         "expanded view (eager raises: more "
                                         "than one element refers to one "
                                         "memory location)");
            }
            continue;
        }
        if (v->vcoef[e] < 1 || (used & (1u << v->vsrc[e]))) {
            return tc_tr_unsupported(T, "in-place write through a view "
                                     "that reverses or repeats a dim (not "
                                     "traced yet)");
        }
        used |= 1u << v->vsrc[e];
        kept[nk++] = e;
    }
    /* sort the kept dims by the parent dim they index */
    for (int i = 0; i < nk; i++) {
        for (int j = i + 1; j < nk; j++) {
            if (v->vsrc[kept[j]] < v->vsrc[kept[i]]) {
                int64_t s = kept[i];
                kept[i] = kept[j];
                kept[j] = s;
            }
        }
    }
    int64_t ksizes[TC_MAX_DIMS];
    for (int i = 0; i < nk; i++) {
        ksizes[i] = tl->sizes[kept[i]];
    }
    for (int d = 0; d < pl->ndim; d++) {
        full[d] = 1;
    }
    for (int i = 0; i < nk; i++) {
        full[v->vsrc[kept[i]]] = ksizes[i];
    }
    /* drop the size-1 dims that index nothing, order like the parent,
     * then give the parent's rank (1 where the view fixes an index) */
    int W = w, nview = 0;
    int64_t vsz[TC_MAX_DIMS];
    for (int e = 0; e < tl->ndim; e++) {
        if (v->vsrc[e] >= 0) {
            vsz[nview++] = tl->sizes[e];
        }
    }
    if (nview != tl->ndim) {
        W = tc_graph_reshape(g, W, nview, vsz, err, sizeof(err));
    }
    if (W >= 0) {
        /* kept[i] is a view dim; its position among the view's kept dims */
        int pos[TC_MAX_DIMS], k = 0, identity = 1;
        for (int e = 0; e < tl->ndim; e++) {
            if (v->vsrc[e] >= 0) {
                pos[e] = k++;
            }
        }
        for (int i = 0; i < nk; i++) {
            perm[i] = pos[kept[i]];
            identity &= perm[i] == i;
        }
        if (!identity) {
            W = tc_graph_permute(g, W, nk, perm, err, sizeof(err));
        }
    }
    if (W >= 0 && nk != pl->ndim) {
        W = tc_graph_reshape(g, W, pl->ndim, full, err, sizeof(err));
    }
    if (W < 0) {
        return MUT_ERR(T, err);
    }
    int64_t step[TC_MAX_DIMS];
    for (int d = 0; d < pl->ndim; d++) {
        step[d] = 1;
    }
    for (int i = 0; i < nk; i++) {
        step[v->vsrc[kept[i]]] = v->vcoef[kept[i]];
    }
    return box_place(T, p, W, v->voff, step, 0, out);
}

/* ---- the mutation ------------------------------------------------------------ */

/* Eager's canCast(from, to) for the result of an in-place op. */
static int
can_cast(tc_dtype from, tc_dtype to)
{
    if (tc_dtype_is_float(from) && !tc_dtype_is_float(to)) {
        return 0;
    }
    return from == TC_BOOL || to != TC_BOOL;
}

/* Elements [lo, hi) of its root's storage a view's elements lie in. */
static void
extent(const tc_node *n, int64_t *lo, int64_t *hi)
{
    *lo = n->view_base >= 0 ? n->offset : 0;
    *hi = *lo + 1;
    for (int d = 0; d < n->layout.ndim; d++) {
        if (n->layout.sizes[d] == 0) {
            *hi = *lo;
            return;
        }
        *hi += (n->layout.sizes[d] - 1) * n->layout.strides[d];
    }
}

/* 1 if tensor operand node n may share memory with target t (same storage,
 * not the very same view, extents that meet): eager checks partial overlap
 * and may raise. */
static int
overlaps(const tc_graph *g, int n, int t)
{
    if (n == t || root_of(g, n) != root_of(g, t)) {
        return 0;
    }
    const tc_node *a = &g->nodes[n], *b = &g->nodes[t];
    if (same_layout(&a->layout, &b->layout) && a->offset == b->offset) {
        return 0;
    }
    int64_t alo, ahi, blo, bhi;
    extent(a, &alo, &ahi);
    extent(b, &blo, &bhi);
    return alo < bhi && blo < ahi;
}

static int
check_operands(tracer *T, int t, tc_var **ops, int nops)
{
    const tc_graph *g = T->out->graph;
    for (int i = 0; i < nops; i++) {
        if (ops[i] != NULL && ops[i]->kind == TC_VAR_TENSOR
            && overlaps(g, ops[i]->node, t)) {
            return tc_tr_unsupported(T, "an in-place op whose operand shares "
                                     "memory with the tensor it writes "
                                     "(eager checks the overlap)");
        }
    }
    return OK;
}

/* Whether deferred call d makes an object that only refers to the tensors
 * it holds (a torch.return_types structseq, an object the trace made, a
 * set, an exception): made at the exit from the tensors' vars, which a
 * write updates, it holds the written tensors as eager's does.  Other
 * calls (__build_class__ runs a class body) may read their values. */
static int
holds_references(const tc_var *d)
{
    return tc_tr_is_new_object(d)
           || (d->obj != NULL && PyType_Check(d->obj)
               && d->obj != (PyObject *)&PyType_Type);
}

/* v (a deferred value's part) holds a tensor of root r's storage. */
static int
holds_storage(const tc_graph *g, const tc_var *v, int r, int depth)
{
    if (v == NULL || depth > 8) {
        return depth > 8;
    }
    if (v->kind == TC_VAR_TENSOR) {
        return root_of(g, v->node) == r;
    }
    for (int i = 0; i < v->nitems; i++) {
        if (holds_storage(g, v->items[i], r, depth + 1)) {
            return 1;
        }
    }
    return 0;
}

/* Tensor var `target` (whose node is the written tensor, a root or a view
 * of one) now holds w: w has the target's sizes and dtype; nodes from
 * `first` on were made by this op.  Records the storage's new value and
 * rebinds every var of the storage.  Nothing fails after the first var is
 * rebound. */
/* A dim of stride 0 and size > 1: elements that share memory. */
static int
has_stride0(const tc_layout *l)
{
    for (int d = 0; d < l->ndim; d++) {
        if (l->strides[d] == 0 && l->sizes[d] > 1) {
            return 1;
        }
    }
    return 0;
}

/* Does node v, or a node the in-place op made (id >= first) that v
 * reads, read storage r? */
static int
reads_root(const tc_graph *g, int v, int r, int first, int depth)
{
    if (root_of(g, v) == r) {
        return 1;
    }
    if (v < first || depth > 64) {
        return 0;
    }
    for (int i = 0; i < g->nodes[v].nin; i++) {
        if (reads_root(g, g->nodes[v].in[i], r, first, depth + 1)) {
            return 1;
        }
    }
    return 0;
}

/* Under grad mode eager's in-place op keeps the history of the tensor it
 * writes: y.zero_(), y.fill_(2), y.copy_(c) of a y that requires grad
 * give a result that requires grad, and y's history a gradient of zeros
 * (not None).  A new value that does not read the old one (a constant,
 * another tensor) becomes where(True, value, old): the same values, and
 * that zero gradient (grad fuzz seeds 23149, 26498, 26619). */
static int
keep_history(tracer *T, int r, int first, int *value)
{
    tc_graph *g = T->out->graph;
    char err[256];
    if (!T->grad_mode || !tc_tr_node_requires_grad(T, r)
        || reads_root(g, *value, r, first, 0)) {
        return OK;
    }
    int in[3] = {tc_graph_scalar_bool(g, 1), *value, r};
    int w = in[0] < 0 ? -1
                      : tc_graph_op(g, "where", 3, in, TC_F32, err,
                                    sizeof(err));
    if (w < 0) {
        return MUT_ERR(T, in[0] < 0 ? "out of memory" : err);
    }
    *value = w;
    return OK;
}

static int
mutate(tracer *T, tc_var *target, int w, int first)
{
    tc_graph *g = T->out->graph;
    struct tc_mut_state *m = state(T);
    char err[256];
    int t = target->node, r = root_of(g, t), rc;
    if (m == NULL) {
        return ERROR;
    }
    if (has_stride0(&g->nodes[t].layout)) {
        return tc_tr_unsupported(T, "in-place write into a tensor with "
                                 "stride 0 (eager raises: more than one "
                                 "element refers to one memory location)");
    }
    if (has_stride0(&g->nodes[r].layout)) {
        /* the write-back stores the whole root, which torch refuses for
         * an expanded one; eager writes only the view's elements */
        return tc_tr_unsupported(T, "in-place write into a view of an "
                                 "expanded tensor (stride 0; not traced "
                                 "yet)");
    }
    /* walk the view chain up to the root, placing the write at each step */
    int value = w;
    for (int n = t; n != r; n = g->nodes[n].in[0]) {
        if ((rc = place_in_parent(T, n, value, &value)) != OK) {
            tc_graph_drop_effects(g, first);  /* slice_scatter */
            return rc;
        }
    }
    if ((rc = keep_history(T, r, first, &value)) != OK) {
        tc_graph_drop_effects(g, first);
        return rc;
    }
    /* the root's new value: a node of its own (no var holds it yet, it is
     * no view), laid out like the root */
    const tc_layout *rl = &g->nodes[r].layout;
    if (value < first || g->nodes[value].kind != TC_NODE_OP
        || g->nodes[value].view_base >= 0
        || !exact_layout(&g->nodes[value].layout, rl)) {
        /* a copy into the root's very strides (size-1 dims' too: eager
         * keeps them), which must be dense for a kernel to write */
        tc_layout dense;
        tc_layout_like(rl, &dense);
        if (!same_layout(&dense, rl)) {
            return tc_tr_unsupported(T, "in-place write into a tensor whose "
                                     "strides are not dense (not traced "
                                     "yet)");
        }
        int c = tc_graph_op(g, "clone", 1, &value, TC_F32, err, sizeof(err));
        if (c < 0) {
            return MUT_ERR(T, err);
        }
        g->nodes[c].layout = *rl;
        value = c;
    }
    tc_var_arena *a = &T->sh->arena;
    for (int i = 0; i < a->n; i++) {
        /* an f-string field (or a call) is made at the exit, from the
         * tensor's final value; eager made it from the value it had then.
         * (An iterator yields the tensor objects themselves: no copy.) */
        tc_var *d = a->vars[i];
        if (d->kind == TC_VAR_DEFERRED
            && (d->node == TC_TMPL_FORMAT || d->node == TC_TMPL_JOIN
                || (d->node == TC_TMPL_CALL && !holds_references(d)))
            && holds_storage(g, d, r, 0)) {
            return tc_tr_unsupported(T, "in-place write into a tensor that "
                                     "a pending f-string still formats");
        }
    }
    int nvars = 0;
    for (int i = 0; i < a->n; i++) {
        nvars += a->vars[i]->kind == TC_VAR_TENSOR
                 && root_of(g, a->vars[i]->node) == r;
    }
    int *map = PyMem_Malloc(sizeof(int) * (2 * (size_t)nvars + 2));
    if (map == NULL
        || grow((void **)&m->st, &m->stcap, m->nst, sizeof(mut_storage)) != OK
        || grow((void **)&m->undo, &m->undocap, m->nundo + nvars,
                sizeof(mut_undo)) != OK) {
        PyMem_Free(map);
        return map == NULL ? (PyErr_NoMemory(), ERROR) : ERROR;
    }
    /* (looked up after m->st may have moved) */
    const mut_storage *prev = record_of(T, r);
    /* the views on the new value, made before any var changes */
    int nmap = 0;
    for (int i = 0; i < a->n; i++) {
        tc_var *v = a->vars[i];
        if (v->kind == TC_VAR_TENSOR && root_of(g, v->node) == r
            && view_on(g, v->node, value, map, &nmap, nvars) < 0) {
            PyMem_Free(map);
            return MUT_ERR(T, "out of memory");
        }
    }
    m->st[m->nst].ident = prev ? prev->ident : r;
    m->st[m->nst].cur = value;
    m->st[m->nst].bumps = (prev ? prev->bumps : 0) + 1;
    m->st[m->nst].gradw = (prev ? prev->gradw : 0) + (T->grad_mode != 0);
    m->st[m->nst].first = first;
    /* Under no_grad eager changes the data of a tensor that requires
     * grad and keeps its history: a later differentiable read gets a
     * gradient through it to that history.  The graph's value is computed
     * under no_grad (no gradient): such a read is a graph break
     * (tc_writebacks.ngw_read), so it is marked here. */
    int ident = m->st[m->nst].ident;
    if (!T->grad_mode && tc_tr_grow_grad(T->sh, g->nnodes) == OK
        && (T->sh->grad[ident] || T->sh->grad[r]
            || T->sh->ngw[r])) {
        T->sh->ngw[value] = 1;
    }
    else if (PyErr_Occurred()) {
        PyMem_Free(map);
        return ERROR;
    }
    m->nst++;
    for (int i = 0; i < a->n; i++) {
        tc_var *v = a->vars[i];
        if (v->kind != TC_VAR_TENSOR || root_of(g, v->node) != r) {
            continue;
        }
        m->undo[m->nundo].var = v;
        m->undo[m->nundo++].node = v->node;
        v->node = view_on(g, v->node, value, map, &nmap, nvars);
    }
    PyMem_Free(map);
    return OK;
}

/* One more move of v's version counter, without a write: eager's
 * autograd.Function bumps the inputs its forward marks dirty (autofn.c).
 * The write-back then moves the counter by the bumps of v's storage. */
int
tc_tr_mut_bump(tracer *T, tc_var *v)
{
    struct tc_mut_state *m = state(T);
    if (m == NULL
        || grow((void **)&m->st, &m->stcap, m->nst, sizeof(mut_storage))
           != OK) {
        return ERROR;
    }
    int r = root_of(T->out->graph, v->node);
    const mut_storage *prev = record_of(T, r);
    m->st[m->nst].ident = prev ? prev->ident : r;
    m->st[m->nst].cur = r;
    m->st[m->nst].bumps = (prev ? prev->bumps : 0) + 1;
    m->st[m->nst].gradw = (prev ? prev->gradw : 0) + (T->grad_mode != 0);
    m->st[m->nst].first = T->out->graph->nnodes;
    m->nst++;
    return OK;
}

/* target.<op>_(...)'s out-of-place value `value` (a tensor var) written
 * into target as eager's in-place op writes it: same sizes, a result
 * dtype that casts to target's. */
static int
write_result(tracer *T, tc_var *target, tc_var *value, tc_var **ops,
             int nops, const char *what, int first)
{
    tc_graph *g = T->out->graph;
    char err[256], a[96], b[96];
    if (value == NULL || value->kind != TC_VAR_TENSOR) {
        return tc_tr_unsupported(T, "%s: no tensor result", what);
    }
    const tc_node *t = &g->nodes[target->node], *r = &g->nodes[value->node];
    if (!tc_layout_same_sizes(&t->layout, &r->layout)) {
        tc_shape_text(a, sizeof(a), t->layout.sizes, t->layout.ndim);
        tc_shape_text(b, sizeof(b), r->layout.sizes, r->layout.ndim);
        return tc_tr_unsupported(T, "%s: output with shape %s doesn't match "
                                 "the broadcast shape %s", what, a, b);
    }
    if (!can_cast(r->dtype, t->dtype)) {
        return tc_tr_unsupported(T, "%s: result type %s can't be cast to the "
                                 "desired output type %s", what,
                                 tc_dtype_scalar_type_name(r->dtype),
                                 tc_dtype_scalar_type_name(t->dtype));
    }
    int rc = check_operands(T, target->node, ops, nops);
    if (rc != OK) {
        return rc;
    }
    int w = value->node;
    if (r->dtype != t->dtype) {
        w = tc_graph_op(g, "to", 1, &w, t->dtype, err, sizeof(err));
        if (w < 0) {
            return MUT_ERR(T, err);
        }
    }
    return mutate(T, target, w, first);
}

/* value (a Python number or a tensor) converted to target node t's dtype
 * and broadcast to its sizes, as copy_ and fill_ write it. */
static int
broadcast_value(tracer *T, int t, tc_var *value, int *out)
{
    tc_graph *g = T->out->graph;
    const tc_node *tn = &g->nodes[t];
    char err[256];
    int rc = OK;
    if (value->kind != TC_VAR_TENSOR) {
        int s = tc_tr_operand_node(T, value, &rc);
        if (s < 0) {
            return rc;
        }
        tc_layout l = tn->layout;
        tc_layout_contiguous(&l);
        *out = tc_graph_full(g, &l, tn->dtype, s, err, sizeof(err));
        return *out < 0 ? MUT_ERR(T, err) : OK;
    }
    int w = value->node;
    if (g->nodes[w].dtype != tn->dtype) {
        w = tc_graph_op(g, "to", 1, &w, tn->dtype, err, sizeof(err));
    }
    if (w >= 0 && !tc_layout_same_sizes(&g->nodes[w].layout, &tn->layout)) {
        w = tc_graph_expand(g, w, tn->layout.ndim, tn->layout.sizes, err,
                            sizeof(err));
    }
    *out = w;
    return w < 0 ? MUT_ERR(T, err) : OK;
}

/* copy_ / fill_ / zero_ / setitem: target holds value (broadcast). */
static int
assign(tracer *T, tc_var *target, tc_var *value)
{
    int w, first = T->out->graph->nnodes;
    int rc = check_operands(T, target->node, &value, 1);
    if (rc == OK) {
        rc = broadcast_value(T, target->node, value, &w);
    }
    return rc == OK ? mutate(T, target, w, first) : rc;
}

/* torch.<op>(a, b) through the ordinary CALL path (a registry op, so it
 * fuses): the result var, or NULL with *rc set. */
static tc_var *
torch_binary(tracer *T, const char *op, tc_var *a, tc_var *b, int *rc)
{
    PyObject *fn = PyObject_GetAttrString(tc_torch_module, op);
    tc_var *f = fn ? tc_tr_const_var(T, fn) : NULL;
    Py_XDECREF(fn);
    if (f == NULL) {
        *rc = ERROR;
        return NULL;
    }
    f->kind = TC_VAR_OBJECT;
    tc_var *args[2] = {a, b};
    *rc = tc_tr_call_with_args(T, f, args, 2, NULL);
    return *rc == OK ? tc_tr_pop(T) : NULL;
}

static int
is_float_tensor(tracer *T, tc_var *v, tc_dtype dt)
{
    return v->kind == TC_VAR_TENSOR && tc_tr_tensor_node(T, v)->dtype == dt
           && (dt == TC_F32 || dt == TC_F64);
}

/* addcmul / addcdiv (x, t1, t2, value=v) and lerp (x, end, w) of float
 * tensors of one dtype, v a number or 0-d tensor (an optimizer's step
 * size under torch.compiler.is_compiling(): eager takes its item()), w a
 * number: the same arithmetic from registry pointwise ops, in eager's
 * kernels' order (x + v * t1 * t2, x + v * t1 / t2; lerp: x + w * (end -
 * x) for |w| < 0.5, else end + (w - 1) * (end - x), which the vectorized
 * kernel fuses (at most an ulp apart)), so an optimizer's update fuses
 * into one kernel instead of extern calls.  The value pushed, or
 * NOT_HANDLED. */
static int
decompose_pointwise(tracer *T, const char *base, tc_var **args, int nargs,
                    PyObject *kwnames)
{
    int lerp = !strcmp(base, "lerp"), div = !strcmp(base, "addcdiv");
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    if ((!lerp && !div && strcmp(base, "addcmul"))
        || args[0]->kind != TC_VAR_TENSOR) {
        return NOT_HANDLED;
    }
    tc_dtype dt = tc_tr_tensor_node(T, args[0])->dtype;
    int rc = tc_tr_reify_all(T, args, nargs);
    if (rc != OK) {
        return rc;
    }
    for (int i = 0; i < (lerp ? 2 : 3); i++) {
        if (nargs <= i || !is_float_tensor(T, args[i], dt)) {
            return NOT_HANDLED;
        }
    }
    tc_var *acc;
    if (lerp) {
        tc_var *w = nargs == 3 && nkw == 0 ? args[2] : NULL;
        if (w == NULL || w->kind != TC_VAR_CONST || !PyFloat_Check(w->obj)) {
            return NOT_HANDLED;
        }
        double wd = PyFloat_AS_DOUBLE(w->obj);
        /* the weight as the kernel has it, in its opmath type */
        double wo = dt == TC_F64 ? wd : (double)(float)wd;
        int small = fabs(wo) < 0.5;
        double coeff = small ? wo : (dt == TC_F64 ? wo - 1.0
                                     : (double)((float)wo - 1.0f));
        PyObject *c = PyFloat_FromDouble(coeff);
        tc_var *cv = c ? tc_tr_const_var(T, c) : NULL;
        Py_XDECREF(c);
        if (cv == NULL) {
            return ERROR;
        }
        tc_var *diff = torch_binary(T, "sub", args[1], args[0], &rc);
        acc = diff ? torch_binary(T, "mul", cv, diff, &rc) : NULL;
        acc = acc ? torch_binary(T, "add", small ? args[0] : args[1], acc,
                                 &rc) : NULL;
        return acc ? tc_tr_push(T, acc) : rc;
    }
    tc_var *v = NULL;
    if (nargs == 4 && nkw == 1
        && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0),
                                            "value") == 0) {
        v = args[3];
    }
    else if (nargs != 3 || nkw != 0) {
        return NOT_HANDLED;
    }
    if (v != NULL && !(v->kind == TC_VAR_CONST && (PyFloat_Check(v->obj)
                                                   || PyLong_Check(v->obj)))
        && !(v->kind == TC_VAR_TENSOR
             && tc_tr_tensor_node(T, v)->layout.ndim == 0
             && (tc_tr_tensor_node(T, v)->dtype == TC_F32
                 || tc_tr_tensor_node(T, v)->dtype == TC_F64))) {
        return NOT_HANDLED;
    }
    if (v == NULL) {
        PyObject *one = PyLong_FromLong(1);
        v = one ? tc_tr_const_var(T, one) : NULL;
        Py_XDECREF(one);
        if (v == NULL) {
            return ERROR;
        }
    }
    acc = torch_binary(T, "mul", v, args[1], &rc);
    acc = acc ? torch_binary(T, div ? "div" : "mul", acc, args[2], &rc)
              : NULL;
    acc = acc ? torch_binary(T, "add", args[0], acc, &rc) : NULL;
    return acc ? tc_tr_push(T, acc) : rc;
}

/* x.foo_(...) that no pointwise registry entry defines: torch.foo(x,
 * ...), its out-of-place form (index_copy, scatter, addcdiv, lerp, ...),
 * as a generic extern node, written into x.  NOT_HANDLED when torch has
 * no such function. */
static int
call_functional(tracer *T, const char *name, tc_var **args, int nargs,
                PyObject *kwnames)
{
    char base[64];
    size_t len = strlen(name);
    if (len >= sizeof(base)) {
        return NOT_HANDLED;
    }
    /* their torch.* forms draw other numbers, or mean another thing
     * (torch.normal(x) takes x as the mean) */
    if (!strcmp(name, "normal_") || !strcmp(name, "bernoulli_")) {
        return tc_tr_unsupported(T, "Tensor.%s (random in-place ops are not "
                                 "traced yet)", name);
    }
    memcpy(base, name, len - 1);
    base[len - 1] = '\0';
    PyObject *fn = PyObject_GetAttrString(tc_torch_module, base);
    if (fn == NULL) {
        /* torch._C._nn.hardswish_ (F.hardswish(x, inplace=True)) */
        PyErr_Clear();
        PyObject *C = PyObject_GetAttrString(tc_torch_module, "_C");
        PyObject *nn = C ? PyObject_GetAttrString(C, "_nn") : NULL;
        fn = nn ? PyObject_GetAttrString(nn, base) : NULL;
        Py_XDECREF(nn);
        Py_XDECREF(C);
    }
    if (fn == NULL || !PyCFunction_Check(fn)) {
        PyErr_Clear();
        Py_XDECREF(fn);
        return NOT_HANDLED;
    }
    tc_graph *g = T->out->graph;
    int sp = T->sp, first = g->nnodes;
    int rc = decompose_pointwise(T, base, args, nargs, kwnames);
    if (rc == NOT_HANDLED) {
        rc = tc_tr_call_generic(T, fn, args, nargs, kwnames, 0);
    }
    Py_DECREF(fn);
    if (rc == OK && T->sp != sp + 1) {
        rc = tc_tr_unsupported(T, "Tensor.%s: unexpected result", name);
    }
    if (rc == OK) {
        tc_var *value = tc_tr_pop(T);
        if (value->kind != TC_VAR_TENSOR || value->node < first
            || g->nodes[value->node].view_base >= 0) {
            /* t_, squeeze_, detach_: they change the tensor's metadata */
            rc = tc_tr_unsupported(T, "Tensor.%s changes what its tensor "
                                   "is, not only its values (not traced)",
                                   name);
        }
        else {
            rc = write_result(T, args[0], value, args + 1, nargs - 1, name,
                              first);
        }
    }
    if (rc != OK) {
        /* the refused call's node must not run (it may draw numbers) */
        tc_graph_drop_effects(g, first);
        return rc;
    }
    return tc_tr_push(T, args[0]);
}

/* ---- entry points ------------------------------------------------------------ */

int
tc_tr_call_inplace(tracer *T, PyObject *name, tc_var **args, int nargs,
                   PyObject *kwnames)
{
    const char *s = PyUnicode_AsUTF8(name);
    size_t len = s ? strlen(s) : 0;
    tc_var *self = args[0];
    if (s == NULL || len < 2 || len > 60 || s[len - 1] != '_' || s[0] == '_'
        || self->kind != TC_VAR_TENSOR) {
        PyErr_Clear();
        return NOT_HANDLED;
    }
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    int npos = nargs - nkw, rc;
    if (!strcmp(s, "zero_") || !strcmp(s, "fill_") || !strcmp(s, "copy_")) {
        int want = s[0] == 'z' ? 1 : 2;
        if (nkw != 0 || npos != want) {
            return tc_tr_unsupported(T, "Tensor.%s with these arguments", s);
        }
        tc_var *value = want == 1 ? NULL : args[1];
        if (s[0] == 'f' && value->kind == TC_VAR_TENSOR
            && T->out->graph->nodes[value->node].layout.ndim != 0) {
            return tc_tr_unsupported(T, "fill_ only supports 0-dimension "
                                     "value tensor");
        }
        if (s[0] == 'c' && value->kind != TC_VAR_TENSOR) {
            return tc_tr_unsupported(T, "copy_(): argument 'src' must be "
                                     "Tensor, not %s",
                                     tc_var_kind_name(value));
        }
        if (value == NULL) {
            PyObject *zero = PyLong_FromLong(0);
            value = zero ? tc_var_const(&T->sh->arena, zero, -1) : NULL;
            Py_XDECREF(zero);
            if (value == NULL) {
                return ERROR;
            }
        }
        if ((rc = assign(T, self, value)) != OK) {
            return rc;
        }
        return tc_tr_push(T, self);
    }
    /* x.foo_(...) is x.copy_(x.foo(...)) for every pointwise op of the
     * registry: its Tensor.foo binding parses the arguments */
    char path[80];
    snprintf(path, sizeof(path), "Tensor.%.*s", (int)(len - 1), s);
    const tc_binding *b = tc_binding_by_path(path);
    int op = b ? tc_op_lookup(b->def->op) : -1;
    if (op < 0 || tc_ops[op].kind != TC_OPK_POINTWISE) {
        return call_functional(T, s, args, nargs, kwnames);
    }
    int sp = T->sp, first = T->out->graph->nnodes;
    rc = tc_tr_call_binding(T, b, args, nargs, kwnames);
    if (rc != OK) {
        return rc;
    }
    if (T->sp != sp + 1) {
        return tc_tr_unsupported(T, "Tensor.%s: unexpected result", s);
    }
    tc_var *value = tc_tr_pop(T);
    if ((rc = write_result(T, self, value, args + 1, nargs - 1, s, first))
        != OK) {
        return rc;
    }
    return tc_tr_push(T, self);
}

/* The arguments of item k of a torch._foreach_* call (args reified):
 * the k-th item of each list argument, the others as given, keywords
 * kwnames.  _foreach_addcmul/_addcdiv's fourth positional argument is
 * the scalar `value` (Tensor.addcmul takes it by keyword only); as a
 * 1-d tensor of one scalar per item (Adam's stacked step sizes) item k
 * gets value=scalars[k], a 0-d tensor.  *kw: the item call's keywords. */
static int
foreach_item_args(tracer *T, const char *name, tc_var **args, int nargs,
                  PyObject *kwnames, int k, tc_var **a, PyObject **kw)
{
    static PyObject *value_kw;
    *kw = kwnames;
    for (int i = 0; i < nargs; i++) {
        int seq = args[i]->kind == TC_VAR_LIST
                  || args[i]->kind == TC_VAR_TUPLE;
        a[i] = seq ? args[i]->items[k] : args[i];
    }
    if (kwnames != NULL || nargs != 4
        || (strncmp(name + 9, "addcmul", 7) && strncmp(name + 9, "addcdiv", 7))) {
        return OK;
    }
    if (value_kw == NULL
        && (value_kw = Py_BuildValue("(s)", "value")) == NULL) {
        return ERROR;
    }
    *kw = value_kw;   /* kept for the process */
    tc_var *v = args[3];
    if (v->kind != TC_VAR_TENSOR
        || tc_tr_tensor_node(T, v)->layout.ndim != 1) {
        return OK;
    }
    PyObject *fn = PyObject_GetAttrString(tc_torch_module, "select");
    PyObject *dim = PyLong_FromLong(0), *ix = PyLong_FromLong(k);
    tc_var *sel[3] = {v, dim ? tc_tr_const_var(T, dim) : NULL,
                      ix ? tc_tr_const_var(T, ix) : NULL};
    tc_var *f = fn ? tc_tr_const_var(T, fn) : NULL;
    Py_XDECREF(fn);
    Py_XDECREF(dim);
    Py_XDECREF(ix);
    if (f == NULL || sel[1] == NULL || sel[2] == NULL) {
        return ERROR;
    }
    f->kind = TC_VAR_OBJECT;
    int rc = tc_tr_call_with_args(T, f, sel, 3, NULL);
    if (rc == OK) {
        a[3] = tc_tr_pop(T);
    }
    return rc;
}

/* torch._foreach_foo_(xs, ...): xs[k].foo_(...) for every k, the k-th
 * item of each list argument (scalars, tensors and keywords as given):
 * the same math, and the per-tensor ops fuse.  All or nothing: a refused
 * item undoes the writes before it. */
static int
call_foreach(tracer *T, const char *name, tc_var **args, int nargs,
             PyObject *kwnames)
{
    tc_var *xs = args[0], *a[TC_MAX_CALL_ARGS];
    tc_graph *g = T->out->graph;
    int sp = T->sp, first = g->nnodes, mark[2], rc = OK;
    if (nargs > TC_MAX_CALL_ARGS) {
        return NOT_HANDLED;
    }
    for (int i = 1; i < nargs; i++) {
        if ((rc = tc_tr_reify(T, args[i])) != OK) {
            return rc;
        }
        if ((args[i]->kind == TC_VAR_LIST || args[i]->kind == TC_VAR_TUPLE)
            && args[i]->nitems != xs->nitems) {
            return tc_tr_unsupported(T, "%s with lists of different "
                                     "lengths", name);
        }
    }
    PyObject *method = PyUnicode_FromString(name + 9);   /* "foo_" */
    if (method == NULL) {
        return ERROR;
    }
    tc_tr_mut_mark(T, mark);
    for (int k = 0; rc == OK && k < xs->nitems; k++) {
        PyObject *kw;
        rc = foreach_item_args(T, name, args, nargs, kwnames, k, a, &kw);
        if (rc == OK) {
            rc = tc_tr_call_inplace(T, method, a, nargs, kw);
        }
        if (rc == OK) {
            tc_tr_pop(T);
        }
    }
    Py_DECREF(method);
    if (rc != OK) {
        tc_tr_mut_rollback(T, mark);
        tc_graph_drop_effects(g, first);
        T->sp = sp;
        return rc == NOT_HANDLED
            ? tc_tr_unsupported(T, "%s: no in-place method for its items",
                                name)
            : rc;
    }
    return tc_tr_push(T, xs);  /* eager returns its list argument */
}

/* torch._foreach_foo(xs, ...) (out of place): (torch.foo(xs[k], ...)
 * for every k), each through the ordinary CALL path (the k-th item of
 * every list argument; scalars, tensors and keywords as given), so the
 * per-tensor ops fuse.  The first list argument sets the length
 * (_foreach_pow(scalar, xs) has it second). */
static int
call_foreach_functional(tracer *T, const char *name, tc_var **args,
                        int nargs, PyObject *kwnames)
{
    tc_var *a[TC_MAX_CALL_ARGS], *out[TC_MAX_ITEMS];
    int n = -1, rc = OK;
    if (nargs > TC_MAX_CALL_ARGS) {
        return NOT_HANDLED;
    }
    for (int i = 0; i < nargs; i++) {
        if ((rc = tc_tr_reify(T, args[i])) != OK) {
            return rc;
        }
        if (args[i]->kind != TC_VAR_LIST && args[i]->kind != TC_VAR_TUPLE) {
            continue;
        }
        if (n >= 0 && args[i]->nitems != n) {
            return tc_tr_unsupported(T, "%s with lists of different "
                                     "lengths", name);
        }
        n = args[i]->nitems;
    }
    if (n < 0) {
        return NOT_HANDLED;
    }
    if (n > TC_MAX_ITEMS) {
        return tc_tr_unsupported(T, "%s of %d tensors", name, n);
    }
    PyObject *fn = PyObject_GetAttrString(tc_torch_module, name + 9);
    if (fn == NULL) {
        PyErr_Clear();
        return tc_tr_unsupported(T, "%s (no torch.%s)", name, name + 9);
    }
    tc_var *f = tc_tr_const_var(T, fn);
    Py_DECREF(fn);
    if (f == NULL) {
        return ERROR;
    }
    f->kind = TC_VAR_OBJECT;  /* a function of torch, fixed */
    for (int k = 0; rc == OK && k < n; k++) {
        PyObject *kw;
        rc = foreach_item_args(T, name, args, nargs, kwnames, k, a, &kw);
        if (rc == OK) {
            rc = tc_tr_call_with_args(T, f, a, nargs, kw);
        }
        if (rc == OK) {
            out[k] = tc_tr_pop(T);
            if (out[k] == NULL || out[k]->kind != TC_VAR_TENSOR) {
                rc = tc_tr_unsupported(T, "%s: torch.%s gave no tensor",
                                       name, name + 9);
            }
        }
    }
    if (rc != OK) {
        return rc;
    }
    /* (a tuple, as eager's) */
    tc_var *list = tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, n, out);
    return list == NULL ? ERROR : tc_tr_push(T, list);
}

int
tc_tr_call_torch_inplace(tracer *T, PyObject *fn, tc_var **args, int nargs,
                         PyObject *kwnames)
{
    if (!PyCFunction_Check(fn) || nargs < 1) {
        return NOT_HANDLED;
    }
    const char *name = ((PyCFunctionObject *)fn)->m_ml->ml_name;
    size_t len = strlen(name);
    if (len > 9 && !strncmp(name, "_foreach_", 9) && name[len - 1] != '_') {
        PyObject *same = PyObject_GetAttrString(tc_torch_module, name);
        Py_XDECREF(same);   /* (compared by identity only) */
        PyErr_Clear();
        if (same == fn) {
            return call_foreach_functional(T, name, args, nargs, kwnames);
        }
    }
    if (len < 2 || name[len - 1] != '_') {
        return NOT_HANDLED;
    }
    /* a function of the torch module itself, or of torch._C._nn (what
     * F.hardswish(x, inplace=True) calls) */
    PyObject *same = PyObject_GetAttrString(tc_torch_module, name);
    PyObject *owner = ((PyCFunctionObject *)fn)->m_self;
    int is_torch = same == fn
        || (owner != NULL && PyModule_Check(owner)
            && !strcmp(PyModule_GetName(owner) ? PyModule_GetName(owner)
                                               : "", "torch._C._nn"));
    Py_XDECREF(same);
    PyErr_Clear();
    if (!is_torch) {
        return NOT_HANDLED;
    }
    tc_var *x = args[0];
    int rc = tc_tr_reify(T, x);
    if (rc != OK) {
        return rc;
    }
    if (!strncmp(name, "_foreach_", 9)) {
        if (x->kind != TC_VAR_LIST && x->kind != TC_VAR_TUPLE) {
            return NOT_HANDLED;
        }
        for (int k = 0; k < x->nitems; k++) {
            if (x->items[k]->kind != TC_VAR_TENSOR) {
                return NOT_HANDLED;
            }
        }
        return call_foreach(T, name, args, nargs, kwnames);
    }
    if (name[0] == '_' || x->kind != TC_VAR_TENSOR) {
        return NOT_HANDLED;
    }
    PyObject *n = PyUnicode_FromString(name);
    if (n == NULL) {
        return ERROR;
    }
    rc = tc_tr_call_inplace(T, n, args, nargs, kwnames);
    Py_DECREF(n);
    return rc;
}

int
tc_tr_inplace_binary(tracer *T, int nb, tc_var *a, tc_var *b)
{
    int rc;
    if (tc_tr_push(T, a) != OK || tc_tr_push(T, b) != OK) {
        return ERROR;
    }
    if (a->kind != TC_VAR_TENSOR) {
        /* a number has no __iadd__: Python calls b.__radd__(a) */
        return tc_tr_op_binary(T, nb % NB_INPLACE_ADD);
    }
    if (nb == NB_INPLACE_MATRIX_MULTIPLY) {
        return tc_tr_unsupported(T, "in-place matmul (@=) of a tensor");
    }
    int first = T->out->graph->nnodes;
    if ((rc = tc_tr_op_binary(T, nb % NB_INPLACE_ADD)) != OK) {
        return rc;
    }
    tc_var *value = tc_tr_pop(T);
    if ((rc = write_result(T, a, value, &b, 1, "in-place operator", first))
        != OK) {
        return rc;
    }
    return tc_tr_push(T, a);
}

/* An index whose items are tensors and full slices (x[i] = v,
 * x[:, :, pos] = v): aten.index_put's indices (None for a slice), or NULL
 * for other keys. */
static tc_var *
advanced_indices(tracer *T, tc_var *key)
{
    tc_var *one[1] = {key}, **items = one, *list[TC_MAX_DIMS];
    int n = 1, tensors = 0;
    if (key->kind == TC_VAR_TUPLE) {
        items = key->items;
        n = key->nitems;
    }
    if (n > TC_MAX_DIMS) {
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        tc_var *v = items[i];
        if (v->kind == TC_VAR_TENSOR) {
            tensors++;
            list[i] = v;
            continue;
        }
        if (v->kind != TC_VAR_CONST || !PySlice_Check(v->obj)) {
            return NULL;
        }
        PySliceObject *sl = (PySliceObject *)v->obj;
        if (sl->start != Py_None || sl->stop != Py_None
            || sl->step != Py_None) {
            return NULL;
        }
        list[i] = tc_var_const(&T->sh->arena, Py_None, -1);
        if (list[i] == NULL) {
            return NULL;
        }
    }
    return tensors ? tc_var_seq(&T->sh->arena, TC_VAR_LIST, n, list) : NULL;
}

/* x[indices] = value through aten.index_put (out of place), written into
 * x: a number becomes a 0-d tensor of x's dtype, as in eager's setitem. */
static int
setitem_advanced(tracer *T, tc_var *x, tc_var *key, tc_var *indices,
                 tc_var *value)
{
    static PyObject *index_put;
    tc_graph *g = T->out->graph;
    char err[256];
    int rc = OK, first = g->nnodes, w;
    if (index_put == NULL) {
        PyObject *ops = PyObject_GetAttrString(tc_torch_module, "ops");
        PyObject *aten = ops ? PyObject_GetAttrString(ops, "aten") : NULL;
        PyObject *ip = aten ? PyObject_GetAttrString(aten, "index_put")
                            : NULL;
        index_put = ip ? PyObject_GetAttrString(ip, "default") : NULL;
        Py_XDECREF(ops);
        Py_XDECREF(aten);
        Py_XDECREF(ip);
        if (index_put == NULL) {
            return ERROR;
        }
    }
    const tc_node *xn = &g->nodes[x->node];
    if (value->kind == TC_VAR_TENSOR) {
        w = value->node;   /* another dtype: eager's index_put_ raises */
    }
    else {
        tc_layout l0 = {0};
        int sc = tc_tr_operand_node(T, value, &rc);
        if (sc < 0) {
            return rc;
        }
        w = tc_graph_full(g, &l0, xn->dtype, sc, err, sizeof(err));
    }
    if (w < 0) {
        return MUT_ERR(T, err);
    }
    tc_var *wv = tc_var_new(&T->sh->arena, TC_VAR_TENSOR, -1);
    if (wv == NULL) {
        return ERROR;
    }
    wv->node = w;
    tc_var *args[3] = {x, indices, wv};
    int sp = T->sp;
    rc = tc_tr_call_generic(T, index_put, args, 3, NULL, 0);
    if (rc == NOT_HANDLED) {
        rc = tc_tr_unsupported(T, "tensor item assignment with advanced "
                               "indices");
    }
    if (rc == OK && T->sp != sp + 1) {
        rc = tc_tr_unsupported(T, "index_put: unexpected result");
    }
    if (rc == OK) {
        tc_var *ops[2] = {key, value};
        rc = write_result(T, x, tc_tr_pop(T), ops, 2, "index_put_", first);
    }
    if (rc != OK) {
        tc_graph_drop_effects(g, first);
    }
    return rc;
}

int
tc_tr_call_out(tracer *T, tc_var *callable, tc_var **args, int nargs,
               PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    int at = -1;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, k),
                                             "out") == 0) {
            at = nargs - (int)nkw + (int)k;
        }
    }
    if (at < 0 || (callable->kind != TC_VAR_OBJECT
                   && callable->kind != TC_VAR_CONST)
        || !PyCFunction_Check(callable->obj)) {
        return NOT_HANDLED;
    }
    int rc = tc_tr_reify(T, args[at]);
    tc_var *out = args[at];
    if (rc != OK || out->kind != TC_VAR_TENSOR) {
        return rc != OK ? rc : NOT_HANDLED;  /* out=(a, b): not traced */
    }
    for (int i = 0; i < nargs && T->grad_mode; i++) {
        if (tc_tr_requires_grad(T, args[i])) {
            /* torch raises there: the call runs in Python for its error */
            return tc_tr_unsupported(T, "out= with an operand that requires "
                                     "grad under grad mode (torch: "
                                     "out= does not support autograd)");
        }
    }
    /* the call again without out=, through the usual dispatch */
    PyObject *kw = PyTuple_New(nkw - 1);
    if (kw == NULL) {
        return ERROR;
    }
    for (Py_ssize_t k = 0, j = 0; k < nkw; k++) {
        if (nargs - nkw + k != at) {
            PyTuple_SET_ITEM(kw, j++, Py_NewRef(PyTuple_GET_ITEM(kwnames, k)));
        }
    }
    tc_var *keep = tc_var_const(&T->sh->arena, kw, -1);  /* owns kw */
    Py_DECREF(kw);
    if (keep == NULL
        || tc_tr_push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1)) != OK
        || tc_tr_push(T, callable) != OK) {
        return ERROR;
    }
    for (int i = 0; i < nargs; i++) {
        if (i != at && tc_tr_push(T, args[i]) != OK) {
            return ERROR;
        }
    }
    T->kwnames = nkw > 1 ? keep->obj : NULL;
    int first = T->out->graph->nnodes;
    if ((rc = tc_tr_op_call(T, nargs - 1)) != OK) {
        return rc;
    }
    tc_var *ops[TC_MAX_CALL_ARGS];
    int nops = 0;
    for (int i = 0; i < nargs && nops < TC_MAX_CALL_ARGS; i++) {
        if (i != at) {
            ops[nops++] = args[i];
        }
    }
    return tc_tr_inplace_result(T, out, ops, nops, first, "out=");
}

int
tc_tr_inplace_result(tracer *T, tc_var *target, tc_var **ops, int nops,
                     int first, const char *what)
{
    if (target->kind != TC_VAR_TENSOR) {
        return tc_tr_unsupported(T, "%s(inplace=True) of a %s", what,
                                 tc_var_kind_name(target));
    }
    int rc = write_result(T, target, tc_tr_pop(T), ops, nops, what, first);
    return rc != OK ? rc : tc_tr_push(T, target);
}

int
tc_tr_setitem(tracer *T, tc_var *container, tc_var *key, tc_var *value)
{
    tc_graph *g = T->out->graph;
    int rc;
    if ((rc = tc_tr_reify(T, key)) != OK) {
        return rc;
    }
    tc_var *indices = advanced_indices(T, key);
    if (indices != NULL) {
        if ((rc = tc_tr_reify(T, value)) != OK) {
            return rc;
        }
        if (value->kind != TC_VAR_TENSOR && value->kind != TC_VAR_CONST) {
            return tc_tr_unsupported(T, "tensor item assignment of %s",
                                     tc_var_kind_name(value));
        }
        return setitem_advanced(T, container, key, indices, value);
    }
    if (PyErr_Occurred()) {
        return ERROR;
    }
    if (tc_tr_push(T, container) != OK || tc_tr_push(T, key) != OK) {
        return ERROR;
    }
    if ((rc = tc_tr_op_subscr(T)) != OK) {
        return rc;
    }
    tc_var *view = tc_tr_pop(T);
    if (view == NULL || view->kind != TC_VAR_TENSOR
        || root_of(g, view->node) != root_of(g, container->node)) {
        return tc_tr_unsupported(T, "tensor item assignment with this mix "
                                 "of basic and advanced indices (not traced "
                                 "yet)");
    }
    if ((rc = tc_tr_reify(T, value)) != OK) {
        return rc;
    }
    if (value->kind != TC_VAR_TENSOR && value->kind != TC_VAR_CONST) {
        return tc_tr_unsupported(T, "tensor item assignment of %s",
                                 tc_var_kind_name(value));
    }
    /* the view var is the subscript's own: rebinding moves it along with
     * every var of the container's storage */
    return assign(T, view, value);
}

/* ---- the exit ------------------------------------------------------------------ */

int
tc_tr_mut_identity(tracer *T, int node)
{
    tc_graph *g = T->out->graph;
    if (T->sh->mut == NULL || node < 0) {
        return node;
    }
    const mut_storage *s = record_of(T, root_of(g, node));
    if (s == NULL || g->nodes[s->ident].kind != TC_NODE_INPUT) {
        return node;
    }
    struct tc_mut_state *m = T->sh->mut;
    for (int i = 0; i < m->nid; i++) {
        if (m->idmap[2 * i] == node) {
            return m->idmap[2 * i + 1];
        }
    }
    if (grow((void **)&m->idmap, &m->idcap, 2 * m->nid + 1, sizeof(int))
        != OK) {
        PyErr_Clear();
        return node;
    }
    int map[2 * 16], nmap = 0;
    int id = view_on(g, node, s->ident, map, &nmap, 16);
    if (id < 0) {
        return node;
    }
    m->idmap[2 * m->nid] = node;
    m->idmap[2 * m->nid++ + 1] = id;
    return id;
}

int
tc_tr_mut_finish(tracer *T)
{
    struct tc_mut_state *m = T->sh->mut;
    tc_graph *g = T->out->graph;
    tc_writebacks *wb = &T->out->wb;
    if (m == NULL || m->nst == 0) {
        return OK;
    }
    /* the value each record's write (or bump) replaced: the storage's
     * previous record's, or its first root; a computed one is stale for
     * the nodes made before that write (graph.h overwritten_at; inputs:
     * the write-back) */
    for (int i = 0; i < m->nst; i++) {
        int old = m->st[i].ident;
        for (int k = i - 1; k >= 0; k--) {
            if (m->st[k].ident == m->st[i].ident) {
                old = m->st[k].cur;
                break;
            }
        }
        tc_node *o = &g->nodes[old];
        if (o->kind == TC_NODE_OP
            && (o->overwritten_at == 0 || m->st[i].first < o->overwritten_at)) {
            o->overwritten_at = m->st[i].first;
        }
    }
    wb->ngw_read = T->sh->ngw_read;
    /* a computed tensor written under no_grad and returned: eager's has
     * its history (requires grad), the graph's value has none */
    for (int j = 0; j < T->nouts && T->sh->ngw != NULL; j++) {
        int o = T->outs[j];
        wb->ngw_read |= o < T->sh->grad_cap && T->sh->ngw[o]
                        && g->nodes[root_of(g, o)].kind != TC_NODE_INPUT;
    }
    wb->items = PyMem_Calloc((size_t)m->nst, sizeof(tc_writeback));
    wb->span = PyMem_Calloc((size_t)g->ninputs + 1, sizeof(int64_t));
    wb->written = PyMem_Calloc((size_t)g->ninputs + 1, 1);
    if (wb->items == NULL || wb->span == NULL || wb->written == NULL) {
        PyErr_NoMemory();
        return ERROR;
    }
    for (int i = m->nst - 1; i >= 0; i--) {
        const mut_storage *s = &m->st[i];
        int seen = 0;
        for (int k = i + 1; k < m->nst; k++) {
            seen |= m->st[k].ident == s->ident;
        }
        if (seen) {
            continue;  /* a later record of the same storage */
        }
        tc_writeback *w = &wb->items[wb->n];
        w->bumps = s->bumps;
        w->grad = s->gradw == 0 ? 0 : s->gradw == s->bumps ? 1 : 2;
        if (g->nodes[s->ident].kind == TC_NODE_INPUT) {
            w->input = g->nodes[s->ident].input_index;
            w->target_rg = s->ident < T->sh->grad_cap
                           && T->sh->grad[s->ident];
            wb->checks_leaf |= w->target_rg && w->grad == 1;
            w->output = tc_tr_output_index(T, s->cur);
            wb->written[w->input] = 1;
            if (w->output < 0) {
                return ERROR;
            }
            wb->n++;
            continue;
        }
        /* a computed tensor: only its version counter, if it is returned
         * (its views share the counter) */
        w->input = -1;
        w->output = -1;
        for (int j = 0; j < T->nouts && w->output < 0; j++) {
            if (root_of(g, T->outs[j]) == s->cur) {
                w->output = j;
            }
        }
        wb->n += w->output >= 0;
    }
    /* the bytes every input's elements span from its data pointer */
    wb->ninputs = g->ninputs;
    for (int i = 0; i < g->nnodes; i++) {
        const tc_node *n = &g->nodes[i];
        if (n->kind != TC_NODE_INPUT) {
            continue;
        }
        int64_t hi = 1;
        for (int d = 0; d < n->layout.ndim; d++) {
            if (n->layout.sizes[d] == 0) {
                hi = 0;
                break;
            }
            hi += (n->layout.sizes[d] - 1) * n->layout.strides[d];
        }
        wb->span[n->input_index] = hi * (int64_t)tc_dtype_size(n->dtype);
    }
    return OK;
}

int
tc_tr_mut_mark_outputs(tc_trace *t)
{
    for (int k = 0; k < t->wb.n; k++) {
        const tc_writeback *w = &t->wb.items[k];
        if (w->input >= 0
            && tc_graph_set_output_write(t->graph, w->output, w->input) < 0) {
            return -1;
        }
    }
    return 0;
}
