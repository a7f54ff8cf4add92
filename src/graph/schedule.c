/* schedule.c - fusion and buffer planning: graph -> kernel plan.
 *
 * Materialized nodes (graph outputs, and temporaries that are cheaper to
 * store once than to recompute per broadcast element) are grouped by their
 * sizes; each group is one kernel whose body recomputes every other node it
 * needs in registers.  Loop dims follow the memory order of the first stored
 * output and are coalesced when every argument allows it.
 */
#include "schedule.h"
#include "ops.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- analysis -------------------------------------------------------- */

static void
mark_live(sched *s)
{
    const tc_graph *g = s->g;
    for (int j = 0; j < g->noutputs; j++) {
        s->live[g->outputs[j]] = 1;
    }
    for (int i = g->nnodes - 1; i >= 0; i--) {
        if (!s->live[i]) {
            continue;
        }
        for (int k = 0; k < g->nodes[i].nin; k++) {
            s->live[g->nodes[i].in[k]] = 1;
        }
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
        return 0;
    }
    return numel < max_consumer[id] && numel * 4 <= max_consumer[id];
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

static int
plan_op_buffers(sched *s)
{
    const tc_graph *g = s->g;
    int64_t *maxc = calloc(g->nnodes, sizeof(int64_t));
    if (!maxc) {
        return oom(s);
    }
    for (int i = 0; i < g->nnodes; i++) {
        const tc_node *n = &g->nodes[i];
        int64_t numel = tc_layout_numel(&n->layout);
        for (int k = 0; s->live[i] && k < n->nin; k++) {
            if (maxc[n->in[k]] < numel) {
                maxc[n->in[k]] = numel;
            }
        }
    }
    int rc = 0;
    for (int i = 0; i < g->nnodes && rc == 0; i++) {
        const tc_node *n = &g->nodes[i];
        if (!s->live[i] || n->kind != TC_NODE_OP) {
            continue;
        }
        if (is_graph_output(g, i)) {
            rc = add_buffer(s, TC_BUF_OUTPUT, i, n->dtype, &n->layout);
        } else if (wants_temp(g, i, maxc)) {
            tc_layout l = n->layout;
            tc_layout_contiguous(&l);
            rc = add_buffer(s, TC_BUF_TEMP, i, n->dtype, &l);
        } else {
            continue;
        }
        s->buf_of[i] = rc;
        rc = rc < 0 ? -1 : 0;
    }
    free(maxc);
    return rc;
}

static int
plan_outputs(sched *s)
{
    const tc_graph *g = s->g;
    tc_plan *p = s->p;
    p->output_buffer = malloc(sizeof(int) * (g->noutputs ? g->noutputs : 1));
    if (!p->output_buffer) {
        return oom(s);
    }
    p->noutputs = g->noutputs;
    for (int j = 0; j < g->noutputs; j++) {
        int id = g->outputs[j];
        if (g->nodes[id].kind == TC_NODE_SCALAR) {
            return serr(s, "graph output %d is a Python number, not a tensor",
                        j);
        }
        p->output_buffer[j] = s->buf_of[id];
    }
    return 0;
}

static int
is_materialized_op(const sched *s, int id)
{
    return s->g->nodes[id].kind == TC_NODE_OP && s->buf_of[id] >= 0;
}

static int
make_groups(sched *s)
{
    const tc_graph *g = s->g;
    for (int i = 0; i < g->nnodes; i++) {
        if (!is_materialized_op(s, i)) {
            continue;
        }
        const tc_layout *l = &g->nodes[i].layout;
        int grp = -1;
        for (int q = 0; q < s->ngroups && grp < 0; q++) {
            const tc_layout *r = &g->nodes[s->group_rep[q]].layout;
            if (r->ndim == l->ndim &&
                !memcmp(r->sizes, l->sizes, sizeof(int64_t) * l->ndim)) {
                grp = q;
            }
        }
        if (grp < 0) {
            grp = s->ngroups++;
            s->group_rep[grp] = i;
        }
        s->group_of[i] = grp;
    }
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
    for (int i = 0; i < g->nnodes; i++) {
        if (is_materialized_op(s, i)) {
            collect_deps(s, s->group_of[i], i, seen, deps);
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
    return n == ng ? 0 : serr(s, "cyclic kernel dependencies");
}

/* ---- kernel generation ----------------------------------------------- */

typedef struct {
    sched *s;
    int group;
    tc_kernel *k;
    tc_kbuilder kb;
    int *val;        /* node -> value id, -1 if not computed yet */
    int *slot_of;    /* buffer -> argument slot, -1 */
    char *used;      /* op nodes this kernel implements */
} kgen;

static int
arg_slot(kgen *kg, int buffer, int is_output)
{
    if (kg->slot_of[buffer] >= 0) {
        return kg->slot_of[buffer];
    }
    tc_karg *a = &kg->k->args[kg->k->nargs];
    memset(a, 0, sizeof(*a));
    a->buffer = buffer;
    a->dtype = kg->s->p->buffers[buffer].dtype;
    a->is_output = is_output;
    kg->slot_of[buffer] = kg->k->nargs;
    return kg->k->nargs++;
}

static int gen_node(kgen *kg, int id);

/* Operand id as dtype dt: scalars become constants of dt directly. */
static int
gen_operand(kgen *kg, int id, tc_dtype dt)
{
    const tc_node *n = &kg->s->g->nodes[id];
    if (n->kind == TC_NODE_SCALAR) {
        int v = tc_dtype_is_float(n->dtype)
                    ? kb_const_f(&kg->kb, dt, n->scalar.f)
                    : kb_const_i(&kg->kb, dt, n->scalar.i);
        if (v < 0) {
            serr(kg->s, "cannot convert the constant of %%%d to %s", id,
                 tc_dtype_name(dt));
        }
        return v;
    }
    return kb_cast(&kg->kb, gen_node(kg, id), dt);
}

static int
gen_op(kgen *kg, int id)
{
    sched *s = kg->s;
    const tc_node *n = &s->g->nodes[id];
    const tc_op_def *def = &tc_ops[n->op];
    tc_dtype compute, out;
    int args[TC_MAX_OP_INPUTS];
    if (tc_op_infer_dtypes(s->g, n->op, n->in, n->attr_dtype, &compute, &out,
                           s->err, s->errlen) < 0) {
        return -1;
    }
    for (int k = 0; k < n->nin; k++) {
        tc_dtype dt = tc_op_operand_dtype(n->op, k, compute,
                                          s->g->nodes[n->in[k]].dtype);
        if ((args[k] = gen_operand(kg, n->in[k], dt)) < 0) {
            return -1;
        }
    }
    int v = kb_cast(&kg->kb, def->lower(&kg->kb, args, compute, out),
                    n->dtype);
    if (v < 0) {
        serr(s, "cannot lower %s for %s", def->name, tc_dtype_name(compute));
    }
    kg->used[id] = 1;
    return v;
}

static int
gen_node(kgen *kg, int id)
{
    sched *s = kg->s;
    const tc_node *n = &s->g->nodes[id];
    if (kg->val[id] >= 0) {
        return kg->val[id];
    }
    int v;
    if (n->kind == TC_NODE_INPUT ||
        (is_materialized_op(s, id) && s->group_of[id] != kg->group)) {
        v = kb_load(&kg->kb, arg_slot(kg, s->buf_of[id], 0), n->dtype);
    } else if (n->kind == TC_NODE_OP) {
        v = gen_op(kg, id);
    } else {
        v = -1;
    }
    kg->val[id] = v;
    return v;
}

/* Strides of buffer b broadcast into the kernel domain dom (right aligned;
 * 0 where the buffer has size 1 and the domain does not, or no dim). */
static void
domain_strides(const tc_layout *b, const tc_layout *dom, int64_t *st)
{
    int off = dom->ndim - b->ndim;
    for (int d = 0; d < dom->ndim; d++) {
        int bd = d - off;
        int bcast = bd < 0 || (b->sizes[bd] == 1 && dom->sizes[d] != 1);
        st[d] = bcast ? 0 : b->strides[bd];
    }
}

/* Domain dims slowest first, by the strides of the first output (or of the
 * first member if the group stores only temporaries). */
static void
loop_order(const kgen *kg, const tc_layout *dom, int *perm)
{
    const tc_plan *p = kg->s->p;
    const tc_layout *ref = NULL;
    for (int a = 0; a < kg->k->nargs && !ref; a++) {
        const tc_buffer *b = &p->buffers[kg->k->args[a].buffer];
        if (kg->k->args[a].is_output && b->kind == TC_BUF_OUTPUT) {
            ref = &b->layout;
        }
    }
    if (!ref) {
        ref = &p->buffers[kg->k->args[0].buffer].layout;
    }
    for (int i = 0; i < dom->ndim; i++) {
        int j = i;
        perm[i] = i;
        while (j > 0 && ref->strides[perm[j - 1]] < ref->strides[perm[j]]) {
            int t = perm[j - 1];
            perm[j - 1] = perm[j];
            perm[j] = t;
            j--;
        }
    }
}

/* Loop dim outer (already placed) and domain dim inner can be one loop if
 * every argument steps over inner exactly once per step of outer. */
static int
can_merge(const tc_kernel *k, int outer, int64_t inner_size, int inner,
          int64_t (*full)[TC_MAX_DIMS])
{
    for (int a = 0; a < k->nargs; a++) {
        if (k->args[a].strides[outer] != full[a][inner] * inner_size) {
            return 0;
        }
    }
    return 1;
}

/* Permute, drop size-1 dims, coalesce; fill k->sizes and arg strides. */
static int
build_loops(kgen *kg, const tc_layout *dom)
{
    tc_kernel *k = kg->k;
    int perm[TC_MAX_DIMS], nd = 0;
    int64_t (*full)[TC_MAX_DIMS] = calloc(k->nargs + 1, sizeof(*full));
    if (!full) {
        return oom(kg->s);
    }
    for (int a = 0; a < k->nargs; a++) {
        domain_strides(&kg->s->p->buffers[k->args[a].buffer].layout, dom,
                       full[a]);
    }
    loop_order(kg, dom, perm);
    for (int i = 0; i < dom->ndim; i++) {
        int d = perm[i];
        if (dom->sizes[d] == 1) {
            continue;
        }
        if (nd > 0 && can_merge(k, nd - 1, dom->sizes[d], d, full)) {
            k->sizes[nd - 1] *= dom->sizes[d];
            for (int a = 0; a < k->nargs; a++) {
                k->args[a].strides[nd - 1] = full[a][d];
            }
            continue;
        }
        k->sizes[nd] = dom->sizes[d];
        for (int a = 0; a < k->nargs; a++) {
            k->args[a].strides[nd] = full[a][d];
        }
        nd++;
    }
    free(full);
    k->ndim = nd;
    k->numel = tc_layout_numel(dom);
    return 0;
}

static int
build_desc(kgen *kg)
{
    const tc_graph *g = kg->s->g;
    size_t len = 0, cap = 64;
    char *d = malloc(cap);
    if (!d) {
        return oom(kg->s);
    }
    d[0] = '\0';
    for (int i = 0; i < g->nnodes; i++) {
        if (!kg->used[i]) {
            continue;
        }
        char *t = tc_node_format(g, i);
        if (!t) {
            free(d);
            return oom(kg->s);
        }
        size_t need = len + strlen(t) + 3;
        if (need > cap) {
            while (cap < need) {
                cap *= 2;
            }
            char *nd = realloc(d, cap);
            if (!nd) {
                free(t), free(d);
                return oom(kg->s);
            }
            d = nd;
        }
        len += (size_t)sprintf(d + len, "%s%s", len ? "; " : "", t);
        free(t);
    }
    kg->k->desc = d;
    return 0;
}

static int
gen_body(kgen *kg)
{
    const tc_graph *g = kg->s->g;
    /* outputs first in the argument list */
    for (int i = 0; i < g->nnodes; i++) {
        if (is_materialized_op(kg->s, i) && kg->s->group_of[i] == kg->group) {
            arg_slot(kg, kg->s->buf_of[i], 1);
        }
    }
    for (int i = 0; i < g->nnodes; i++) {
        if (!is_materialized_op(kg->s, i) || kg->s->group_of[i] != kg->group) {
            continue;
        }
        int v = gen_node(kg, i);
        if (v < 0 || kb_store(&kg->kb, kg->slot_of[kg->s->buf_of[i]], v) < 0) {
            return kg->s->err && kg->s->err[0] ? -1 : oom(kg->s);
        }
    }
    return 0;
}

static int
gen_kernel(sched *s, int q, tc_kernel *k, int index)
{
    const tc_graph *g = s->g;
    kgen kg = {s, q, k, {k, 0}, NULL, NULL, NULL};
    int rc = -1;
    kg.val = malloc(sizeof(int) * (g->nnodes + 1));
    kg.slot_of = malloc(sizeof(int) * (s->p->nbuffers + 1));
    kg.used = calloc(g->nnodes + 1, 1);
    k->args = calloc(s->p->nbuffers + 1, sizeof(tc_karg));
    if (!kg.val || !kg.slot_of || !kg.used || !k->args) {
        oom(s);
        goto done;
    }
    memset(kg.val, -1, sizeof(int) * g->nnodes);
    memset(kg.slot_of, -1, sizeof(int) * s->p->nbuffers);
    snprintf(k->name, sizeof(k->name), "k%d", index);
    if (gen_body(&kg) < 0 ||
        build_loops(&kg, &g->nodes[s->group_rep[q]].layout) < 0 ||
        build_desc(&kg) < 0) {
        goto done;
    }
    rc = 0;
done:
    free(kg.val);
    free(kg.slot_of);
    free(kg.used);
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
    free(p->buffers);
    free(p->output_buffer);
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
    s->order = malloc(sizeof(int) * n);
    if (!s->live || !s->buf_of || !s->group_of || !s->group_rep ||
        !s->order) {
        return oom(s);
    }
    memset(s->buf_of, -1, sizeof(int) * n);
    memset(s->group_of, -1, sizeof(int) * n);
    return 0;
}

static void
sched_free(sched *s)
{
    free(s->live);
    free(s->buf_of);
    free(s->group_of);
    free(s->group_rep);
    free(s->order);
}

static int
gen_kernels(sched *s)
{
    tc_plan *p = s->p;
    p->kernels = calloc(s->ngroups + 1, sizeof(tc_kernel));
    if (!p->kernels) {
        return oom(s);
    }
    for (int i = 0; i < s->ngroups; i++) {
        p->nkernels = i + 1; /* so tc_plan_free clears a partial kernel */
        if (gen_kernel(s, s->order[i], &p->kernels[i], i) < 0) {
            return -1;
        }
    }
    return 0;
}

tc_plan *
tc_schedule(const tc_graph *g, char *err, size_t errlen)
{
    sched s = {g, NULL, err, errlen, NULL, NULL, NULL, 0, NULL, NULL};
    if (err && errlen) {
        err[0] = '\0';
    }
    s.p = calloc(1, sizeof(tc_plan));
    if (!s.p || sched_alloc(&s) < 0) {
        oom(&s);
        goto error;
    }
    mark_live(&s);
    if (plan_input_buffers(&s) < 0 || plan_op_buffers(&s) < 0 ||
        plan_outputs(&s) < 0 || make_groups(&s) < 0 || order_groups(&s) < 0 ||
        gen_kernels(&s) < 0) {
        goto error;
    }
    sched_free(&s);
    return s.p;
error:
    sched_free(&s);
    tc_plan_free(s.p);
    return NULL;
}
