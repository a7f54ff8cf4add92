/* extern_call.c - extern steps through torch (see extern_call.h).
 *
 * Each call is a prebuilt argument vector: the operand slots are filled per
 * call, everything else (None for a missing bias, stride tuples, keyword
 * values) is built once.  The argument conventions are those of the torch
 * functions the ops' registry entries name (ops.h tc_extern_spec.callee);
 * the attributes come from extern.h.
 */
#include "extern_call.h"
#include "extern_table.h"
#include "tensor_alloc.h"
#include "../graph/extern.h"
#include "../graph/ops.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ARGV 12

typedef struct {
    PyObject *fn;                  /* the torch callable */
    int nargv;                     /* positional + keyword values */
    PyObject *argv[MAX_ARGV];      /* NULL: an operand slot */
    PyObject *kwnames;             /* names of the last entries, or NULL */
    int slot[TC_MAX_OP_INPUTS];    /* operand k -> argv index, or its
                                      index in the pack for k >= pack_from */
    PyObject *pack;                /* cat/stack: a list of the operands;
                                      index: a tuple of slice(None) and the
                                      index tensors.  The template (NULL
                                      items at operand places); a new one
                                      is filled per call, at argv[pack_argv] */
    int pack_argv, pack_from;
    PyObject *view[TC_MAX_OP_INPUTS][3];  /* as_strided args, views only */
    PyObject *sizes, *strides;     /* the result layout kernels assume */
    PyObject *dtype;               /* borrowed */
    tc_layout out;                 /* the same layout */
    int op, nin;
    int generic;                   /* "extern": its call (extern_table.h),
                                      else -1 */
    int items;                     /* "extern": returns a sequence of this
                                      many tensors (kept as is: extern_item
                                      calls read it), 0: one tensor */
    int item;                      /* "extern_item": the item, else -1 */
    int write;                     /* "write_box": operand 1 copied into
                                      the view box describes of operand 0,
                                      which the call returns */
    PyObject *box[3];              /* its as_strided args */
} xcall;

struct tc_extern_rt {
    const tc_plan *plan;
    xcall *calls;
};

static PyObject *torch_mod, *nn_functional, *nn_c, *tensor_type;
static PyObject *str_shape, *str_stride, *str_dtype, *str_copy,
    *str_new_empty_strided, *str_data;

static int
init_once(void)
{
    if (str_copy != NULL) {
        return 0;
    }
    if (tc_alloc_init() < 0) {
        return -1;
    }
    torch_mod = PyImport_ImportModule("torch");
    nn_functional = PyImport_ImportModule("torch.nn.functional");
    nn_c = torch_mod ? PyObject_GetAttrString(torch_mod, "_C") : NULL;
    tensor_type = torch_mod ? PyObject_GetAttrString(torch_mod, "Tensor")
                            : NULL;
    Py_XSETREF(nn_c, nn_c ? PyObject_GetAttrString(nn_c, "_nn") : NULL);
    str_shape = PyUnicode_InternFromString("shape");
    str_stride = PyUnicode_InternFromString("stride");
    str_dtype = PyUnicode_InternFromString("dtype");
    str_new_empty_strided = PyUnicode_InternFromString("new_empty_strided");
    str_data = PyUnicode_InternFromString("data");
    str_copy = str_dtype && str_new_empty_strided && str_data
               ? PyUnicode_InternFromString("copy_") : NULL;
    if (!torch_mod || !nn_functional || !nn_c || !tensor_type || !str_shape
        || !str_stride || !str_copy) {
        Py_CLEAR(str_copy);
        return -1;
    }
    return 0;
}

/* ---- prepare ------------------------------------------------------------ */

static int
put(xcall *c, PyObject *v)
{
    if (v == NULL) {
        return -1;
    }
    if (c->nargv == MAX_ARGV) {
        Py_DECREF(v);
        PyErr_SetString(PyExc_RuntimeError, "tcjit extern: too many args");
        return -1;
    }
    c->argv[c->nargv++] = v;
    return 0;
}

static int
put_operand(xcall *c, int k)
{
    c->slot[k] = c->nargv;
    c->argv[c->nargv++] = NULL;
    return 0;
}

static int
put_operands(xcall *c, int from, int to)
{
    for (int k = from; k < to; k++) {
        put_operand(c, k);
    }
    return 0;
}

static PyObject *
pair(const int64_t *v, int n)
{
    return tc_int_tuple(n, v);
}

/* torch.conv2d(input, weight, bias, stride, padding, dilation, groups) */
static int
spec_conv(xcall *c, const tc_extern_call *x, int nsp)
{
    int64_t st[2], pad[2], dil[2];
    for (int d = 0; d < nsp; d++) {
        st[d] = x->xattr[TC_XA_CONV_STRIDE + d];
        pad[d] = x->xattr[TC_XA_CONV_PADDING + d];
        dil[d] = x->xattr[TC_XA_CONV_DILATION + d];
    }
    put_operands(c, 0, 2);
    if (x->nin == 3) {
        put_operand(c, 2);
    }
    else if (put(c, Py_NewRef(Py_None)) < 0) {
        return -1;
    }
    if (put(c, pair(st, nsp)) < 0 || put(c, pair(pad, nsp)) < 0
        || put(c, pair(dil, nsp)) < 0
        || put(c, PyLong_FromLongLong(x->xattr[TC_XA_CONV_GROUPS])) < 0) {
        return -1;
    }
    return 0;
}

/* F.scaled_dot_product_attention(q, k, v, attn_mask=, is_causal=, scale=) */
static int
spec_sdpa(xcall *c, const tc_extern_call *x)
{
    PyObject *names[3];
    int nkw = 0;
    put_operands(c, 0, 3);
    if (x->nin == 4) {
        names[nkw++] = PyUnicode_FromString("attn_mask");
        put_operand(c, 3);
    }
    names[nkw++] = PyUnicode_FromString("is_causal");
    if (put(c, PyBool_FromLong(x->xattr[TC_XA_SDPA_CAUSAL] != 0)) < 0) {
        goto error;
    }
    if (x->xattr[TC_XA_SDPA_HAS_SCALE]) {
        names[nkw++] = PyUnicode_FromString("scale");
        if (put(c, PyFloat_FromDouble(x->xfattr)) < 0) {
            goto error;
        }
    }
    c->kwnames = PyTuple_New(nkw);
    for (int i = 0; i < nkw; i++) {
        if (c->kwnames == NULL || names[i] == NULL) {
            goto error;
        }
        PyTuple_SET_ITEM(c->kwnames, i, names[i]);
        names[i] = NULL;
    }
    return 0;
error:
    for (int i = 0; i < nkw; i++) {
        Py_XDECREF(names[i]);
    }
    return -1;
}

/* kwnames from a NULL-terminated list of names (argv already holds the
 * values, last). */
static int
set_kwnames(xcall *c, const char *const *names)
{
    int n = 0;
    while (names[n] != NULL) {
        n++;
    }
    c->kwnames = PyTuple_New(n);
    for (int i = 0; c->kwnames != NULL && i < n; i++) {
        PyObject *s = PyUnicode_InternFromString(names[i]);
        if (s == NULL) {
            Py_CLEAR(c->kwnames);
            break;
        }
        PyTuple_SET_ITEM(c->kwnames, i, s);
    }
    return c->kwnames != NULL ? 0 : -1;
}

/* F.cross_entropy / F.nll_loss(input, target, weight=, ignore_index=,
 * reduction=[, label_smoothing=]) */
static int
spec_loss(xcall *c, const tc_extern_call *x, int ce)
{
    static const char *const reductions[3] = {"none", "mean", "sum"};
    static const char *const names[] = {"weight", "ignore_index",
                                        "reduction", "label_smoothing", NULL};
    static const char *const names_nll[] = {"weight", "ignore_index",
                                            "reduction", NULL};
    put_operands(c, 0, 2);
    if (x->nin == 3) {
        put_operand(c, 2);
    }
    else if (put(c, Py_NewRef(Py_None)) < 0) {
        return -1;
    }
    int64_t red = x->xattr[TC_XA_LOSS_REDUCTION];
    if (put(c, PyLong_FromLongLong(x->xattr[TC_XA_LOSS_IGNORE_INDEX])) < 0
        || put(c, PyUnicode_FromString(reductions[red >= 0 && red < 3
                                                  ? red : 1])) < 0
        || (ce && put(c, PyFloat_FromDouble(x->xfattr)) < 0)) {
        return -1;
    }
    return set_kwnames(c, ce ? names : names_nll);
}

/* F.group_norm(input, num_groups, weight=None, bias=None, eps=) */
static int
spec_group_norm(xcall *c, const tc_extern_call *x)
{
    int k = 1;
    put_operand(c, 0);
    if (put(c, PyLong_FromLongLong(x->xattr[TC_XA_GN_GROUPS])) < 0) {
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        if (x->xattr[TC_XA_GN_HAS_WEIGHT + i]) {
            put_operand(c, k++);
        }
        else if (put(c, Py_NewRef(Py_None)) < 0) {
            return -1;
        }
    }
    return put(c, PyFloat_FromDouble(x->xfattr));
}

/* Operands from.. of the call go into a container at the next argv
 * place (template t, see xcall.pack). */
static int
spec_pack(xcall *c, int from, PyObject *t)
{
    if (t == NULL) {
        return -1;
    }
    c->pack = t;
    c->pack_from = from;
    c->pack_argv = c->nargv;
    return put(c, Py_NewRef(Py_None));  /* replaced per call */
}

/* Tensor.__getitem__(x, (slice(None), i, ...)): operand 0 is x, the index
 * tensors fill the dims of the mask, every other dim up to the last
 * indexed one is a full slice. */
static int
spec_index(xcall *c, const tc_extern_call *x)
{
    int64_t mask = x->xattr[TC_XA_INDEX_DIMS];
    int n = 0, k = 1;
    while (mask >> n) {
        n++;
    }
    put_operand(c, 0);
    PyObject *t = PyTuple_New(n);
    if (spec_pack(c, 1, t) < 0) {
        return -1;
    }
    for (int d = 0; d < n; d++) {
        if (mask >> d & 1) {
            c->slot[k++] = d;
            continue;
        }
        PyObject *all = PySlice_New(NULL, NULL, NULL);
        if (all == NULL) {
            return -1;
        }
        PyTuple_SET_ITEM(t, d, all);
    }
    return 0;
}

/* The torch callable an op's registry entry names (ops.h tc_extern_spec):
 * "torch.mm", "F.nll_loss", "Tensor.__getitem__", "torch._C._nn.linear". */
static PyObject *
callee(const char *path)
{
    const struct {
        const char *prefix;
        PyObject *owner;
    } owners[] = {{"torch._C._nn.", nn_c}, {"torch.", torch_mod},
                  {"F.", nn_functional}, {"Tensor.", tensor_type}};
    for (size_t i = 0; i < sizeof(owners) / sizeof(owners[0]); i++) {
        size_t n = strlen(owners[i].prefix);
        if (strncmp(path, owners[i].prefix, n) == 0) {
            return PyObject_GetAttrString(owners[i].owner, path + n);
        }
    }
    PyErr_Format(PyExc_RuntimeError, "tcjit extern: unknown callee %s", path);
    return NULL;
}

static int
spec_for(xcall *c, const tc_extern_call *x)
{
    const char *op = tc_ops[x->op].name;
    int rc = 0;
    c->generic = c->item = -1;
    if (!strcmp(op, "extern")) {
        /* the call table makes the call (extern_table.h) */
        c->generic = (int)x->xattr[TC_XA_GENERIC_CALL];
        c->items = (int)x->xattr[TC_XA_GENERIC_ITEMS];
        return 0;
    }
    if (!strcmp(op, "extern_item")) {
        c->item = (int)x->xattr[TC_XA_ITEM];
        return 0;
    }
    if (!strcmp(op, "write_box")) {
        c->write = 1;           /* its box: prepare_call (the layouts) */
        return 0;
    }
    if (!strcmp(op, "linear")) {
        put_operands(c, 0, x->nin);
    }
    else if (!strcmp(op, "sdpa")) {
        rc = spec_sdpa(c, x);
    }
    else if (!strcmp(op, "embedding")) {
        /* torch.embedding(weight, indices) */
        put_operand(c, 1);
        put_operand(c, 0);
    }
    else if (!strcmp(op, "conv1d") || !strcmp(op, "conv2d")) {
        rc = spec_conv(c, x, op[4] - '0');
    }
    else if (!strcmp(op, "cross_entropy") || !strcmp(op, "nll_loss")) {
        rc = spec_loss(c, x, op[0] == 'c');
    }
    else if (!strcmp(op, "group_norm")) {
        rc = spec_group_norm(c, x);
    }
    else if (!strcmp(op, "cat") || !strcmp(op, "stack")) {
        rc = spec_pack(c, 0, PyList_New(x->nin));
        for (int k = 0; k < x->nin; k++) {
            c->slot[k] = k;
        }
        rc = rc < 0 ? rc : put(c, PyLong_FromLongLong(x->xattr[TC_XA_CAT_DIM]));
    }
    else if (!strcmp(op, "index")) {
        rc = spec_index(c, x);
    }
    else {
        /* mm, bmm, matmul, addmm, baddbmm: tensors in order */
        put_operands(c, 0, x->nin);
    }
    if (rc < 0) {
        return -1;
    }
    c->fn = callee(tc_ops[x->op].xspec.callee);
    return c->fn != NULL ? 0 : -1;
}

/* The call of x whose result has dtype dt and layout out. */
static int
prepare_call(xcall *c, const tc_extern_call *x, tc_dtype dt,
             const tc_layout *out)
{
    if (spec_for(c, x) < 0) {
        return -1;
    }
    c->op = x->op;
    c->nin = x->nin;
    c->out = *out;
    c->dtype = tc_alloc_dtype_object(dt);
    c->sizes = tc_int_tuple(out->ndim, out->sizes);
    c->strides = tc_int_tuple(out->ndim, out->strides);
    if (c->write) {
        /* the box: operand 1's sizes, operand 0's strides (the result's) */
        tc_output_desc box = {.is_view = 1, .layout = x->in[1].layout,
                              .offset = x->xattr[TC_XA_BOX_OFFSET]};
        memcpy(box.layout.strides, out->strides, sizeof(out->strides));
        if (tc_alloc_view_argv(c->box, &box) < 0) {
            return -1;
        }
    }
    return c->sizes && c->strides && c->dtype ? 0 : -1;
}

/* A float16 / bfloat16 linear whose out_features is not a multiple of 8
 * goes through python/tcjit/_padmm.py (cuBLAS takes a slow kernel for its
 * misaligned result rows on CUDA). */
static int
use_padded_linear(xcall *c, const tc_buffer *out)
{
    static PyObject *padded;
    const tc_layout *l = &out->layout;
    if (strcmp(tc_ops[c->op].name, "linear") != 0
        || (out->dtype != TC_F16 && out->dtype != TC_BF16) || l->ndim == 0
        || l->sizes[l->ndim - 1] % 8 == 0 || l->sizes[l->ndim - 1] < 64) {
        return 0;
    }
    if (padded == NULL) {
        PyObject *m = PyImport_ImportModule("tcjit._padmm");
        padded = m ? PyObject_GetAttrString(m, "linear") : NULL;
        Py_XDECREF(m);
        if (padded == NULL) {
            return -1;
        }
    }
    Py_SETREF(c->fn, Py_NewRef(padded));
    return 0;
}

static int
prepare_step(xcall *c, const tc_plan *p, const tc_extern_call *x)
{
    const tc_buffer *out = &p->buffers[x->out_buffer];
    if (prepare_call(c, x, out->dtype, &out->layout) < 0
        || use_padded_linear(c, out) < 0) {
        return -1;
    }
    for (int k = 0; k < x->nin; k++) {
        if (x->in[k].is_view && tc_alloc_view_argv(c->view[k], &x->in[k]) < 0) {
            return -1;
        }
    }
    return 0;
}

static void
clear_call(xcall *c)
{
    Py_CLEAR(c->fn);
    Py_CLEAR(c->pack);
    for (int i = 0; i < c->nargv; i++) {
        Py_CLEAR(c->argv[i]);
    }
    Py_CLEAR(c->kwnames);
    for (int k = 0; k < TC_MAX_OP_INPUTS; k++) {
        for (int j = 0; j < 3; j++) {
            Py_CLEAR(c->view[k][j]);
        }
    }
    Py_CLEAR(c->sizes);
    Py_CLEAR(c->strides);
    for (int j = 0; j < 3; j++) {
        Py_CLEAR(c->box[j]);
    }
}

tc_extern_rt *
tc_extern_prepare(const tc_plan *p)
{
    if (p->nexterns == 0) {
        return NULL;
    }
    if (init_once() < 0) {
        return NULL;
    }
    tc_extern_rt *x = calloc(1, sizeof(*x));
    if (x == NULL || !(x->calls = calloc(p->nexterns, sizeof(xcall)))) {
        free(x);
        PyErr_NoMemory();
        return NULL;
    }
    x->plan = p;
    for (int e = 0; e < p->nexterns; e++) {
        for (int k = 0; k < p->externs[e].nin; k++) {
            int b = p->externs[e].in[k].buffer;
            if (b < 0 || b >= p->nbuffers
                || p->buffers[b].kind == TC_BUF_TEMP) {
                PyErr_SetString(PyExc_RuntimeError,
                                "tcjit extern: operand without a tensor");
                tc_extern_free(x);
                return NULL;
            }
        }
        if (prepare_step(&x->calls[e], p, &p->externs[e]) < 0) {
            tc_extern_free(x);
            return NULL;
        }
    }
    return x;
}

void
tc_extern_free(tc_extern_rt *x)
{
    if (x == NULL) {
        return;
    }
    for (int e = 0; e < x->plan->nexterns; e++) {
        clear_call(&x->calls[e]);
    }
    free(x->calls);
    free(x);
}

/* ---- run ---------------------------------------------------------------- */

/* The strides kernels assume, ignoring dims of size 1 (never stepped). */
static int
strides_match(PyObject *st, const tc_layout *l)
{
    if (!PyTuple_Check(st) || PyTuple_GET_SIZE(st) != l->ndim) {
        return 0;
    }
    for (int d = 0; d < l->ndim; d++) {
        if (l->sizes[d] > 1
            && PyLong_AsLongLong(PyTuple_GET_ITEM(st, d)) != l->strides[d]) {
            return 0;
        }
    }
    return 1;
}

/* r as the graph assumed it: same sizes and dtype (else an internal
 * error, never a wrong read), strides fixed with a copy if need be. */
static PyObject *
conform(const xcall *c, PyObject *r)
{
    const char *op = tc_ops[c->op].name;
    PyObject *shape = PyObject_GetAttr(r, str_shape);
    PyObject *dtype = shape ? PyObject_GetAttr(r, str_dtype) : NULL;
    PyObject *st = dtype ? PyObject_CallMethodNoArgs(r, str_stride) : NULL;
    int ok = -1;
    if (st != NULL) {
        ok = PyObject_RichCompareBool(shape, c->sizes, Py_EQ);
    }
    if (ok == 0 || (ok == 1 && dtype != c->dtype)) {
        PyErr_Format(PyExc_RuntimeError, "tcjit: extern op %s returned "
                     "%R %R, the graph expected %R %R (please report)",
                     op, shape, dtype, c->sizes, c->dtype);
        ok = -1;
    }
    if (ok == 1 && !strides_match(st, &c->out)) {
        /* r.new_empty_strided(sizes, strides).copy_(r): same dtype and
         * device, the layout kernels read */
        PyObject *dst = PyObject_CallMethodObjArgs(r, str_new_empty_strided,
                                                   c->sizes, c->strides, NULL);
        PyObject *res = dst ? PyObject_CallMethodOneArg(dst, str_copy, r)
                            : NULL;
        Py_XDECREF(res);
        Py_SETREF(r, res != NULL ? dst : NULL);
        if (res == NULL) {
            Py_XDECREF(dst);
        }
        ok = r != NULL ? 1 : -1;
    }
    Py_XDECREF(shape);
    Py_XDECREF(dtype);
    Py_XDECREF(st);
    if (ok != 1) {
        Py_CLEAR(r);
    }
    return r;
}

/* A new container like c->pack with operands pack_from.. in their places
 * (a fresh one per call: the operands are not kept alive between calls). */
static PyObject *
fill_pack(const xcall *c, PyObject *const *ops, int nin)
{
    int is_list = PyList_Check(c->pack);
    Py_ssize_t n = is_list ? PyList_GET_SIZE(c->pack)
                           : PyTuple_GET_SIZE(c->pack);
    PyObject *out = is_list ? PyList_New(n) : PyTuple_New(n);
    if (out == NULL) {
        return NULL;
    }
    PyObject **dst = is_list ? ((PyListObject *)out)->ob_item
                             : ((PyTupleObject *)out)->ob_item;
    PyObject **src = is_list ? ((PyListObject *)c->pack)->ob_item
                             : ((PyTupleObject *)c->pack)->ob_item;
    for (Py_ssize_t i = 0; i < n; i++) {
        dst[i] = Py_XNewRef(src[i]);
    }
    for (int k = c->pack_from; k < nin; k++) {
        Py_XSETREF(dst[c->slot[k]], Py_NewRef(ops[k]));
    }
    return out;
}

/* write_box: ops[1] copied into the box of ops[0]; ops[0] itself.  The
 * copy goes through ops[0].data, which does not move ops[0]'s version
 * counter: the write-back sets eager's count (it finds the output is the
 * input, writeback.h). */
static PyObject *
write_box(const xcall *c, PyObject *const *ops)
{
    PyObject *data = PyObject_GetAttr(ops[0], str_data);
    PyObject *v = data ? tc_alloc_view(data, c->box) : NULL;
    PyObject *r = v ? PyObject_CallMethodOneArg(v, str_copy, ops[1]) : NULL;
    Py_XDECREF(data);
    Py_XDECREF(v);
    if (r == NULL) {
        return NULL;
    }
    Py_DECREF(r);
    return Py_NewRef(ops[0]);
}

/* Calls torch for c with operands ops[0..nin-1]; the result conformed.
 * New reference, or NULL with an exception (torch's own). */
static PyObject *
call_op(const xcall *c, PyObject *const *ops)
{
    if (c->write) {
        return write_box(c, ops);
    }
    if (c->generic >= 0) {
        PyObject *r = tc_xtable_invoke(c->generic, ops);
        return r == NULL || c->items > 0 ? r : conform(c, r);
    }
    if (c->item >= 0) {
        PyObject *r = PySequence_GetItem(ops[0], c->item);
        return r != NULL ? conform(c, r) : NULL;
    }
    PyObject *argv[MAX_ARGV];
    PyObject *pack = NULL;
    memcpy(argv, c->argv, sizeof(PyObject *) * c->nargv);
    if (c->pack != NULL) {
        pack = fill_pack(c, ops, c->nin);
        if (pack == NULL) {
            return NULL;
        }
        argv[c->pack_argv] = pack;
    }
    for (int k = 0; k < (c->pack ? c->pack_from : c->nin); k++) {
        argv[c->slot[k]] = ops[k];
    }
    Py_ssize_t nkw = c->kwnames ? PyTuple_GET_SIZE(c->kwnames) : 0;
    PyObject *r = PyObject_Vectorcall(c->fn, argv, c->nargv - nkw,
                                      c->kwnames);
    Py_XDECREF(pack);
    return r != NULL ? conform(c, r) : NULL;
}

_Thread_local int tc_extern_running;

static PyObject *
call_torch(const xcall *c, PyObject *const *ops)
{
    tc_extern_running++;
    PyObject *r = call_op(c, ops);
    tc_extern_running--;
    return r;
}

/* tc_extern_set_keep's dict: per thread, since a compiled forward on
 * another thread runs while torch releases the GIL in this one's call */
static _Thread_local PyObject *keep_calls;

PyObject *
tc_extern_set_keep(PyObject *keep)
{
    PyObject *prev = keep_calls;
    keep_calls = keep;
    return prev;
}

/* keep_calls[node](*ops), or NULL: *kept says whether node is a key (0
 * with an exception: the lookup failed). */
static PyObject *
call_kept(const tc_extern_call *xc, PyObject *const *ops, int *kept)
{
    PyObject *key = PyLong_FromLong(xc->node);
    PyObject *f = key ? PyDict_GetItemWithError(keep_calls, key) : NULL;
    Py_XDECREF(key);
    *kept = f != NULL;
    return f ? PyObject_Vectorcall(f, ops, (size_t)xc->nin, NULL) : NULL;
}

int
tc_extern_run(const tc_extern_rt *x, int e, PyObject **objs, void **ptrs,
              int want_ptr)
{
    const tc_extern_call *xc = &x->plan->externs[e];
    const xcall *c = &x->calls[e];
    PyObject *ops[TC_MAX_OP_INPUTS] = {NULL};
    PyObject *r = NULL;
    int rc = -1, kept = 0;
    for (int k = 0; k < xc->nin; k++) {
        PyObject *base = objs[xc->in[k].buffer];
        const tc_output_desc *in = &xc->in[k];
        ops[k] = !in->is_view ? Py_XNewRef(base)
                 : in->detached ? tc_alloc_view_detached(base, c->view[k])
                 : tc_alloc_view(base, c->view[k]);
        if (ops[k] == NULL) {
            goto done;
        }
    }
    if (keep_calls != NULL) {
        r = call_kept(xc, ops, &kept);
        if (r == NULL && (kept || PyErr_Occurred())) {
            goto done;
        }
    }
    if (!kept) {
        r = call_torch(c, ops);
    }
    if (r == NULL) {
        goto done;
    }
    Py_XSETREF(objs[xc->out_buffer], r);
    rc = want_ptr ? tc_alloc_data_ptr(r, &ptrs[xc->out_buffer]) : 0;
done:
    for (int k = 0; k < xc->nin; k++) {
        Py_XDECREF(ops[k]);
    }
    return rc;
}

/* ---- one extern node as a Python callable (graph replay) ---------------- */

typedef struct {
    PyObject_HEAD
    xcall c;
} extern_callable;

static void
callable_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    clear_call(&((extern_callable *)self)->c);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
callable_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    const xcall *c = &((extern_callable *)self)->c;
    if (PyTuple_GET_SIZE(args) != c->nin
        || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_Format(PyExc_TypeError, "tcjit extern %s takes %d positional "
                     "operands", tc_ops[c->op].name, c->nin);
        return NULL;
    }
    return call_torch(c, ((PyTupleObject *)args)->ob_item);
}

static PyObject *
callable_repr(PyObject *self)
{
    const xcall *c = &((extern_callable *)self)->c;
    if (c->generic >= 0) {
        return PyUnicode_FromFormat("<tcjit extern %s>",
                                    tc_xtable_name(c->generic));
    }
    if (c->item >= 0) {
        return PyUnicode_FromFormat("<tcjit extern item %d>", c->item);
    }
    if (c->write) {
        return PyUnicode_FromString("<tcjit extern write_box>");
    }
    return PyUnicode_FromFormat("<tcjit extern %s: %R>", tc_ops[c->op].name,
                                c->fn);
}

static PyType_Slot callable_slots[] = {
    {Py_tp_dealloc, callable_dealloc},
    {Py_tp_call, callable_call},
    {Py_tp_repr, callable_repr},
    {0, NULL},
};

static PyType_Spec callable_spec = {
    .name = "tcjit._C.ExternCall",
    .basicsize = sizeof(extern_callable),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = callable_slots,
};

PyObject *
tc_extern_callable(const tc_graph *g, int id)
{
    static PyObject *type;
    const tc_node *n = &g->nodes[id];
    if (init_once() < 0) {
        return NULL;
    }
    if (type == NULL && (type = PyType_FromSpec(&callable_spec)) == NULL) {
        return NULL;
    }
    /* (PyObject_New takes the instance's reference to its heap type) */
    extern_callable *self = PyObject_New(extern_callable,
                                         (PyTypeObject *)type);
    if (self == NULL) {
        return NULL;
    }
    memset(&self->c, 0, sizeof(self->c));
    tc_extern_call x = {.node = id, .op = n->op, .nin = n->nin,
                        .xfattr = n->xfattr};
    memcpy(x.xattr, n->xattr, sizeof(x.xattr));
    for (int k = 0; k < n->nin; k++) {
        x.in[k].layout = g->nodes[n->in[k]].layout;
    }
    if (prepare_call(&self->c, &x, n->dtype, &n->layout) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

char *
tc_extern_format(const tc_plan *p, int e)
{
    const tc_extern_call *x = &p->externs[e];
    size_t cap = 64 + 16 * (size_t)x->nin;
    char *s = malloc(cap);
    if (s == NULL) {
        return NULL;
    }
    const char *name = tc_ops[x->op].name;
    if (!strcmp(name, "extern")) {
        name = tc_xtable_name((int)x->xattr[TC_XA_GENERIC_CALL]);
    }
    int n = snprintf(s, cap, "// extern %%%d = torch %s(", x->node, name);
    for (int k = 0; k < x->nin; k++) {
        n += snprintf(s + n, cap - n, "%sbuf%d%s", k ? ", " : "",
                      x->in[k].buffer, x->in[k].is_view ? " (view)" : "");
    }
    snprintf(s + n, cap - n, ") -> buf%d\n", x->out_buffer);
    return s;
}
