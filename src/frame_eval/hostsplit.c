/* hostsplit.c - run a CUDA graph's host part, then its device part
 * (hostsplit.h, graph/place.c). */
#include "hostsplit.h"

#include "../runtime/torch_tensor.h"

typedef struct {
    const tc_backend *be[2];    /* the CPU's, the device's */
    void *code[2];              /* NULL: that part runs nothing */
    int nin[2], nout[2];
    int *host_in, *dev_in, *dev_pack, *out;
    int noutputs;
    /* the packs (graph.h tc_split): sources, and a CPU tensor per pack
     * that is filled, then copied to the device, on every call */
    int npacks;
    int pack_n[TC_NDTYPES];
    int *pack_src[TC_NDTYPES];
    size_t item_size[TC_NDTYPES];
    PyObject *staging[TC_NDTYPES];
    char *staging_ptr[TC_NDTYPES];
    PyObject *device;           /* torch.device("cuda:N") */
    PyObject *to_kw;            /* ("non_blocking",) */
} split_code;

static void
split_free(void *h)
{
    split_code *c = h;
    if (c == NULL) {
        return;
    }
    for (int p = 0; p < 2; p++) {
        if (c->code[p] != NULL) {
            c->be[p]->free(c->code[p]);
        }
    }
    free(c->host_in);
    free(c->dev_in);
    free(c->dev_pack);
    free(c->out);
    for (int p = 0; p < c->npacks; p++) {
        free(c->pack_src[p]);
        Py_XDECREF(c->staging[p]);
    }
    Py_XDECREF(c->device);
    Py_XDECREF(c->to_kw);
    free(c);
}

/* torch.empty(n, dtype=dt): a pack's values on the CPU, reused on every
 * call (a copy from pageable memory is staged before it returns). */
static PyObject *
staging_tensor(PyObject *torch, tc_dtype dt, int n)
{
    PyObject *dto = tc_alloc_dtype_object(dt);
    PyObject *empty = dto ? PyObject_GetAttrString(torch, "empty") : NULL;
    PyObject *args = empty ? Py_BuildValue("(i)", n) : NULL;
    PyObject *kw = args ? Py_BuildValue("{s:O}", "dtype", dto) : NULL;
    PyObject *t = kw ? PyObject_Call(empty, args, kw) : NULL;
    Py_XDECREF(empty);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    return t;
}

void *
tc_hostsplit_make(tc_split *s, int noutputs, const tc_backend *be[2],
                  void *code[2], int device)
{
    split_code *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        for (int p = 0; p < 2; p++) {
            if (code[p] != NULL) {
                be[p]->free(code[p]);
            }
        }
        PyErr_NoMemory();
        return NULL;
    }
    tc_graph *gs[2] = {s->host, s->dev};
    for (int p = 0; p < 2; p++) {
        c->be[p] = be[p];
        c->code[p] = code[p];
        c->nin[p] = gs[p]->ninputs;
        c->nout[p] = gs[p]->noutputs;
    }
    c->host_in = s->host_in;
    c->dev_in = s->dev_in;
    c->dev_pack = s->dev_pack;
    c->out = s->out;
    s->host_in = s->dev_in = s->dev_pack = s->out = NULL;
    c->noutputs = noutputs;
    c->npacks = s->npacks;
    for (int p = 0; p < s->npacks; p++) {
        c->pack_n[p] = s->pack_n[p];
        c->pack_src[p] = s->pack_src[p];
        c->item_size[p] = tc_dtype_size(s->pack_dtype[p]);
        s->pack_src[p] = NULL;
    }
    s->npacks = 0;
    PyObject *torch = PyImport_ImportModule("torch");
    c->device = torch ? PyObject_CallMethod(torch, "device", "si", "cuda",
                                            device) : NULL;
    c->to_kw = Py_BuildValue("(s)", "non_blocking");
    int rc = torch && c->device && c->to_kw ? 0 : -1;
    for (int p = 0; rc == 0 && p < c->npacks; p++) {
        c->staging[p] = staging_tensor(torch, s->pack_dtype[p], c->pack_n[p]);
        void *ptr = NULL;
        rc = c->staging[p] ? tc_alloc_data_ptr(c->staging[p], &ptr) : -1;
        c->staging_ptr[p] = ptr;
    }
    Py_XDECREF(torch);
    if (rc < 0) {
        split_free(c);
        return NULL;
    }
    return c;
}

/* t.to(device, non_blocking=True): the CPU values kernels read (a copy
 * from pageable memory is staged before it returns: the staging tensor
 * may be refilled right after). */
static PyObject *
to_device(const split_code *c, PyObject *t)
{
    static PyObject *to_name;
    if (to_name == NULL
        && (to_name = PyUnicode_InternFromString("to")) == NULL) {
        return NULL;
    }
    PyObject *args[3] = {t, c->device, Py_True};
    return PyObject_VectorcallMethod(to_name, args,
                                     2 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                     c->to_kw);
}

/* A value coded as tc_split codes them: >= 0 an input, < 0 a host
 * output (borrowed). */
static PyObject *
source(int code, PyObject *const *inputs, PyObject *const *hout)
{
    return code >= 0 ? inputs[code] : hout[-1 - code];
}

/* Pack p on the device: its 0-d CPU values gathered into the staging
 * tensor, then one copy.  New reference, or NULL with an exception. */
static PyObject *
pack(const split_code *c, int p, PyObject *const *inputs,
     PyObject *const *hout)
{
    size_t sz = c->item_size[p];
    for (int k = 0; k < c->pack_n[p]; k++) {
        void *v;
        if (tc_alloc_data_ptr(source(c->pack_src[p][k], inputs, hout),
                              &v) < 0) {
            return NULL;
        }
        memcpy(c->staging_ptr[p] + (size_t)k * sz, v, sz);
    }
    return to_device(c, c->staging[p]);
}

static void
release(PyObject **v, int n)
{
    for (int i = 0; i < n; i++) {
        Py_CLEAR(v[i]);
    }
}

static int
split_run(void *h, PyObject *const *inputs, Py_ssize_t ninputs,
          PyObject **outputs)
{
    (void)ninputs;
    split_code *c = h;
    int nh = c->nin[0], nd = c->nin[1];
    PyObject *hin[nh + 1], *hout[c->nout[0] + 1], *din[nd + 1];
    PyObject *dout[c->nout[1] + 1];
    memset(hout, 0, sizeof(hout));
    memset(din, 0, sizeof(din));
    memset(dout, 0, sizeof(dout));
    int rc = -1;
    for (int k = 0; k < nh; k++) {
        hin[k] = inputs[c->host_in[k]];
    }
    if (c->code[0] != NULL
        && c->be[0]->run(c->code[0], hin, nh, hout) < 0) {
        goto done;
    }
    for (int k = 0; k < nd; k++) {
        int p = c->dev_pack[k];
        din[k] = p >= 0 ? pack(c, p, inputs, hout)
                 : Py_NewRef(source(c->dev_in[k], inputs, hout));
        if (din[k] == NULL) {
            goto done;
        }
    }
    if (c->code[1] != NULL
        && c->be[1]->run(c->code[1], din, nd, dout) < 0) {
        goto done;
    }
    for (int j = 0; j < c->noutputs; j++) {
        outputs[j] = Py_NewRef(c->out[j] >= 0 ? dout[c->out[j]]
                                              : hout[-1 - c->out[j]]);
    }
    rc = 0;
done:
    release(hout, c->nout[0]);
    release(din, nd);
    release(dout, c->nout[1]);
    return rc;
}

static int
split_nkernels(const void *h)
{
    const split_code *c = h;
    int n = 0;
    for (int p = 0; p < 2; p++) {
        n += c->code[p] != NULL ? c->be[p]->nkernels(c->code[p]) : 0;
    }
    return n;
}

static int
split_ncompiled(const void *h)
{
    const split_code *c = h;
    int n = 0;
    for (int p = 0; p < 2; p++) {
        if (c->code[p] != NULL) {
            n += c->be[p]->ncompiled != NULL ? c->be[p]->ncompiled(c->code[p])
                                             : c->be[p]->nkernels(c->code[p]);
        }
    }
    return n;
}

static const char *
split_code_kind(void)
{
    return "C (host part) + PTX";
}

static void *
split_compile(tc_plan *plan, int device, char **code_text)
{
    (void)plan;
    (void)device;
    (void)code_text;
    PyErr_SetString(PyExc_SystemError, "tcjit: a host/device split is made "
                    "by tc_hostsplit_make, not from one plan");
    return NULL;
}

const tc_backend tc_hostsplit_backend = {
    .name = "cpu+cuda",
    .compile = split_compile,
    .run = split_run,
    .free = split_free,
    .nkernels = split_nkernels,
    .ncompiled = split_ncompiled,
    .code_kind = split_code_kind,
};
