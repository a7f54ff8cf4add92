/* schedule.c - fusion and buffer planning: graph -> kernel plan.
 *
 * Materialized nodes (graph outputs, and temporaries that are cheaper to
 * store once than to recompute per broadcast element) are grouped by their
 * sizes and iteration domain; each group is one kernel whose body
 * recomputes every other node it needs in registers.  Loop dims follow the
 * memory order of the first stored output and are coalesced when every
 * argument allows it.
 *
 * Index arithmetic: every value is generated under an affine map from the
 * kernel's iteration domain to the node's logical index (imap).  Pointwise
 * operands get the broadcast map, views compose their own map (graph.h),
 * reductions map their reduced dims onto the kernel's reduction dims.  A
 * load composes the map with the buffer's strides, so views and broadcasts
 * cost nothing.  When a map cannot be built (a reshape that merges dims of
 * a computed node, a reduction whose rows do not line up with the kernel's)
 * the offending node is materialized and scheduling starts again.
 */
#include "schedule.h"
#include "extern.h"
#include "ops.h"
#include "textbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY (-2) /* scheduling must restart: see sched.retry_* */

typedef struct {
    int ndim;                                /* node dims */
    int64_t coef[TC_MAX_DIMS][TC_MAX_DIMS];  /* [node dim][domain dim] */
    int64_t off[TC_MAX_DIMS];
} imap;

typedef struct {
    const tc_graph *g;
    tc_plan *p;
    char *err;
    size_t errlen;
    int *live;       /* node reachable from an output */
    int *buf_of;     /* node -> buffer (materialized ops, inputs), or -1 */
    int *group_of;   /* materialized op node -> group, or -1 */
    int ngroups;
    int *group_rep;  /* group -> its first member (sizes) */
    int *order;      /* groups in execution order */
    int *group_red;  /* group -> its primary reduction node, or -1 */
    int *group_ext;  /* group -> its extern node (a call, no kernel), or -1 */
    int *group_size; /* group -> its materialized members */
    int *level;      /* node -> number of externs on its longest input path */
    /* persistent across retries */
    char *force_mat; /* materialize this node (a temporary) */
    char *solo;      /* this materialized node gets a group of its own */
    int mixed;       /* a node that joined a group of another primary
                        reduction (or of none), -1: isolated (solo) on a
                        retry when the groups form a cycle */
    int joined;      /* else the first node that joined a group it does not
                        lead (two pointwise [n, 1] nodes, one before and
                        one after a reduction over [n, k]) */
    int retry_node, retry_solo;
} sched;

static int
serr(sched *s, const char *fmt, ...)
{
    if (s->err && s->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->err, s->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int
oom(sched *s)
{
    return serr(s, "out of memory while scheduling");
}

static int
retry(sched *s, int node, int solo)
{
    s->retry_node = node;
    s->retry_solo = solo;
    return RETRY;
}

/* ---- analysis -------------------------------------------------------- */

static int
op_kind(const tc_graph *g, int id)
{
    const tc_node *n = &g->nodes[id];
    return n->kind == TC_NODE_OP ? (int)tc_ops[n->op].kind : -1;
}

static int
is_view(const tc_graph *g, int id)
{
    return op_kind(g, id) == TC_OPK_VIEW;
}

static int
is_reduction(const tc_graph *g, int id)
{
    return op_kind(g, id) == TC_OPK_REDUCTION;
}

static void
mark_live(sched *s)
{
    const tc_graph *g = s->g;
    for (int j = 0; j < g->noutputs; j++) {
        s->live[g->outputs[j]] = 1;
    }
    for (int i = g->nnodes - 1; i >= 0; i--) {
        s->live[i] |= tc_node_must_run(g, i);
        if (!s->live[i]) {
            continue;
        }
        for (int k = 0; k < g->nodes[i].nin; k++) {
            s->live[g->nodes[i].in[k]] = 1;
        }
    }
}

/* Kernels group only nodes of one level: a kernel that held a node before
 * an extern and one after it could run neither before nor after it. */
static void
compute_levels(sched *s)
{
    const tc_graph *g = s->g;
    for (int i = 0; i < g->nnodes; i++) {
        int l = 0;
        for (int k = 0; k < g->nodes[i].nin; k++) {
            int lk = s->level[g->nodes[i].in[k]];
            l = lk > l ? lk : l;
        }
        s->level[i] = l + tc_node_is_extern(g, i);
    }
}

static int
is_graph_output(const tc_graph *g, int id)
{
    for (int j = 0; j < g->noutputs; j++) {
        if (g->outputs[j] == id) {
            return 1;
        }
    }
    return 0;
}

/* Worth a temporary: more than a cast, and a consumer broadcasts it to at
 * least 4x its elements. */
static int
wants_temp(const tc_graph *g, int id, const int64_t *max_consumer)
{
    const tc_node *n = &g->nodes[id];
    int64_t numel = tc_layout_numel(&n->layout);
    if (tc_ops[n->op].promote == TC_PROMOTE_CAST) {
        return 0;  /* casts, and creation ops (full, arange) */
    }
    return numel < max_consumer[id] && numel * 4 <= max_consumer[id];
}

static int recompute_leaves(const sched *s, int i, int *leaves);

/* Worth a temporary too: a kernel after an extern needs it and would
 * recompute it from two or more distinct full-size tensors.  Stored once,
 * it is one read there.  Without this a transformer's residual stream,
 * read after every block's matmuls, was recomputed in each later block
 * from all earlier blocks' outputs: kernels with O(depth) operands,
 * O(depth^2) work for a model traced as one graph.  A chain over one
 * tensor (GELU's derivative from its saved input, read after the
 * backward's matmul) is not stored: recomputed in the kernel after the
 * matmul it costs that one read, stored it costs a write and a read more
 * and a kernel of its own. */
static int
crosses_externs(const sched *s, int id, const int *maxlvl, int *leaves)
{
    return maxlvl[id] > s->level[id] && recompute_leaves(s, id, leaves) >= 2;
}

static int
add_buffer(sched *s, tc_buf_kind kind, int index, tc_dtype dt,
           const tc_layout *layout)
{
    tc_plan *p = s->p;
    tc_buffer *b = realloc(p->buffers, sizeof(tc_buffer) * (p->nbuffers + 1));
    if (!b) {
        return oom(s);
    }
    p->buffers = b;
    b[p->nbuffers].kind = kind;
    b[p->nbuffers].index = index;
    b[p->nbuffers].dtype = dt;
    b[p->nbuffers].layout = *layout;
    return p->nbuffers++;
}

static int
plan_input_buffers(sched *s)
{
    const tc_graph *g = s->g;
    tc_layout empty = {0};
    for (int k = 0; k < g->ninputs; k++) {
        if (add_buffer(s, TC_BUF_INPUT, k, TC_F32, &empty) < 0) {
            return -1;
        }
    }
    for (int i = 0; i < g->nnodes; i++) {
        const tc_node *n = &g->nodes[i];
        if (n->kind == TC_NODE_INPUT) {
            tc_buffer *b = &s->p->buffers[n->input_index];
            b->dtype = n->dtype;
            b->layout = n->layout;
            s->buf_of[i] = n->input_index;
        }
    }
    return 0;
}

/* Nodes that must exist as tensors: a graph output that is a view of a
 * computed node needs its base stored (with its eager layout, which the
 * view's strides index into); an operand of an extern op is stored itself,
 * or its base when it is a view. */
static void
mark_tensor_backed(const sched *s, int id, char *base_out)
{
    const tc_graph *g = s->g;
    int base = is_view(g, id) ? g->nodes[id].view_base : id;
    if (g->nodes[base].kind == TC_NODE_OP) {
        base_out[base] = 1;
    }
}

static void
mark_tensor_bases(const sched *s, char *base_out)
{
    const tc_graph *g = s->g;
    for (int j = 0; j < g->noutputs; j++) {
        if (is_view(g, g->outputs[j])) {
            mark_tensor_backed(s, g->outputs[j], base_out);
        }
    }
    for (int i = 0; i < g->nnodes; i++) {
        if (s->live[i] && tc_node_is_extern(g, i)) {
            for (int k = 0; k < g->nodes[i].nin; k++) {
                mark_tensor_backed(s, g->nodes[i].in[k], base_out);
            }
        }
    }
}

/* maxlvl[i]: the highest level of a kernel node reading node i (through
 * views), -1 if none. */
static void
consumer_levels(const sched *s, int *maxlvl)
{
    const tc_graph *g = s->g;
    for (int i = 0; i < g->nnodes; i++) {
        maxlvl[i] = -1;
    }
    for (int j = 0; j < g->nnodes; j++) {
        if (!s->live[j] || is_view(g, j)) {
            continue;
        }
        for (int k = 0; k < g->nodes[j].nin; k++) {
            int t = g->nodes[j].in[k];
            while (is_view(g, t)) {
                t = g->nodes[t].in[0];
            }
            if (maxlvl[t] < s->level[j]) {
                maxlvl[t] = s->level[j];
            }
        }
    }
}

/* Add tensor x to the leaf set l (at most two kept: callers only ask
 * whether recomputing a node reads two or more). */
static void
leaf_add(int *l, int x)
{
    if (x >= 0 && l[0] != x && l[1] != x) {
        if (l[0] < 0) {
            l[0] = x;
        } else if (l[1] < 0) {
            l[1] = x;
        }
    }
}

/* Distinct full-size tensors that recomputing unstored node i reads, up
 * to two, into leaves[2 * i ..]: stored operands (and views) of i's size
 * are one each, unstored ones bring their own.  Scalars and broadcast
 * operands are free.  Returns how many (0, 1 or 2). */
static int
recompute_leaves(const sched *s, int i, int *leaves)
{
    const tc_graph *g = s->g;
    const tc_node *n = &g->nodes[i];
    int64_t numel = tc_layout_numel(&n->layout);
    int *l = &leaves[2 * i];
    l[0] = l[1] = -1;
    for (int k = 0; k < n->nin; k++) {
        int x = n->in[k];
        const tc_node *xn = &g->nodes[x];
        if (xn->kind == TC_NODE_OP && s->buf_of[x] < 0 && !is_view(g, x)) {
            leaf_add(l, leaves[2 * x]);
            leaf_add(l, leaves[2 * x + 1]);
        }
        else if (xn->kind != TC_NODE_SCALAR
                 && tc_layout_numel(&xn->layout) >= numel) {
            leaf_add(l, x);
        }
    }
    return (l[0] >= 0) + (l[1] >= 0);
}

/* In-place writes (graph.h output_writes): node c, the value of an output
 * written back into graph input b after the run, is stored straight into
 * b's memory when no kernel can read b's old elements after c's kernel
 * writes them.  Sufficient, and checked here on the graph alone: every
 * live reader of b is a pointwise node of b's sizes that reads b itself
 * (no view of it) on a path of such nodes to c, and every node of those
 * paths that depends on b is consumed only on them, and no reduction
 * depends on b or c.  Then each read of b runs in a kernel before c's or
 * in c's own (one pass), at the element c writes there.  The buffer of
 * b, or -1. */
static int
inplace_buffer(const sched *s, int c)
{
    const tc_graph *g = s->g;
    int slot = -1, b = -1, ok = 1;
    if (g->output_writes == NULL || op_kind(g, c) != TC_OPK_POINTWISE) {
        return -1;
    }
    for (int j = 0; j < g->noutputs; j++) {
        if (g->outputs[j] == c) {
            ok &= slot < 0;     /* one slot only: it returns b's tensor */
            slot = j;
        }
    }
    for (int i = 0; ok && slot >= 0 && i < g->nnodes; i++) {
        if (g->nodes[i].kind == TC_NODE_INPUT
            && g->nodes[i].input_index == g->output_writes[slot]) {
            b = i;
        }
    }
    if (!ok || b < 0) {
        return -1;
    }
    const tc_layout *bl = &g->nodes[b].layout, *cl = &g->nodes[c].layout;
    tc_layout dense;
    tc_layout_like(bl, &dense);
    if (g->nodes[b].dtype != g->nodes[c].dtype
        || !tc_layout_same_sizes(bl, cl) || !tc_layout_same_strides(bl, cl)
        || !tc_layout_same_sizes(bl, &dense)
        || !tc_layout_same_strides(bl, &dense)) {
        return -1;
    }
    /* on[n]: n is c or on a path of pointwise nodes of b's sizes to c;
     * dep[n] bit 0: such a node that depends on b; bit 1: any node that
     * depends on b or c */
    char *on = calloc((size_t)g->nnodes, 1), *dep = calloc((size_t)g->nnodes, 1);
    if (on == NULL || dep == NULL) {
        free(on), free(dep);
        return -1;
    }
    on[c] = 1;
    for (int n = c; n >= 0; n--) {
        for (int k = 0; on[n] && k < g->nodes[n].nin; k++) {
            int x = g->nodes[n].in[k];
            on[x] |= op_kind(g, x) == TC_OPK_POINTWISE
                     && tc_layout_same_sizes(&g->nodes[x].layout, bl);
        }
    }
    for (int n = 0; ok && n < g->nnodes; n++) {
        const tc_node *nd = &g->nodes[n];
        if (!s->live[n] || nd->kind != TC_NODE_OP) {
            continue;
        }
        if (nd->view_base == b || nd->view_base == c) {
            /* a view of b is read somewhere; or one of c, which a kernel
             * c joins recomputes from b at the view's index, after c's
             * store overwrote b there (exp_ then .t(): fuzz seed 93370) */
            ok = 0;
        }
        for (int k = 0; ok && k < nd->nin; k++) {
            int x = nd->in[k];
            if (x != c && (x == b || (dep[x] & 1))) {
                ok = on[n];     /* read off the paths to c */
                dep[n] |= 1;
            }
            /* c's value may be read anywhere, from its buffer; but a
             * reduction kernel that c joins recomputes it from b in its
             * later passes, after the first pass stored it into b */
            dep[n] |= (x == b || x == c || dep[x]) ? 2 : 0;
        }
        if (ok && (dep[n] & 2) && op_kind(g, n) == TC_OPK_REDUCTION) {
            ok = 0;
        }
    }
    free(on), free(dep);
    return ok ? s->buf_of[b] : -1;
}

static int
plan_op_buffers(sched *s)
{
    const tc_graph *g = s->g;
    int64_t *maxc = calloc(g->nnodes + 1, sizeof(int64_t));
    int *leaves = malloc(sizeof(int) * 2 * (g->nnodes + 1));
    int *maxlvl = calloc(g->nnodes + 1, sizeof(int));
    char *has_red = calloc(g->nnodes + 1, 1);
    char *base_out = calloc(g->nnodes + 1, 1);
    char *viewed = calloc(g->nnodes + 1, 1);
    if (!maxc || !leaves || !maxlvl || !has_red || !base_out || !viewed) {
        free(maxc), free(leaves), free(maxlvl), free(has_red), free(base_out);
        free(viewed);
        return oom(s);
    }
    mark_tensor_bases(s, base_out);
    for (int i = 0; i < g->nnodes; i++) {
        if (s->live[i] && is_view(g, i)) {
            viewed[g->nodes[i].view_base] = 1;
        }
    }
    consumer_levels(s, maxlvl);
    for (int i = 0; i < g->nnodes; i++) {
        const tc_node *n = &g->nodes[i];
        int64_t numel = tc_layout_numel(&n->layout);
        has_red[i] = is_reduction(g, i);
        for (int k = 0; k < n->nin; k++) {
            /* an extern's result is stored: no reduction recomputed */
            has_red[i] |= has_red[n->in[k]] && !tc_node_is_extern(g, i);
            if (s->live[i] && maxc[n->in[k]] < numel) {
                maxc[n->in[k]] = numel;
            }
        }
    }
    int rc = 0;
    for (int i = 0; i < g->nnodes && rc == 0; i++) {
        const tc_node *n = &g->nodes[i];
        if (!s->live[i] || n->kind != TC_NODE_OP || is_view(g, i)) {
            continue;
        }
        int into = -1;
        if (tc_node_is_extern(g, i)) {
            rc = add_buffer(s, TC_BUF_EXTERN, i, n->dtype, &n->layout);
        } else if ((into = inplace_buffer(s, i)) >= 0) {
            rc = into;          /* the kernel writes the input itself */
        } else if (is_graph_output(g, i) || base_out[i]) {
            rc = add_buffer(s, TC_BUF_OUTPUT, i, n->dtype, &n->layout);
        } else if (s->force_mat[i]) {
            rc = add_buffer(s, TC_BUF_TEMP, i, n->dtype, &n->layout);
        } else if (!is_reduction(g, i) && !has_red[i] &&
                   (wants_temp(g, i, maxc) || crosses_externs(s, i, maxlvl,
                                                               leaves))) {
            /* dense in row-major order, unless a view of i is read: its
             * strides index into i's eager layout (leaf_load), so the
             * buffer keeps that (maxvit's window partition, a permuted
             * sum's view chain read after a matmul) */
            tc_layout l = n->layout;
            if (!viewed[i]) {
                tc_layout_contiguous(&l);
            }
            rc = add_buffer(s, TC_BUF_TEMP, i, n->dtype, &l);
        } else {
            recompute_leaves(s, i, leaves);
            continue;
        }
        s->buf_of[i] = rc;
        rc = rc < 0 ? -1 : 0;
    }
    free(maxc), free(leaves), free(maxlvl), free(has_red), free(base_out);
    free(viewed);
    return rc;
}

/* Whether the chain of views from id down to its base passes a node that
 * autograd does not flow through (detach()'s alias, graph.h). */
static int
view_chain_detached(const tc_graph *g, int id)
{
    while (is_view(g, id)) {
        if (g->nodes[id].detached) {
            return 1;
        }
        id = g->nodes[id].in[0];
    }
    return 0;
}

/* A graph output or extern operand: its buffer, or a view of the buffer's
 * tensor. */
static void
tensor_ref(const sched *s, int id, tc_output_desc *o)
{
    const tc_node *n = &s->g->nodes[id];
    memset(o, 0, sizeof(*o));
    o->is_view = is_view(s->g, id);
    o->buffer = s->buf_of[o->is_view ? n->view_base : id];
    o->layout = n->layout;
    o->offset = o->is_view ? n->offset : 0;
    o->detached = o->is_view && view_chain_detached(s->g, id);
}

static int
plan_outputs(sched *s)
{
    const tc_graph *g = s->g;
    tc_plan *p = s->p;
    int n = g->noutputs ? g->noutputs : 1;
    p->output_buffer = malloc(sizeof(int) * n);
    p->outputs = calloc(n, sizeof(tc_output_desc));
    if (!p->output_buffer || !p->outputs) {
        return oom(s);
    }
    p->noutputs = g->noutputs;
    for (int j = 0; j < g->noutputs; j++) {
        int id = g->outputs[j];
        const tc_node *nd = &g->nodes[id];
        if (nd->kind == TC_NODE_SCALAR) {
            return serr(s, "graph output %d is a Python number, not a tensor",
                        j);
        }
        tensor_ref(s, id, &p->outputs[j]);
        p->output_buffer[j] = p->outputs[j].buffer;
    }
    return 0;
}

static int
is_materialized_op(const sched *s, int id)
{
    return s->g->nodes[id].kind == TC_NODE_OP && s->buf_of[id] >= 0;
}

/* First reduction computed inline under id (depth first), or -1. */
static int
find_reduction(const sched *s, int id, char *seen)
{
    const tc_graph *g = s->g;
    if (seen[id]) {
        return -1;
    }
    seen[id] = 1;
    if (is_reduction(g, id)) {
        return id;
    }
    for (int k = 0; k < g->nodes[id].nin; k++) {
        int x = g->nodes[id].in[k];
        if (g->nodes[x].kind != TC_NODE_OP || is_materialized_op(s, x)) {
            continue;
        }
        int r = find_reduction(s, x, seen);
        if (r >= 0) {
            return r;
        }
    }
    return -1;
}

static int
same_sizes(const tc_layout *a, const tc_layout *b)
{
    return a->ndim == b->ndim &&
           !memcmp(a->sizes, b->sizes, sizeof(int64_t) * a->ndim);
}

/* Primary reduction of member i (the kernel's iteration domain is its
 * input's shape), -1 for a pointwise kernel, RETRY if i's shape is neither
 * the domain nor the reduction's row shape. */
static int
member_reduction(sched *s, int i, char *seen)
{
    const tc_graph *g = s->g;
    memset(seen, 0, g->nnodes + 1);
    int r = find_reduction(s, i, seen);
    if (r < 0) {
        return -1;
    }
    const tc_layout *l = &g->nodes[i].layout;
    if (same_sizes(l, &g->nodes[g->nodes[r].in[0]].layout) ||
        same_sizes(l, &g->nodes[r].layout)) {
        return r;
    }
    return retry(s, r, 0);
}

/* The shape a group's kernel iterates over: its reduction's input, or
 * its members' shape. */
static const tc_layout *
group_domain(const sched *s, int q)
{
    const tc_graph *g = s->g;
    int rq = s->group_red[q];
    return rq >= 0 ? &g->nodes[g->nodes[rq].in[0]].layout
                   : &g->nodes[s->group_rep[q]].layout;
}

/* Can materialized node i (primary reduction r, or -1) join group q?
 * Same level, and the same iteration domain: pointwise kernels of one
 * shape; reduction kernels over the same rows.  A pointwise member whose
 * shape is a reduction kernel's domain joins it too (its store goes into
 * the first pass), as does a reduction over a pointwise group's shape:
 * the residual add before a layer_norm is stored by the layer_norm's
 * kernel instead of a kernel of its own. */
/* Members of one kernel at most: each stores a buffer and loads its own;
 * an optimizer step over a model's same-shaped parameters (GPT-2's 74
 * vectors of 768) would otherwise be one kernel of ~700 pointers, past
 * CUDA's 4 KB of kernel parameters. */
#define GROUP_MAX_MEMBERS 48

static int
group_accepts(const sched *s, int q, int i, int r)
{
    const tc_graph *g = s->g;
    int rep = s->group_rep[q], rq = s->group_red[q];
    if (s->solo[rep] || s->group_ext[q] >= 0 || s->level[rep] != s->level[i]
        || s->group_size[q] >= GROUP_MAX_MEMBERS) {
        return 0;
    }
    if (rq >= 0 && r >= 0) {
        return g->nodes[rq].red_mask == g->nodes[r].red_mask
               && same_sizes(group_domain(s, q),
                             &g->nodes[g->nodes[r].in[0]].layout);
    }
    const tc_layout *mine = r >= 0 ? &g->nodes[g->nodes[r].in[0]].layout
                                   : &g->nodes[i].layout;
    return same_sizes(group_domain(s, q), mine);
}

static int
make_groups(sched *s)
{
    const tc_graph *g = s->g;
    char *seen = malloc(g->nnodes + 1);
    if (!seen) {
        return oom(s);
    }
    for (int i = 0; i < g->nnodes; i++) {
        if (!is_materialized_op(s, i)) {
            continue;
        }
        if (tc_node_is_extern(g, i)) {
            s->group_rep[s->ngroups] = i;
            s->group_red[s->ngroups] = -1;
            s->group_ext[s->ngroups] = i;
            s->group_size[s->ngroups] = 1;
            s->group_of[i] = s->ngroups++;
            continue;
        }
        int r = member_reduction(s, i, seen);
        if (r == RETRY) {
            free(seen);
            return RETRY;
        }
        int grp = -1;
        for (int q = 0; q < s->ngroups && grp < 0 && !s->solo[i]; q++) {
            grp = group_accepts(s, q, i, r) ? q : -1;
        }
        if (grp < 0) {
            grp = s->ngroups++;
            s->group_rep[grp] = i;
            s->group_red[grp] = r;
            s->group_ext[grp] = -1;
            s->group_size[grp] = 0;
        }
        else if (s->group_red[grp] < 0 && r >= 0) {
            s->group_red[grp] = r;  /* a pointwise group becomes a reduction */
        }
        if (s->group_red[grp] >= 0 && (r < 0 || s->group_red[grp] != r)
            && s->mixed < 0) {
            s->mixed = i;   /* isolated first if the groups form a cycle */
        }
        if (s->group_rep[grp] != i && s->joined < 0) {
            s->joined = i;
        }
        s->group_of[i] = grp;
        s->group_size[grp]++;
    }
    free(seen);
    return 0;
}

/* deps[q * ngroups + r] = 1 if group q loads a buffer group r stores. */
static void
collect_deps(const sched *s, int q, int id, int *seen, char *deps)
{
    const tc_node *n = &s->g->nodes[id];
    if (seen[id] == q + 1) {
        return;
    }
    seen[id] = q + 1;
    for (int k = 0; k < n->nin; k++) {
        int x = n->in[k];
        if (s->g->nodes[x].kind != TC_NODE_OP) {
            continue;
        }
        if (is_materialized_op(s, x) && s->group_of[x] != q) {
            deps[q * s->ngroups + s->group_of[x]] = 1;
        } else {
            collect_deps(s, q, x, seen, deps);
        }
    }
}

/* Kahn's algorithm, lowest group first, so order follows the graph. */
static int
order_groups(sched *s)
{
    const tc_graph *g = s->g;
    int ng = s->ngroups;
    char *deps = calloc((size_t)ng * ng + 1, 1);
    int *seen = calloc(g->nnodes + 1, sizeof(int));
    char *done = calloc(ng + 1, 1);
    if (!deps || !seen || !done) {
        free(deps), free(seen), free(done);
        return oom(s);
    }
    for (int i = 0, prev = -1; i < g->nnodes; i++) {
        if (is_materialized_op(s, i)) {
            collect_deps(s, s->group_of[i], i, seen, deps);
        }
        if (s->live[i] && tc_node_has_effects(g, i)) {
            /* program order among calls that may consume the random
             * stream or raise (extern.h) */
            if (prev >= 0) {
                deps[s->group_of[i] * ng + s->group_of[prev]] = 1;
            }
            prev = i;
        }
    }
    int n = 0;
    while (n < ng) {
        int pick = -1;
        for (int q = 0; q < ng && pick < 0; q++) {
            int ready = !done[q];
            for (int r = 0; r < ng && ready; r++) {
                ready = !(deps[q * ng + r] && !done[r]);
            }
            pick = ready ? q : -1;
        }
        if (pick < 0) {
            break;
        }
        done[pick] = 1;
        s->order[n++] = pick;
    }
    free(deps), free(seen), free(done);
    if (n < ng && (s->mixed >= 0 || s->joined >= 0)) {
        return retry(s, s->mixed >= 0 ? s->mixed : s->joined, 1);
    }
    return n == ng ? 0 : serr(s, "cyclic kernel dependencies");
}

/* ---- kernel generation ----------------------------------------------- */

typedef struct {
    int node;
    imap map;
    int value;      /* emitted value, or level (analysis) */
    int persistent; /* defined outside a reduction body */
} centry;

typedef struct {
    centry *v;
    int n, cap;
} cache;

typedef struct {
    int node;
    imap map;       /* domain -> the reduction's output index */
    int body;       /* phase whose body updates it */
    int acc;        /* KOP_ACC id */
} redinfo;

typedef struct {
    sched *s;
    int group;
    tc_kernel *k;
    tc_kbuilder kb;
    int ndom;                         /* iteration domain dims */
    int64_t dom[TC_MAX_DIMS];
    int nred;                         /* domain dims that are reduced ... */
    int red_dims[TC_MAX_DIMS];        /* ... in logical order */
    unsigned red_mask;                /* over domain dims */
    int64_t (*full)[TC_MAX_DIMS];     /* slot -> strides over domain dims */
    int *slot_key;                    /* slot -> buffer */
    cache vals, levels;
    redinfo *reds;
    int nreds;
    int in_body;
    char *used;                       /* op nodes this kernel implements */
} kgen;

static int
map_eq(const imap *a, const imap *b, int ndom)
{
    if (a->ndim != b->ndim) {
        return 0;
    }
    for (int d = 0; d < a->ndim; d++) {
        if (a->off[d] != b->off[d] ||
            memcmp(a->coef[d], b->coef[d], sizeof(int64_t) * ndom)) {
            return 0;
        }
    }
    return 1;
}

static centry *
cache_find(kgen *kg, cache *c, int node, const imap *m)
{
    for (int i = c->n - 1; i >= 0; i--) {
        if (c->v[i].node == node && map_eq(&c->v[i].map, m, kg->ndom)) {
            return &c->v[i];
        }
    }
    return NULL;
}

static int
cache_put(kgen *kg, cache *c, int node, const imap *m, int value,
          int persistent)
{
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 32;
        centry *v = realloc(c->v, sizeof(centry) * cap);
        if (!v) {
            return oom(kg->s);
        }
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n].node = node;
    c->v[c->n].map = *m;
    c->v[c->n].value = value;
    c->v[c->n].persistent = persistent;
    c->n++;
    return 0;
}

/* Drop values defined inside a reduction body (not visible afterwards). */
static void
cache_drop_local(cache *c)
{
    int m = 0;
    for (int i = 0; i < c->n; i++) {
        if (c->v[i].persistent) {
            c->v[m++] = c->v[i];
        }
    }
    c->n = m;
}

/* The node's value does not vary along the reduction dims. */
static int
is_rowscalar(const kgen *kg, const imap *m)
{
    for (int d = 0; d < m->ndim; d++) {
        for (int j = 0; j < kg->nred; j++) {
            /* size-1 reduction dims only ever take index 0 */
            if (m->coef[d][kg->red_dims[j]] && kg->dom[kg->red_dims[j]] != 1) {
                return 0;
            }
        }
    }
    return 1;
}

/* Map of pointwise operand x of a node with layout nl under map m. */
static void
operand_map(const tc_layout *xl, const tc_layout *nl, const imap *m,
            imap *out)
{
    memset(out, 0, sizeof(*out));
    out->ndim = xl->ndim;
    for (int xd = 0; xd < xl->ndim; xd++) {
        int nd = xd + nl->ndim - xl->ndim;
        if (xl->sizes[xd] == 1) {
            continue; /* broadcast: index 0 */
        }
        memcpy(out->coef[xd], m->coef[nd], sizeof(out->coef[xd]));
        out->off[xd] = m->off[nd];
    }
}

/* Map of a view's source under the view's map m. */
static void
view_source_map(const tc_node *v, const tc_layout *src, const imap *m,
                imap *out)
{
    memset(out, 0, sizeof(*out));
    out->ndim = src->ndim;
    for (int d = 0; d < src->ndim; d++) {
        out->off[d] = v->voff[d];
    }
    for (int e = 0; e < v->layout.ndim; e++) {
        int d = v->vsrc[e];
        if (d < 0) {
            continue;
        }
        for (int j = 0; j < TC_MAX_DIMS; j++) {
            out->coef[d][j] += v->vcoef[e] * m->coef[e][j];
        }
        out->off[d] += v->vcoef[e] * m->off[e];
    }
}

/* Map of a reduction's input: kept dims from m, reduced dim j of the input
 * onto the kernel's reduction dim j.  RETRY (materialize it) when the
 * reduction's rows do not line up with the kernel's. */
static int
reduction_input_map(kgen *kg, int id, const imap *m, imap *out)
{
    const tc_graph *g = kg->s->g;
    const tc_node *r = &g->nodes[id];
    const tc_layout *xl = &g->nodes[r->in[0]].layout;
    int nr = 0;
    for (int d = 0; d < xl->ndim; d++) {
        nr += (r->red_mask >> d) & 1;
    }
    int ok = is_rowscalar(kg, m) && nr == kg->nred;
    for (int d = 0, j = 0; ok && d < xl->ndim; d++) {
        if (r->red_mask & (1u << d)) {
            ok = xl->sizes[d] == kg->dom[kg->red_dims[j++]];
        }
    }
    if (!ok) {
        return retry(kg->s, id, kg->s->buf_of[id] >= 0);
    }
    memset(out, 0, sizeof(*out));
    out->ndim = xl->ndim;
    for (int d = 0, j = 0, k = 0; d < xl->ndim; d++) {
        if (r->red_mask & (1u << d)) {
            out->coef[d][kg->red_dims[j++]] = 1;
            k += r->keepdim;
        } else {
            memcpy(out->coef[d], m->coef[k], sizeof(out->coef[d]));
            out->off[d] = m->off[k++];
        }
    }
    return 0;
}

/* Node id read from a buffer in this kernel: an input, or a node stored by
 * another kernel. */
static int
is_leaf(const kgen *kg, int id)
{
    const sched *s = kg->s;
    return s->g->nodes[id].kind == TC_NODE_INPUT ||
           (is_materialized_op(s, id) && s->group_of[id] != kg->group);
}

static int
arg_slot(kgen *kg, int buffer, int is_output, const int64_t *full,
         int64_t offset)
{
    tc_kernel *k = kg->k;
    for (int a = 0; a < k->nargs; a++) {
        if (kg->slot_key[a] == buffer && k->args[a].is_output == is_output &&
            k->args[a].offset == offset &&
            !memcmp(kg->full[a], full, sizeof(int64_t) * kg->ndom)) {
            return a;
        }
    }
    tc_karg *a = &k->args[k->nargs];
    memset(a, 0, sizeof(*a));
    a->buffer = buffer;
    a->dtype = buffer == TC_KARG_INDEX ? TC_I64
                                       : kg->s->p->buffers[buffer].dtype;
    a->is_output = is_output;
    a->offset = offset;
    kg->slot_key[k->nargs] = buffer;
    memset(kg->full[k->nargs], 0, sizeof(kg->full[0]));
    memcpy(kg->full[k->nargs], full, sizeof(int64_t) * kg->ndom);
    return k->nargs++;
}

/* Slot of buffer seen through strides/offset (elements) under map m. */
static int
mapped_slot(kgen *kg, int buffer, int is_output, const int64_t *strides,
            int64_t offset, const imap *m)
{
    int64_t full[TC_MAX_DIMS] = {0};
    for (int d = 0; d < m->ndim; d++) {
        for (int e = 0; e < kg->ndom; e++) {
            full[e] += strides[d] * m->coef[d][e];
        }
        offset += strides[d] * m->off[d];
    }
    return arg_slot(kg, buffer, is_output, full, offset);
}

static int
leaf_load(kgen *kg, int id, const imap *m)
{
    const sched *s = kg->s;
    const tc_node *n = &s->g->nodes[id];
    int slot;
    if (is_view(s->g, id)) {
        slot = mapped_slot(kg, s->buf_of[n->view_base], 0, n->layout.strides,
                           n->offset, m);
    } else {
        slot = mapped_slot(kg, s->buf_of[id], 0,
                           s->p->buffers[s->buf_of[id]].layout.strides, 0, m);
    }
    return kb_cast(&kg->kb, kb_load(&kg->kb, slot, n->dtype),
                   tc_dtype_opmath(n->dtype));
}

/* A view reads its base in place when the base is a buffer here. */
static int
view_is_leaf(const kgen *kg, int id)
{
    return is_view(kg->s->g, id) && is_leaf(kg, kg->s->g->nodes[id].view_base);
}

static redinfo *
find_red(kgen *kg, int id, const imap *m)
{
    for (int i = 0; i < kg->nreds; i++) {
        if (kg->reds[i].node == id && map_eq(&kg->reds[i].map, m, kg->ndom)) {
            return &kg->reds[i];
        }
    }
    return NULL;
}

/* ---- analysis pass: reductions of this kernel and their phases -------- */

static int level_of(kgen *kg, int id, const imap *m);

static int
view_step(kgen *kg, int id, const imap *m, imap *src)
{
    const tc_graph *g = kg->s->g;
    const tc_node *n = &g->nodes[id];
    if (!n->vmap_affine) {
        int base = n->view_base;
        return retry(kg->s, base, kg->s->buf_of[base] >= 0);
    }
    view_source_map(n, &g->nodes[n->in[0]].layout, m, src);
    return 0;
}

/* Phase from which the value of id under m is available: 0 for anything
 * not depending on a reduction, body + 1 for a reduction. */
static int
level_of(kgen *kg, int id, const imap *m)
{
    const tc_graph *g = kg->s->g;
    const tc_node *n = &g->nodes[id];
    if (n->kind != TC_NODE_OP || is_leaf(kg, id) || view_is_leaf(kg, id)) {
        return 0;
    }
    centry *c = cache_find(kg, &kg->levels, id, m);
    if (c) {
        return c->value;
    }
    int lv = 0;
    imap sub;
    if (is_view(g, id)) {
        lv = view_step(kg, id, m, &sub);
        lv = lv < 0 ? lv : level_of(kg, n->in[0], &sub);
    } else if (is_reduction(g, id)) {
        int body = reduction_input_map(kg, id, m, &sub);
        body = body < 0 ? body : level_of(kg, n->in[0], &sub);
        if (body < 0) {
            return body;
        }
        redinfo *r = realloc(kg->reds, sizeof(redinfo) * (kg->nreds + 1));
        if (!r) {
            return oom(kg->s);
        }
        kg->reds = r;
        r[kg->nreds].node = id;
        r[kg->nreds].map = *m;
        r[kg->nreds].body = body;
        r[kg->nreds].acc = -1;
        kg->nreds++;
        lv = body + 1;
    } else if (tc_ops[n->op].index_arg && kg->s->group_red[kg->group] >= 0) {
        /* reduction kernels have no index arguments (kir.h): read it from
         * a buffer a pointwise kernel stores.  Materializing it is not
         * enough when it is stored here already (a graph output, as the
         * positions a training graph saves, or a temporary of a retry
         * before) and its shape is this kernel's domain, as with
         * (x * arange(n)).sum(): then it leaves the group */
        return retry(kg->s, id, kg->s->buf_of[id] >= 0);
    } else {
        for (int k = 0; k < n->nin && lv >= 0; k++) {
            const tc_node *x = &g->nodes[n->in[k]];
            if (x->kind == TC_NODE_SCALAR) {
                continue;
            }
            operand_map(&x->layout, &n->layout, m, &sub);
            int l = level_of(kg, n->in[k], &sub);
            lv = l < 0 ? l : (l > lv ? l : lv);
        }
    }
    if (lv >= 0 && cache_put(kg, &kg->levels, id, m, lv, 1) < 0) {
        return -1;
    }
    return lv;
}

/* ---- emission -------------------------------------------------------- */

static int gen_node(kgen *kg, int id, const imap *m);

/* Values in KIR: a node of dtype dt is a value of tc_dtype_opmath(dt).
 * Reduced floats (float16, bfloat16) are float32 values, rounded to their
 * dtype when stored or converted to another dtype: one rounding per fused
 * kernel, as Inductor does, where eager rounds after every op.  With
 * g->emulate_precision every op's result is rounded (and widened back) as
 * eager stores it, so answers are eager's exactly (an eq after a float16
 * sub, fuzz seed 61034) at the cost of the roundings (Inductor's
 * emulate_precision_casts).  Where the decomposition of one eager op
 * computes in float32 (softmax, norms), its graph nodes are float32. */
static int
as_stored(kgen *kg, int v, tc_dtype dt)
{
    if (tc_dtype_is_reduced_float(dt) && kg->s->g->emulate_precision) {
        v = kb_cast(&kg->kb, v, dt);
    }
    return kb_cast(&kg->kb, v, tc_dtype_opmath(dt));
}

/* eager's mul and div take a reduced-float operand that is a 0-d tensor or
 * a Python number in float32 (opmath) instead of rounding it to the
 * tensor's dtype (binary_op_scalar in ATen's BinaryOpsKernel.cpp); x * 0.1
 * with 0.1 as a Python number is mul(x, 0.1) in either spelling
 * (Tensor.__rmul__).  So do the Scalar parameters of activations. */
static int
operand_kept_in_opmath(const tc_graph *g, const tc_node *n, int k,
                       tc_dtype compute)
{
    const char *op = tc_ops[n->op].name;
    const tc_node *x = &g->nodes[n->in[k]];
    if (!tc_dtype_is_reduced_float(compute) || x->layout.ndim != 0) {
        return 0;
    }
    if (!strcmp(op, "div")) {
        return k == 1;
    }
    if (tc_ops[n->op].promote == TC_PROMOTE_FIRST && k >= 1
        && strcmp(op, "masked_fill") != 0) {
        /* the float parameters of leaky_relu, elu, softplus: ATen's
         * reduced-float kernels take them .to<float>() */
        return x->kind == TC_NODE_SCALAR;
    }
    return !strcmp(op, "mul") && (k == 1 || x->kind == TC_NODE_SCALAR);
}

/* Operand id converted to dt as torch converts it (Python numbers and
 * other dtypes rounded to dt, unless keep_opmath), as a KIR value of
 * tc_dtype_opmath(dt). */
static int
gen_operand(kgen *kg, int id, const imap *m, tc_dtype dt, int keep_opmath)
{
    const tc_node *n = &kg->s->g->nodes[id];
    tc_dtype rep = tc_dtype_opmath(dt);
    if (n->kind == TC_NODE_SCALAR) {
        int is_f = tc_dtype_is_float(n->dtype);
        int v;
        if (tc_dtype_is_reduced_float(dt) && !keep_opmath) {
            double x = is_f ? n->scalar.f : (double)n->scalar.i;
            v = kb_const_f(&kg->kb, rep, tc_round_to_dtype(x, dt));
        } else {
            v = is_f ? kb_const_f(&kg->kb, rep, n->scalar.f)
                     : kb_const_i(&kg->kb, rep, n->scalar.i);
        }
        if (v < 0) {
            serr(kg->s, "cannot convert the constant of %%%d to %s", id,
                 tc_dtype_name(dt));
        }
        return v;
    }
    int v = gen_node(kg, id, m);
    if (n->dtype != dt && !keep_opmath) {
        /* a reduced float converts as eager stored it (x.float() - x of
         * a float16 x computed here is 0, fuzz seed 64969) */
        v = kb_cast(&kg->kb, kb_cast(&kg->kb, v, n->dtype), dt);
    }
    return kb_cast(&kg->kb, v, rep);
}

/* The row-major linear index of node n's element under m: an index
 * argument (kir.h) seen through the strides of a contiguous tensor of n's
 * sizes, so the loop nest treats it like any other argument. */
static int
gen_position(kgen *kg, const tc_node *n, const imap *m)
{
    tc_layout l = n->layout;
    tc_layout_contiguous(&l);
    int slot = mapped_slot(kg, TC_KARG_INDEX, 0, l.strides, 0, m);
    return kb_index(&kg->kb, slot);
}

static int
gen_op(kgen *kg, int id, const imap *m)
{
    sched *s = kg->s;
    const tc_node *n = &s->g->nodes[id];
    const tc_op_def *def = &tc_ops[n->op];
    tc_dtype compute, out;
    int args[TC_MAX_OP_INPUTS + 1];
    if (tc_op_infer_dtypes(s->g, n->op, n->in, n->attr_dtype, &compute, &out,
                           s->err, s->errlen) < 0) {
        return -1;
    }
    for (int k = 0; k < n->nin; k++) {
        const tc_node *x = &s->g->nodes[n->in[k]];
        tc_dtype dt = tc_op_operand_dtype(n->op, k, compute, x->dtype);
        imap sub;
        operand_map(&x->layout, &n->layout, m, &sub);
        args[k] = gen_operand(kg, n->in[k], &sub, dt,
                              operand_kept_in_opmath(s->g, n, k, compute));
        if (def->promote == TC_PROMOTE_CAST) {
            /* an explicit cast sees its operand as eager stored it */
            args[k] = kb_cast(&kg->kb, args[k], dt);
        }
        else if (def->promote == TC_PROMOTE_BOOL_OUT
                 && tc_dtype_is_reduced_float(dt)) {
            /* so does a comparison or test, whose answer flips on the
             * rounding: amax's backward compares a recomputed bfloat16
             * exp with the saved max (fuzz seed 1597, backend grad: all
             * unequal, a count of 0, NaN gradients) */
            args[k] = kb_cast(&kg->kb, kb_cast(&kg->kb, args[k], dt),
                              tc_dtype_opmath(dt));
        }
        if (args[k] < 0) {
            return -1;
        }
    }
    if (def->index_arg && (args[n->nin] = gen_position(kg, n, m)) < 0) {
        return oom(s);
    }
    tc_dtype kout = def->promote == TC_PROMOTE_CAST ? out
                                                     : tc_dtype_opmath(out);
    int v = as_stored(kg,
                      def->lower(&kg->kb, args, tc_dtype_opmath(compute), kout),
                      n->dtype);
    if (v < 0) {
        serr(s, "cannot lower %s for %s", def->name, tc_dtype_name(compute));
    }
    kg->used[id] = 1;
    return v;
}

static tc_acc_kind
acc_kind(const char *op)
{
    static const char *const names[TC_ACC_NKINDS] = {
        "sum", "prod", "amax", "amin", "argmax", "argmin", "any", "all"};
    for (int i = 0; i < TC_ACC_NKINDS; i++) {
        if (!strcmp(op, names[i])) {
            return (tc_acc_kind)i;
        }
    }
    return TC_ACC_SUM;
}

static tc_dtype
acc_dtype(const tc_graph *g, const tc_node *r)
{
    switch (acc_kind(tc_ops[r->op].name)) {
    case TC_ACC_ANY:
    case TC_ACC_ALL:
        return TC_BOOL;
    case TC_ACC_ARGMAX:
    case TC_ACC_ARGMIN:
        return tc_dtype_opmath(g->nodes[r->in[0]].dtype);
    case TC_ACC_PROD:
        /* float products in float64: the lanes' partial products are
         * folded in another order than eager's, and two small partials
         * would underflow to 0 in float32 (then 0 * inf = NaN where eager,
         * scanning in order, reached inf first) */
        if (tc_dtype_is_float(r->dtype)) {
            return TC_F64;
        }
        return tc_dtype_opmath(r->dtype);
    default:
        /* reduced floats accumulate in float32, as eager does */
        return tc_dtype_opmath(r->dtype);
    }
}

static int
gen_reduction(kgen *kg, int id, const imap *m)
{
    const tc_graph *g = kg->s->g;
    const tc_node *n = &g->nodes[id];
    redinfo *r = find_red(kg, id, m);
    if (!r || r->acc < 0) {
        return serr(kg->s, "internal: reduction %%%d not planned", id);
    }
    tc_acc_kind kind = acc_kind(tc_ops[n->op].name);
    int comp = kind == TC_ACC_ARGMAX || kind == TC_ACC_ARGMIN;
    kg->used[id] = 1;
    return as_stored(kg, kb_acc_result(&kg->kb, r->acc, comp), n->dtype);
}

static int
gen_node(kgen *kg, int id, const imap *m)
{
    sched *s = kg->s;
    const tc_node *n = &s->g->nodes[id];
    centry *c = cache_find(kg, &kg->vals, id, m);
    if (c) {
        return c->value;
    }
    int v;
    imap sub;
    if (n->kind == TC_NODE_INPUT || is_leaf(kg, id) || view_is_leaf(kg, id)) {
        v = leaf_load(kg, id, m);
    } else if (is_view(s->g, id)) {
        v = view_step(kg, id, m, &sub) < 0 ? -1
                                            : gen_node(kg, n->in[0], &sub);
        kg->used[id] = v >= 0;
    } else if (is_reduction(s->g, id)) {
        v = gen_reduction(kg, id, m);
    } else if (n->kind == TC_NODE_OP) {
        v = gen_op(kg, id, m);
    } else {
        v = -1;
    }
    if (v >= 0 && cache_put(kg, &kg->vals, id, m, v, !kg->in_body) < 0) {
        return -1;
    }
    return v;
}

/* Emit (in the current pre region) every row scalar that the body rooted
 * at id under m needs, so bodies only do per-element work. */
static int
hoist(kgen *kg, int id, const imap *m, cache *seen)
{
    const tc_graph *g = kg->s->g;
    const tc_node *n = &g->nodes[id];
    if (n->kind == TC_NODE_SCALAR || cache_find(kg, seen, id, m)) {
        return 0;
    }
    if (cache_put(kg, seen, id, m, 0, 1) < 0) {
        return -1;
    }
    if (is_rowscalar(kg, m)) {
        return gen_node(kg, id, m) < 0 ? -1 : 0;
    }
    if (n->kind != TC_NODE_OP || is_leaf(kg, id) || view_is_leaf(kg, id)) {
        return 0;
    }
    imap sub;
    if (is_view(g, id)) {
        return view_step(kg, id, m, &sub) < 0 ? -1
                                               : hoist(kg, n->in[0], &sub, seen);
    }
    for (int k = 0; k < n->nin; k++) {
        const tc_node *x = &g->nodes[n->in[k]];
        operand_map(&x->layout, &n->layout, m, &sub);
        if (hoist(kg, n->in[k], &sub, seen) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Domain of the group: the primary reduction's input shape (reduced dims
 * marked), or the members' shape for pointwise kernels. */
static void
set_domain(kgen *kg)
{
    const tc_graph *g = kg->s->g;
    int r = kg->s->group_red[kg->group];
    const tc_layout *l = r >= 0 ? &g->nodes[g->nodes[r].in[0]].layout
                                : &g->nodes[kg->s->group_rep[kg->group]].layout;
    kg->ndom = l->ndim;
    memcpy(kg->dom, l->sizes, sizeof(int64_t) * l->ndim);
    kg->red_mask = r >= 0 ? g->nodes[r].red_mask : 0;
    kg->nred = 0;
    for (int d = 0; d < l->ndim; d++) {
        if (kg->red_mask & (1u << d)) {
            kg->red_dims[kg->nred++] = d;
        }
    }
}

/* Map from the domain to member id: identity when it has the domain's
 * shape, else a row of the reduced dims (kept dims).  The member's own rank
 * says whether its row keeps the reduced dims: members of one group share
 * the reduced dims but not keepdim (x.amin(0, keepdim=True) and x.amax(0)),
 * so the primary reduction's keepdim would index the other's buffer with
 * the wrong rank. */
static void
member_map(const kgen *kg, int id, imap *m)
{
    const tc_graph *g = kg->s->g;
    const tc_layout *l = &g->nodes[id].layout;
    int r = kg->s->group_red[kg->group];
    memset(m, 0, sizeof(*m));
    m->ndim = l->ndim;
    if (r < 0 || (l->ndim == kg->ndom &&
                  !memcmp(l->sizes, kg->dom, sizeof(int64_t) * kg->ndom))) {
        for (int d = 0; d < l->ndim; d++) {
            m->coef[d][d] = r >= 0 && kg->dom[d] == 1 ? 0 : 1;
        }
        return;
    }
    int keepdim = l->ndim == kg->ndom;
    for (int d = 0, k = 0; d < kg->ndom; d++) {
        if (kg->red_mask & (1u << d)) {
            k += keepdim;
        } else {
            m->coef[k++][d] = 1;
        }
    }
}

static int
member_store(kgen *kg, int id, const imap *m)
{
    const sched *s = kg->s;
    int b = s->buf_of[id];
    int slot = mapped_slot(kg, b, 1, s->p->buffers[b].layout.strides, 0, m);
    int v = kb_cast(&kg->kb, gen_node(kg, id, m), s->p->buffers[b].dtype);
    if (v < 0 || kb_store(&kg->kb, slot, v) < 0) {
        return s->err && s->err[0] ? -1 : oom(kg->s);
    }
    return 0;
}

static void
begin_region(kgen *kg, int in_body)
{
    kg->kb.region_start = kg->k->ninsts;
    kg->in_body = in_body;
    cache_drop_local(&kg->vals);
}

static int
gen_phases(kgen *kg, const int *members, const imap *maps,
           const int *levels, int nm, int nphases)
{
    tc_kernel *k = kg->k;
    for (int p = 0; p < nphases; p++) {
        cache seen = {0};
        begin_region(kg, 0);
        int rc = 0;
        for (int i = 0; i < kg->nreds && rc == 0; i++) {
            redinfo *r = &kg->reds[i];
            if (r->body != p) {
                continue;
            }
            const tc_node *n = &kg->s->g->nodes[r->node];
            r->acc = kb_acc(&kg->kb, acc_kind(tc_ops[n->op].name),
                            acc_dtype(kg->s->g, n));
            imap sub;
            rc = r->acc < 0 ? oom(kg->s)
                 : reduction_input_map(kg, r->node, &r->map, &sub) < 0 ? -1
                 : hoist(kg, n->in[0], &sub, &seen);
        }
        for (int i = 0; i < nm && rc == 0; i++) {
            if (levels[i] == p && !is_rowscalar(kg, &maps[i])) {
                rc = hoist(kg, members[i], &maps[i], &seen);
            }
        }
        free(seen.v);
        if (rc < 0) {
            return -1;
        }
        k->phases[p].begin = k->ninsts;
        begin_region(kg, 1);
        for (int i = 0; i < kg->nreds; i++) {
            redinfo *r = &kg->reds[i];
            if (r->body != p) {
                continue;
            }
            const tc_node *n = &kg->s->g->nodes[r->node];
            imap sub;
            reduction_input_map(kg, r->node, &r->map, &sub);
            int v = kb_cast(&kg->kb, gen_node(kg, n->in[0], &sub),
                            kg->k->insts[r->acc].dtype);
            if (v < 0 || kb_acc_update(&kg->kb, r->acc, v) < 0) {
                return kg->s->err && kg->s->err[0] ? -1 : oom(kg->s);
            }
        }
        for (int i = 0; i < nm; i++) {
            if (levels[i] == p && !is_rowscalar(kg, &maps[i]) &&
                member_store(kg, members[i], &maps[i]) < 0) {
                return -1;
            }
        }
        k->phases[p].end = k->ninsts;
    }
    k->nphases = nphases;
    begin_region(kg, 0);
    return 0;
}

/* A kernel that would make more than TC_KIR_MAX_PHASES passes over a
 * row (a chain of reductions, each reading the one before: softmax of a
 * softmax ...): cut the chain at its deepest reduction that fits, which
 * is stored (then computed by a kernel of its own), so that what reads it
 * starts over at the first pass.  Each retry cuts once more. */
static int
cut_phases(kgen *kg)
{
    sched *s = kg->s;
    int best = -1, depth = -1;
    for (int i = 0; i < kg->nreds; i++) {
        int id = kg->reds[i].node, body = kg->reds[i].body;
        int done = s->buf_of[id] >= 0 ? s->solo[id] : s->force_mat[id];
        if (body + 1 < TC_KIR_MAX_PHASES && body > depth && !done) {
            best = id;
            depth = body;
        }
    }
    if (best < 0) {
        return serr(s, "tcjit: more than %d passes over a row",
                    TC_KIR_MAX_PHASES);
    }
    return retry(s, best, s->buf_of[best] >= 0);
}

static int
gen_body(kgen *kg)
{
    const sched *s = kg->s;
    const tc_graph *g = s->g;
    int nm = 0, rc = -1, nphases = 0;
    int *members = malloc(sizeof(int) * (g->nnodes + 1));
    int *levels = malloc(sizeof(int) * (g->nnodes + 1));
    imap *maps = malloc(sizeof(imap) * (g->nnodes + 1));
    if (!members || !levels || !maps) {
        oom(kg->s);
        goto done;
    }
    /* outputs first in the argument list */
    for (int i = 0; i < g->nnodes; i++) {
        if (is_materialized_op(s, i) && s->group_of[i] == kg->group) {
            int b = s->buf_of[i];
            members[nm] = i;
            member_map(kg, i, &maps[nm]);
            mapped_slot(kg, b, 1, s->p->buffers[b].layout.strides, 0,
                        &maps[nm]);
            nm++;
        }
    }
    for (int i = 0; i < nm; i++) {
        if ((levels[i] = level_of(kg, members[i], &maps[i])) < 0) {
            rc = levels[i];
            goto done;
        }
        if (!is_rowscalar(kg, &maps[i]) && levels[i] + 1 > nphases) {
            nphases = levels[i] + 1;
        }
    }
    for (int i = 0; i < kg->nreds; i++) {
        if (kg->reds[i].body + 1 > nphases) {
            nphases = kg->reds[i].body + 1;
        }
    }
    if (nphases > TC_KIR_MAX_PHASES) {
        rc = cut_phases(kg);
        goto done;
    }
    if (kg->nreds == 0) {
        nphases = 0; /* pointwise kernel */
    }
    if (nphases && gen_phases(kg, members, maps, levels, nm, nphases) < 0) {
        goto done;
    }
    for (int i = 0; i < nm; i++) {
        if ((!nphases || is_rowscalar(kg, &maps[i])) &&
            member_store(kg, members[i], &maps[i]) < 0) {
            goto done;
        }
    }
    rc = 0;
done:
    free(members);
    free(levels);
    free(maps);
    return rc;
}

/* Loop dims outer (already placed at loop index li) and domain dim d can
 * be one loop if every argument steps over d exactly once per step of
 * outer. */
static int
can_merge(const kgen *kg, int li, int64_t inner_size, int d)
{
    const tc_kernel *k = kg->k;
    for (int a = 0; a < k->nargs; a++) {
        if (k->args[a].strides[li] != kg->full[a][d] * inner_size) {
            return 0;
        }
    }
    return 1;
}

/* Place domain dims perm[0..n) as loops starting at loop index first:
 * drop size-1 dims, coalesce.  Returns the number of loops. */
static int
place_loops(kgen *kg, const int *perm, int n, int first)
{
    tc_kernel *k = kg->k;
    int nd = 0;
    for (int i = 0; i < n; i++) {
        int d = perm[i];
        if (kg->dom[d] == 1) {
            continue;
        }
        if (nd > 0 && can_merge(kg, first + nd - 1, kg->dom[d], d)) {
            k->sizes[first + nd - 1] *= kg->dom[d];
            for (int a = 0; a < k->nargs; a++) {
                k->args[a].strides[first + nd - 1] = kg->full[a][d];
            }
            continue;
        }
        k->sizes[first + nd] = kg->dom[d];
        for (int a = 0; a < k->nargs; a++) {
            k->args[a].strides[first + nd] = kg->full[a][d];
        }
        nd++;
    }
    return nd;
}

/* Outer dims slowest first, by the strides of the first stored output (or
 * of the first argument); reduction dims innermost in logical order. */
static void
build_loops(kgen *kg)
{
    tc_kernel *k = kg->k;
    const tc_plan *p = kg->s->p;
    int ref = 0, perm[TC_MAX_DIMS], no = 0;
    for (int a = k->nargs - 1; a >= 0; a--) {
        if (k->args[a].is_output && p->buffers[k->args[a].buffer].kind ==
                                        TC_BUF_OUTPUT) {
            ref = a;
        }
    }
    const int64_t *rs = k->nargs ? kg->full[ref] : NULL;
    for (int d = 0; d < kg->ndom; d++) {
        if (kg->red_mask & (1u << d)) {
            continue;
        }
        int j = no;
        perm[no++] = d;
        while (j > 0 && rs[perm[j - 1]] < rs[perm[j]]) {
            int t = perm[j - 1];
            perm[j - 1] = perm[j];
            perm[j] = t;
            j--;
        }
    }
    for (int a = 0; a < k->nargs; a++) {
        memset(k->args[a].strides, 0, sizeof(k->args[a].strides));
    }
    k->ndim = place_loops(kg, perm, no, 0);
    k->nred = place_loops(kg, kg->red_dims, kg->nred, k->ndim);
    k->numel = 1;
    k->red_numel = 1;
    for (int d = 0; d < kg->ndom; d++) {
        if (kg->red_mask & (1u << d)) {
            k->red_numel *= kg->dom[d];
        } else {
            k->numel *= kg->dom[d];
        }
    }
}

static int
build_desc(kgen *kg)
{
    const tc_graph *g = kg->s->g;
    tc_textbuf d = {0};
    for (int i = 0; i < g->nnodes; i++) {
        if (!kg->used[i]) {
            continue;
        }
        char *t = tc_node_format(g, i);
        if (!t) {
            tc_textbuf_free(&d);
            return oom(kg->s);
        }
        tc_textbuf_printf(&d, "%s%s", d.len ? "; " : "", t);
        free(t);
    }
    char *text = tc_textbuf_finish(&d);
    if (!text) {
        return oom(kg->s);
    }
    kg->k->desc = text;
    return 0;
}

/* "k3_red_sub_exp_sum": the index, then the kind and the ops the kernel
 * computes, each op once, as Inductor names its kernels: a profiler's
 * table then says what each kernel does.  Same ops, same name, so two
 * graphs' identical kernels still share one PTX module. */
static void
name_kernel(const kgen *kg, int index)
{
    const tc_graph *g = kg->s->g;
    char *name = kg->k->name;
    size_t n = sizeof(kg->k->name);
    size_t w = (size_t)snprintf(name, n, "k%d%s", index,
                                kg->k->nred > 0 ? "_red" : "_pw");
    for (int i = 0; i < g->nnodes && w + 2 < n; i++) {
        if (!kg->used[i] || g->nodes[i].kind != TC_NODE_OP) {
            continue;
        }
        const char *op = tc_ops[g->nodes[i].op].name;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) {
            seen = kg->used[j] && g->nodes[j].kind == TC_NODE_OP
                   && g->nodes[j].op == g->nodes[i].op;
        }
        if (seen || w + 1 + strlen(op) >= n) {
            continue;
        }
        w += (size_t)snprintf(name + w, n - w, "_%s", op);
    }
}

static int
gen_kernel(sched *s, int q, tc_kernel *k, int index)
{
    const tc_graph *g = s->g;
    kgen kg;
    memset(&kg, 0, sizeof(kg));
    kg.s = s;
    kg.group = q;
    kg.k = k;
    kg.kb.k = k;
    int rc = -1, maxargs = s->p->nbuffers + 2 * g->nnodes + 1;
    kg.used = calloc(g->nnodes + 1, 1);
    kg.full = calloc(maxargs, sizeof(*kg.full));
    kg.slot_key = calloc(maxargs, sizeof(int));
    k->args = calloc(maxargs, sizeof(tc_karg));
    if (!kg.used || !kg.full || !kg.slot_key || !k->args) {
        oom(s);
        goto done;
    }
    snprintf(k->name, sizeof(k->name), "k%d", index);
    set_domain(&kg);
    if ((rc = gen_body(&kg)) < 0) {
        goto done;
    }
    rc = -1;
    build_loops(&kg);
    if (build_desc(&kg) < 0) {
        goto done;
    }
    name_kernel(&kg, index);
    rc = 0;
done:
    free(kg.used);
    free(kg.full);
    free(kg.slot_key);
    free(kg.vals.v);
    free(kg.levels.v);
    free(kg.reds);
    return rc;
}

/* ---- entry points ---------------------------------------------------- */

void
tc_plan_free(tc_plan *p)
{
    if (!p) {
        return;
    }
    for (int i = 0; i < p->nkernels; i++) {
        tc_kernel_clear(&p->kernels[i]);
    }
    free(p->kernels);
    free(p->externs);
    free(p->steps);
    free(p->buffers);
    free(p->output_buffer);
    free(p->outputs);
    free(p);
}

static int
sched_alloc(sched *s)
{
    int n = s->g->nnodes + 1;
    s->live = calloc(n, sizeof(int));
    s->buf_of = malloc(sizeof(int) * n);
    s->group_of = malloc(sizeof(int) * n);
    s->group_rep = malloc(sizeof(int) * n);
    s->group_red = malloc(sizeof(int) * n);
    s->order = malloc(sizeof(int) * n);
    s->group_ext = malloc(sizeof(int) * n);
    s->group_size = malloc(sizeof(int) * n);
    s->level = calloc(n, sizeof(int));
    if (!s->live || !s->buf_of || !s->group_of || !s->group_rep ||
        !s->group_red || !s->order || !s->group_ext || !s->group_size
        || !s->level) {
        return oom(s);
    }
    memset(s->buf_of, -1, sizeof(int) * n);
    memset(s->group_of, -1, sizeof(int) * n);
    s->ngroups = 0;
    s->mixed = -1;
    s->joined = -1;
    return 0;
}

static void
sched_free(sched *s)
{
    free(s->live);
    free(s->buf_of);
    free(s->group_of);
    free(s->group_rep);
    free(s->group_red);
    free(s->order);
    free(s->group_ext);
    free(s->group_size);
    free(s->level);
    s->live = s->buf_of = s->group_of = NULL;
    s->group_rep = s->group_red = s->order = NULL;
    s->group_ext = s->group_size = s->level = NULL;
}

static void
gen_extern(sched *s, int id, tc_extern_call *x)
{
    const tc_node *n = &s->g->nodes[id];
    x->node = id;
    x->op = n->op;
    x->nin = n->nin;
    for (int k = 0; k < n->nin; k++) {
        tensor_ref(s, n->in[k], &x->in[k]);
    }
    x->out_buffer = s->buf_of[id];
    memcpy(x->xattr, n->xattr, sizeof(x->xattr));
    x->xfattr = n->xfattr;
}

static int
gen_kernels(sched *s)
{
    tc_plan *p = s->p;
    p->kernels = calloc(s->ngroups + 1, sizeof(tc_kernel));
    p->externs = calloc(s->ngroups + 1, sizeof(tc_extern_call));
    p->steps = calloc(s->ngroups + 1, sizeof(int));
    if (!p->kernels || !p->externs || !p->steps) {
        return oom(s);
    }
    for (int i = 0; i < s->ngroups; i++) {
        int q = s->order[i];
        if (s->group_ext[q] >= 0) {
            gen_extern(s, s->group_ext[q], &p->externs[p->nexterns]);
            p->steps[p->nsteps++] = -1 - p->nexterns++;
            continue;
        }
        int k = p->nkernels++; /* so tc_plan_free clears a partial kernel */
        int rc = gen_kernel(s, q, &p->kernels[k], k);
        if (rc < 0) {
            return rc;
        }
        p->steps[p->nsteps++] = k;
    }
    return 0;
}

static int
schedule_once(sched *s)
{
    s->p = calloc(1, sizeof(tc_plan));
    if (!s->p || sched_alloc(s) < 0) {
        return oom(s);
    }
    mark_live(s);
    compute_levels(s);
    int rc;
    if ((rc = plan_input_buffers(s)) < 0 || (rc = plan_op_buffers(s)) < 0 ||
        (rc = plan_outputs(s)) < 0 || (rc = make_groups(s)) < 0 ||
        (rc = order_groups(s)) < 0 || (rc = gen_kernels(s)) < 0) {
        return rc;
    }
    return 0;
}

tc_plan *
tc_schedule(const tc_graph *g, char *err, size_t errlen)
{
    sched s;
    memset(&s, 0, sizeof(s));
    s.g = g;
    s.err = err;
    s.errlen = errlen;
    if (err && errlen) {
        err[0] = '\0';
    }
    s.force_mat = calloc(g->nnodes + 1, 1);
    s.solo = calloc(g->nnodes + 1, 1);
    if (!s.force_mat || !s.solo) {
        oom(&s);
        goto error;
    }
    /* each retry materializes (or isolates) one more node */
    for (int attempt = 0; attempt <= 2 * g->nnodes + 1; attempt++) {
        int rc = schedule_once(&s);
        if (rc == 0) {
            sched_free(&s);
            free(s.force_mat);
            free(s.solo);
            return s.p;
        }
        sched_free(&s);
        tc_plan_free(s.p);
        s.p = NULL;
        if (rc != RETRY) {
            goto error;
        }
        char *flag = s.retry_solo ? s.solo : s.force_mat;
        if (flag[s.retry_node]) {
            serr(&s, "internal: cannot schedule node %%%d", s.retry_node);
            goto error;
        }
        flag[s.retry_node] = 1;
    }
    serr(&s, "internal: scheduling did not converge");
error:
    sched_free(&s);
    tc_plan_free(s.p);
    free(s.force_mat);
    free(s.solo);
    return NULL;
}

int
tc_plan_first_same_kernel(const tc_plan *plan, int i)
{
    for (int j = 0; j < i; j++) {
        if (tc_kernel_same_code(&plan->kernels[j], &plan->kernels[i])) {
            return j;
        }
    }
    return i;
}
