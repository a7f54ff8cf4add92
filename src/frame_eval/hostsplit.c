/* hostsplit.c - run a CUDA graph's host part, then its device part
 * (hostsplit.h, graph/place.c). */
#include "hostsplit.h"

typedef struct {
    const tc_backend *be[2];    /* the CPU's, the device's */
    void *code[2];              /* NULL: that part runs nothing */
    int nin[2], nout[2];
    int *host_in, *dev_in, *out;
    unsigned char *dev_copy;
    int noutputs;
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
    free(c->out);
    free(c->dev_copy);
    Py_XDECREF(c->device);
    Py_XDECREF(c->to_kw);
    free(c);
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
    c->out = s->out;
    c->dev_copy = s->dev_copy;
    s->host_in = s->dev_in = s->out = NULL;
    s->dev_copy = NULL;
    c->noutputs = noutputs;
    PyObject *torch = PyImport_ImportModule("torch");
    c->device = torch ? PyObject_CallMethod(torch, "device", "si", "cuda",
                                            device) : NULL;
    c->to_kw = Py_BuildValue("(s)", "non_blocking");
    Py_XDECREF(torch);
    if (c->device == NULL || c->to_kw == NULL) {
        split_free(c);
        return NULL;
    }
    return c;
}

/* t.to(device, non_blocking=True): a 0-d CPU value a kernel reads (a copy
 * from pageable memory is staged at once: the CPU tensor may change right
 * after, as an optimizer's step counter does). */
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
        PyObject *src = c->dev_in[k] >= 0 ? inputs[c->dev_in[k]]
                                          : hout[-1 - c->dev_in[k]];
        din[k] = c->dev_copy[k] ? to_device(c, src) : Py_NewRef(src);
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
