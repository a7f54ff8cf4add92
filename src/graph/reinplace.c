/* reinplace.c - writes of a slice of a written-back input done in place
 * (reinplace.h).
 *
 * The pattern is what the tracer's box placement builds (tracer/mutation.c
 * box_place): the new value c of graph input R is
 *
 *     cat_d([view of R: box before], W, [view of R: box after])
 *
 * where the hole W may itself be such a cat along another dim (a box
 * written over several dims), and c is the value written back into R.
 * Each kept piece must be R's own elements of its box, element for
 * element (a view whose root is R, at the box's offset, with R's strides),
 * and R must be dense and laid out like c: then c equals R with the hole's
 * box overwritten by W, and a view of c indexes R's memory as it indexes
 * c.  The rewrite makes c the node write_box(R, W): the runtime copies W
 * into that box of R and returns R itself.
 *
 * Why it is legal: after the rewrite, R's memory holds c's value from the
 * moment write_box runs, so no read of R's old elements may run after it.
 * The pass requires that no node other than c's kept pieces (and nested
 * cats) reads R's memory at all: no op node other than them has R or a
 * view of R (a node whose view_base is R; views read nothing themselves,
 * their readers do) as an operand, and W is neither R nor a view of it.
 * A graph output may be R or a view of R: the runtime returns the input
 * tensor (or an alias of it), which the write-back writes anyway; so an
 * alias sees the write as in eager, and a nested cat is no output.  Every read of
 * R's old value is then one of c's own operands, which write_box no
 * longer reads; so W (computed before write_box runs, as its operand)
 * cannot depend on R's old elements, and nothing runs after write_box
 * that could.  Graph inputs do not alias a written input (the runtime
 * checks it per call, writeback.h tc_writeback_aliased, and runs CPython
 * otherwise), so R's memory is read through R alone.  Reads of c after
 * the write (the cache read back for attention) read R's memory after
 * write_box, as they must.  c is returned by no other output slot: the
 * call's value is R's tensor, which only the write-back may see as c.
 *
 * Exceptions: a node that may raise at run time (tc_node_must_run) and
 * neither feeds W nor reads c could run before or after write_box, and
 * eager, which raised before or after its write, leaves R as it was or
 * written accordingly; the pass leaves such graphs as they are.
 *
 * Not handled (left to the write-back): strided boxes (slice_scatter,
 * step > 1), writes through views that are not boxes of R (select,
 * reshape), several writes of the same input in one graph, inputs of
 * other layouts than c's.
 */
#include "reinplace.h"

#include <stdlib.h>
#include <string.h>

#include "extern.h"
#include "ops.h"

typedef struct {
    int64_t off;                 /* in R's elements, from R's origin */
    int64_t sizes[TC_MAX_DIMS];
} box;

static int
is_op(const tc_graph *g, int id, const char *name)
{
    const tc_node *n = &g->nodes[id];
    return n->kind == TC_NODE_OP && strcmp(tc_ops[n->op].name, name) == 0;
}

/* Strides equal where a dim has more than one element (the only strides
 * an index ever steps). */
static int
same_steps(const tc_layout *a, const tc_layout *b)
{
    if (a->ndim != b->ndim || !tc_layout_same_sizes(a, b)) {
        return 0;
    }
    for (int d = 0; d < a->ndim; d++) {
        if (a->sizes[d] > 1 && a->strides[d] != b->strides[d]) {
            return 0;
        }
    }
    return 1;
}

/* Node p is R's elements in box b, element for element. */
static int
keeps(const tc_graph *g, int p, int R, const box *b)
{
    const tc_node *n = &g->nodes[p];
    const tc_layout *rl = &g->nodes[R].layout;
    if (n->view_base != R || n->dtype != g->nodes[R].dtype
        || n->offset != b->off || n->layout.ndim != rl->ndim) {
        return 0;
    }
    for (int d = 0; d < rl->ndim; d++) {
        if (n->layout.sizes[d] != b->sizes[d]
            || (b->sizes[d] > 1 && n->layout.strides[d] != rl->strides[d])) {
            return 0;
        }
    }
    return 1;
}

/* 1 when node c (of R's dtype and box b's sizes) is R's elements in box b
 * except in one box *wb, where it has node *w's elements; the pieces it
 * reads R through, and nested cats, are marked in used[]. */
static int
match(const tc_graph *g, int c, int R, const box *b, int *w, box *wb,
      char *used)
{
    const tc_node *n = &g->nodes[c];
    const tc_layout *rl = &g->nodes[R].layout;
    int nd = rl->ndim;
    if (!is_op(g, c, "cat") || n->dtype != g->nodes[R].dtype
        || n->layout.ndim != nd) {
        return 0;
    }
    int64_t d = n->xattr[TC_XA_CAT_DIM];
    d += d < 0 ? nd : 0;
    if (d < 0 || d >= nd
        || memcmp(n->layout.sizes, b->sizes, sizeof(int64_t) * nd) != 0) {
        return 0;
    }
    int hole = -1, kept[TC_MAX_OP_INPUTS], nkept = 0;
    box hb = *b;
    int64_t at = 0;
    for (int k = 0; k < n->nin; k++) {
        int p = n->in[k];
        box pb = *b;
        if (g->nodes[p].layout.ndim != nd) {
            return 0;
        }
        pb.sizes[d] = g->nodes[p].layout.sizes[d];
        pb.off = b->off + at * rl->strides[d];
        at += pb.sizes[d];
        if (keeps(g, p, R, &pb)) {
            kept[nkept++] = p;
        }
        else if (hole >= 0) {
            return 0;           /* two holes: not one box */
        }
        else {
            hole = p;
            hb = pb;
        }
    }
    if (hole < 0 || at != b->sizes[d]) {
        return 0;
    }
    if (match(g, hole, R, &hb, w, wb, used)) {
        used[hole] = 1;         /* a box over several dims */
    }
    else {
        *w = hole;
        *wb = hb;
    }
    for (int k = 0; k < nkept; k++) {
        used[kept[k]] = 1;
    }
    return 1;
}

/* What may go wrong once R is written where c is computed (see the top
 * of this file): 1 when nothing. */
static int
legal(const tc_graph *g, int c, int R, int w, int slot, const char *used)
{
    const tc_node *wn = &g->nodes[w];
    if (w == R || wn->view_base == R) {
        return 0;
    }
    if (g->cuda && (g->nodes[R].place == TC_PLACE_HOST
                    || wn->place == TC_PLACE_HOST)) {
        return 0;               /* the host part is split off later */
    }
    for (int j = 0; j < g->noutputs; j++) {
        int o = g->outputs[j];
        if (j != slot && (o == c || (used[o] && g->nodes[o].view_base < 0))) {
            return 0;
        }
    }
    for (int i = 0; i < g->nnodes; i++) {
        const tc_node *n = &g->nodes[i];
        if (i == c || used[i] || n->kind != TC_NODE_OP || n->view_base >= 0) {
            continue;
        }
        for (int k = 0; k < n->nin; k++) {
            int x = n->in[k];
            if (x == R || used[x] || g->nodes[x].view_base == R) {
                return 0;
            }
        }
    }
    /* nodes that may raise: each must feed W or read c */
    char *anc = calloc((size_t)g->nnodes, 2);
    if (anc == NULL) {
        return -1;
    }
    char *desc = anc + g->nnodes;
    anc[w] = 1;
    for (int i = w; i >= 0; i--) {
        for (int k = 0; anc[i] && k < g->nodes[i].nin; k++) {
            anc[g->nodes[i].in[k]] = 1;
        }
    }
    int ok = 1;
    for (int i = 0; ok && i < g->nnodes; i++) {
        for (int k = 0; k < g->nodes[i].nin; k++) {
            int x = g->nodes[i].in[k];
            desc[i] |= x == c || desc[x];
        }
        ok = i == c || anc[i] || desc[i] || !tc_node_must_run(g, i);
    }
    free(anc);
    return ok;
}

/* Output slot j: rewritten (1), left (0), or -1 when out of memory. */
static int
reinplace_slot(tc_graph *g, int j, char *used)
{
    int c = g->outputs[j], R = -1;
    for (int i = 0; i < g->nnodes; i++) {
        if (g->nodes[i].kind == TC_NODE_INPUT
            && g->nodes[i].input_index == g->output_writes[j]) {
            R = i;
        }
    }
    if (R < 0 || !is_op(g, c, "cat")) {
        return 0;
    }
    const tc_layout *rl = &g->nodes[R].layout;
    tc_layout dense;
    tc_layout_like(rl, &dense);
    if (!same_steps(rl, &dense) || !same_steps(rl, &g->nodes[c].layout)) {
        return 0;
    }
    box b = {0};
    memcpy(b.sizes, rl->sizes, sizeof(int64_t) * rl->ndim);
    int w = -1;
    box wb;
    memset(used, 0, (size_t)g->nnodes);
    if (!match(g, c, R, &b, &w, &wb, used)) {
        return 0;
    }
    int ok = legal(g, c, R, w, j, used);
    if (ok <= 0) {
        return ok;
    }
    tc_node *n = &g->nodes[c];
    n->op = tc_op_lookup("write_box");
    n->nin = 2;
    n->in[0] = R;
    n->in[1] = w;
    memset(n->xattr, 0, sizeof(n->xattr));
    n->xattr[TC_XA_BOX_OFFSET] = wb.off;
    n->xfattr = 0;
    return 1;
}

int
tc_graph_reinplace(tc_graph *g)
{
    if (g->output_writes == NULL) {
        return 0;
    }
    char *used = malloc((size_t)g->nnodes + 1);
    if (used == NULL) {
        return -1;
    }
    int n = 0;
    for (int j = 0; j < g->noutputs && n >= 0; j++) {
        if (g->output_writes[j] >= 0) {
            int r = reinplace_slot(g, j, used);
            n = r < 0 ? -1 : n + r;
        }
    }
    free(used);
    /* the views and cats the rewritten values no longer read */
    if (n > 0 && tc_graph_optimize(g) < 0) {
        return -1;
    }
    return n;
}
