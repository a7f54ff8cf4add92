/* place.c - the host part of a graph on a CUDA device (graph.h tc_split).
 *
 * Eager lets CPU tensors live beside CUDA ones: an optimizer keeps its
 * step counters on the CPU, models write torch.tensor(1.0) - mask or draw
 * torch.rand([]) for layer drop.  Ops on CPU tensors run on the CPU, and a
 * 0-d CPU tensor may join a CUDA op, which reads it as a scalar.  Copying
 * every such value to the device would make each write back into a CPU
 * tensor (the step counter) a device sync, and would draw CPU random
 * numbers from the CUDA generator; so the host part stays on the CPU.
 *
 * A host value never depends on a device value (the copy back would be a
 * sync, which the tracer does not put in a graph), so the host part can
 * run first, whole, and the device part after it: one graph becomes two.
 */
#include "graph.h"

#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The place of node id from its operands' (resolved before it, as they
 * precede it): a node follows its tensor operands; one on the device puts
 * it on the device.  Python numbers, and tensors the tracer made of numbers
 * alone (a setitem's value), stay TC_PLACE_AUTO: they go where they are
 * used, into both parts if both use them. */
static int
resolve_one(tc_graph *g, int id)
{
    tc_node *n = &g->nodes[id];
    if (n->kind == TC_NODE_SCALAR || n->place != TC_PLACE_AUTO) {
        return n->place;
    }
    int host = 0, dev = n->kind == TC_NODE_INPUT;
    for (int k = 0; k < n->nin; k++) {
        int p = n->in[k] >= 0 ? g->nodes[n->in[k]].place : TC_PLACE_AUTO;
        host |= p == TC_PLACE_HOST;
        dev |= p == TC_PLACE_DEVICE;
    }
    if (host || dev) {
        n->place = host && !dev ? TC_PLACE_HOST : TC_PLACE_DEVICE;
    }
    return n->place;
}

/* A number or a tensor made of numbers alone (resolved AUTO). */
static int
is_free(const tc_graph *g, int id)
{
    const tc_node *n = &g->nodes[id];
    return n->kind == TC_NODE_SCALAR
           || (n->kind == TC_NODE_OP && n->place == TC_PLACE_AUTO);
}

/* Resolves nodes 0..id in order (memoized in the nodes: a loop, not a
 * recursion as deep as the graph). */
static int
resolve(tc_graph *g, int id)
{
    for (int i = 0; i < id; i++) {
        resolve_one(g, i);
    }
    return resolve_one(g, id);
}

void
tc_graph_place_all(tc_graph *g)
{
    if (g->nnodes > 0) {
        resolve(g, g->nnodes - 1);
    }
}

int
tc_graph_is_host(tc_graph *g, int id)
{
    return id >= 0 && id < g->nnodes && resolve(g, id) == TC_PLACE_HOST;
}

void
tc_split_free(tc_split *s)
{
    tc_graph_free(s->host);
    tc_graph_free(s->dev);
    free(s->host_in);
    free(s->dev_in);
    free(s->dev_pack);
    free(s->out);
    for (int p = 0; p < s->npacks; p++) {
        free(s->pack_src[p]);
    }
    memset(s, 0, sizeof(*s));
}

/* The building state: where each node of g went in the two graphs. */
typedef struct {
    tc_graph *g;
    tc_split *s;
    int *hmap, *dmap;      /* g node -> host / device node, or -1 */
    int *hout;             /* g node -> host output index, or -1 */
    int *cross[2];         /* g host node -> device node that carries it
                              to an extern / to kernels (a pack item), -1 */
    int *slot;             /* g host node -> its item in its dtype's pack */
    int pack_of[TC_NDTYPES]; /* dtype -> pack, or -1 */
    int pack_in[TC_NDTYPES]; /* pack -> its device input node */
    int *houts;            /* host outputs: g node ids */
    int nhouts;
    int *gin_host, *gin_dev; /* g input index -> that part's, or -1 */
} builder;

static int
push(tc_graph *to, const tc_node *n, const int *map, int *id)
{
    tc_node c = *n;
    for (int k = 0; k < c.nin; k++) {
        c.in[k] = c.in[k] >= 0 ? map[c.in[k]] : -1;
    }
    if (c.view_base >= 0) {
        c.view_base = map[c.view_base];
    }
    c.place = TC_PLACE_AUTO;
    *id = tc_graph_push_node(to, &c);
    return *id < 0 ? -2 : 0;
}

/* Free node x (is_free) in the host or the device part, copied there
 * with its operands the first time an op there uses it: its id there, or
 * -2 when out of memory. */
static int
free_node(builder *B, int host, int x)
{
    int *map = host ? B->hmap : B->dmap;
    if (map[x] >= 0) {
        return map[x];
    }
    const tc_node *n = &B->g->nodes[x];
    for (int k = 0; k < n->nin; k++) {
        if (free_node(B, host, n->in[k]) < 0) {
            return -2;
        }
    }
    if (n->view_base >= 0 && free_node(B, host, n->view_base) < 0) {
        return -2;
    }
    return push(host ? B->s->host : B->s->dev, n, map, &map[x]) < 0
           ? -2 : map[x];
}

/* Host output of g node i (added once). */
static int
host_output(builder *B, int i)
{
    if (B->hout[i] < 0) {
        B->hout[i] = B->nhouts;
        B->houts[B->nhouts++] = i;
    }
    return B->hout[i];
}

/* Host node i's value where a kernel reads it, for the
 * device graph: a device input for an extern (the CPU tensor itself),
 * or the item of its dtype's pack (a 0-d view) for kernels. */
static int
source_of(builder *B, int i)
{
    const tc_node *n = &B->g->nodes[i];
    return n->kind == TC_NODE_INPUT ? n->input_index : -1 - host_output(B, i);
}

static int
cross_input(builder *B, int i, int copy, char *err, size_t errlen)
{
    if (B->cross[copy][i] >= 0) {
        return B->cross[copy][i];
    }
    const tc_node *n = &B->g->nodes[i];
    tc_split *s = B->s;
    int id;
    if (copy) {
        int p = B->pack_of[n->dtype];
        s->pack_src[p][B->slot[i]] = source_of(B, i);
        id = tc_graph_select(s->dev, B->pack_in[p], 0, B->slot[i], err,
                             errlen);
    }
    else {
        id = tc_graph_input(s->dev, n->dtype, &n->layout);
        if (id >= 0) {
            int k = s->dev->nodes[id].input_index;
            s->dev_in[k] = source_of(B, i);
            s->dev_pack[k] = -1;
        }
    }
    if (id < 0) {
        return -2;
    }
    B->cross[copy][i] = id;
    return id;
}

/* Device node i reads host operand k: through a copy when a kernel reads
 * it, where eager takes a 0-d CPU tensor only (TensorIterator's CPU
 * scalars); -1 with eager's message for anything else. */
static int
device_operand(builder *B, int i, int k, int device, char *err,
               size_t errlen)
{
    const tc_node *n = &B->g->nodes[i];
    int x = n->in[k];
    int extern_op = n->kind == TC_NODE_OP
                    && tc_ops[n->op].kind == TC_OPK_EXTERN;
    if (!extern_op && (B->g->nodes[x].layout.ndim != 0
                       || tc_ops[n->op].kind != TC_OPK_POINTWISE)) {
        snprintf(err, errlen, "Expected all tensors to be on the same "
                 "device, but found at least two devices, cuda:%d and cpu! "
                 "(%s of a CPU tensor that is not 0-d)", device,
                 tc_ops[n->op].name);
        return -1;
    }
    return cross_input(B, x, !extern_op, err, errlen);
}

/* Node i of g into the host or the device graph.  0, -1 (err), -2. */
static int
place_node(builder *B, int i, int device, char *err, size_t errlen)
{
    const tc_node *n = &B->g->nodes[i];
    tc_split *s = B->s;
    if (is_free(B->g, i)) {
        return 0;   /* copied into a graph where an op uses it */
    }
    int host = n->place == TC_PLACE_HOST;
    if (n->kind == TC_NODE_INPUT) {
        tc_graph *to = host ? s->host : s->dev;
        int id = tc_graph_input(to, n->dtype, &n->layout);
        if (id < 0) {
            return -2;
        }
        int k = to->nodes[id].input_index;
        to->nodes[id].requires_grad = n->requires_grad;
        if (host) {
            B->hmap[i] = id;
            s->host_in[k] = n->input_index;
            B->gin_host[n->input_index] = k;
        }
        else {
            B->dmap[i] = id;
            s->dev_in[k] = n->input_index;
            s->dev_pack[k] = -1;
            B->gin_dev[n->input_index] = k;
        }
        return 0;
    }
    if (host) {
        for (int k = 0; k < n->nin; k++) {
            int x = n->in[k];
            if (is_free(B->g, x) && free_node(B, 1, x) < 0) {
                return -2;
            }
            if (B->hmap[x] < 0) {
                snprintf(err, errlen, "a copy from cuda:%d to the CPU inside "
                         "the graph (a device sync)", device);
                return -1;
            }
        }
        return push(s->host, n, B->hmap, &B->hmap[i]);
    }
    tc_node c = *n;
    for (int k = 0; k < n->nin; k++) {
        int x = n->in[k];
        if (is_free(B->g, x) && free_node(B, 0, x) < 0) {
            return -2;
        }
        c.in[k] = B->g->nodes[x].place == TC_PLACE_HOST
                  ? device_operand(B, i, k, device, err, errlen) : B->dmap[x];
        if (c.in[k] < 0) {
            return c.in[k] == -1 ? -1 : -2;
        }
    }
    if (c.view_base >= 0) {
        c.view_base = B->dmap[c.view_base];
    }
    c.place = TC_PLACE_AUTO;
    B->dmap[i] = tc_graph_push_node(s->dev, &c);
    return B->dmap[i] < 0 ? -2 : 0;
}

static int
split_outputs(builder *B)
{
    tc_graph *g = B->g;
    tc_split *s = B->s;
    int *douts = malloc(sizeof(int) * (size_t)(g->noutputs + 1));
    int nd = 0;
    if (douts == NULL) {
        return -2;
    }
    for (int j = 0; j < g->noutputs; j++) {
        int o = g->outputs[j];
        if (g->nodes[o].place == TC_PLACE_HOST) {
            s->out[j] = -1 - host_output(B, o);
        }
        else {
            if (is_free(g, o) && free_node(B, 0, o) < 0) {
                free(douts);
                return -2;
            }
            s->out[j] = nd;
            douts[nd++] = B->dmap[o];
        }
    }
    int rc = tc_graph_set_outputs(s->dev, nd, douts);
    for (int m = 0; rc == 0 && m < B->nhouts; m++) {
        B->houts[m] = B->hmap[B->houts[m]];
    }
    rc = rc == 0 ? tc_graph_set_outputs(s->host, B->nhouts, B->houts) : rc;
    free(douts);
    /* an output written back into an input of the same part keeps the
     * mark, so its kernel may store into the input directly (else a copy
     * after the run: an optimizer's every parameter and state twice) */
    for (int j = 0; rc == 0 && g->output_writes && j < g->noutputs; j++) {
        int w = g->output_writes[j];
        int o = s->out[j];
        tc_graph *part = o >= 0 ? s->dev : s->host;
        int k = w < 0 ? -1 : o >= 0 ? B->gin_dev[w] : B->gin_host[w];
        if (k >= 0) {
            rc = tc_graph_set_output_write(part, o >= 0 ? o : -1 - o, k);
        }
    }
    return rc < 0 ? -2 : 0;
}

/* Is node i a kernel's (not an extern's) on the device? */
static int
device_kernel_node(const tc_graph *g, int i)
{
    const tc_node *n = &g->nodes[i];
    return n->kind == TC_NODE_OP && n->place != TC_PLACE_HOST
           && tc_ops[n->op].kind != TC_OPK_EXTERN;
}

/* The packs: every 0-d host value a device kernel reads gets an item of
 * its dtype's pack, made first in the device graph (1-d inputs, whose
 * sizes this count fixes). */
static int
plan_packs(builder *B)
{
    tc_graph *g = B->g;
    tc_split *s = B->s;
    for (int i = 0; i < g->nnodes; i++) {
        const tc_node *n = &g->nodes[i];
        for (int k = 0; device_kernel_node(g, i) && k < n->nin; k++) {
            const tc_node *x = &g->nodes[n->in[k]];
            if (x->kind == TC_NODE_SCALAR || x->place != TC_PLACE_HOST
                || x->layout.ndim != 0 || B->slot[n->in[k]] >= 0) {
                continue;
            }
            int p = B->pack_of[x->dtype];
            if (p < 0) {
                p = B->pack_of[x->dtype] = s->npacks++;
                s->pack_dtype[p] = x->dtype;
            }
            B->slot[n->in[k]] = s->pack_n[p]++;
        }
    }
    for (int p = 0; p < s->npacks; p++) {
        tc_layout l = {1, {s->pack_n[p]}, {1}};
        s->pack_src[p] = calloc((size_t)s->pack_n[p], sizeof(int));
        B->pack_in[p] = tc_graph_input(s->dev, s->pack_dtype[p], &l);
        if (s->pack_src[p] == NULL || B->pack_in[p] < 0) {
            return -2;
        }
        s->dev_pack[s->dev->nodes[B->pack_in[p]].input_index] = p;
    }
    return 0;
}

static int
build(builder *B, int device, char *err, size_t errlen)
{
    tc_graph *g = B->g;
    tc_split *s = B->s;
    size_t n = (size_t)g->nnodes + 1;
    s->host = tc_graph_new();
    s->dev = tc_graph_new();
    s->host_in = calloc((size_t)g->ninputs + 1, sizeof(int));
    /* device inputs: g's device inputs, the packs, and the host values
     * externs read */
    s->dev_in = calloc(n + (size_t)g->ninputs + TC_NDTYPES, sizeof(int));
    s->dev_pack = calloc(n + (size_t)g->ninputs + TC_NDTYPES, sizeof(int));
    s->out = calloc((size_t)g->noutputs + 1, sizeof(int));
    B->hmap = malloc(sizeof(int) * n);
    B->dmap = malloc(sizeof(int) * n);
    B->hout = malloc(sizeof(int) * n);
    B->slot = malloc(sizeof(int) * n);
    B->cross[0] = malloc(sizeof(int) * n);
    B->cross[1] = malloc(sizeof(int) * n);
    B->houts = malloc(sizeof(int) * (n + (size_t)g->noutputs));
    B->gin_host = malloc(sizeof(int) * ((size_t)g->ninputs + 1));
    B->gin_dev = malloc(sizeof(int) * ((size_t)g->ninputs + 1));
    if (!B->gin_host || !B->gin_dev || !s->host || !s->dev || !s->host_in || !s->dev_in || !s->dev_pack
        || !s->out || !B->hmap || !B->dmap || !B->hout || !B->slot
        || !B->cross[0] || !B->cross[1] || !B->houts) {
        return -2;
    }
    for (size_t i = 0; i < n; i++) {
        B->hmap[i] = B->dmap[i] = B->hout[i] = B->slot[i] = -1;
        B->cross[0][i] = B->cross[1][i] = -1;
    }
    for (int d = 0; d < TC_NDTYPES; d++) {
        B->pack_of[d] = -1;
    }
    for (int k = 0; k < g->ninputs; k++) {
        B->gin_host[k] = B->gin_dev[k] = -1;
    }
    s->dev->cuda = 1;
    int rc = plan_packs(B);
    for (int i = 0; rc == 0 && i < g->nnodes; i++) {
        rc = place_node(B, i, device, err, errlen);
    }
    return rc == 0 ? split_outputs(B) : rc;
}

int
tc_graph_split(tc_graph *g, tc_split *s, int device, char *err,
               size_t errlen)
{
    memset(s, 0, sizeof(*s));
    int any = 0;
    tc_graph_place_all(g);
    for (int i = 0; i < g->nnodes; i++) {
        any |= g->nodes[i].place == TC_PLACE_HOST;
    }
    if (!g->cuda || !any) {
        return 0;
    }
    builder B = {.g = g, .s = s};
    int rc = build(&B, device, err, errlen);
    free(B.hmap);
    free(B.dmap);
    free(B.hout);
    free(B.slot);
    free(B.gin_host);
    free(B.gin_dev);
    free(B.cross[0]);
    free(B.cross[1]);
    free(B.houts);
    if (rc < 0) {
        tc_split_free(s);
        return rc;
    }
    return 1;
}
