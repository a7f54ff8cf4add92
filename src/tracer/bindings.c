/* bindings.c - the table of traceable Python callables.
 *
 * Adding a torch function that maps onto a registry op is one line here.
 */
#include "bindings.h"

#include <ctype.h>
#include <string.h>

#define UNARY(path, op) {path, op, TC_CALL_OP, "input"}
#define BINARY(path, op) {path, op, TC_CALL_OP, "input, other"}
#define CAST(path, dt) {path, dt, TC_CALL_CAST_TO, "self"}

static const tc_binding_def binding_defs[] = {
    /* torch.* functions */
    {"torch.add", "add", TC_CALL_ADD_SUB, "input, other, *, alpha=1"},
    {"torch.sub", "sub", TC_CALL_ADD_SUB, "input, other, *, alpha=1"},
    {"torch.subtract", "sub", TC_CALL_ADD_SUB, "input, other, *, alpha=1"},
    BINARY("torch.mul", "mul"), BINARY("torch.multiply", "mul"),
    {"torch.div", "div", TC_CALL_DIV, "input, other, *, rounding_mode=None"},
    {"torch.divide", "div", TC_CALL_DIV, "input, other, *, rounding_mode=None"},
    BINARY("torch.true_divide", "div"),
    UNARY("torch.neg", "neg"), UNARY("torch.negative", "neg"),
    UNARY("torch.abs", "abs"), UNARY("torch.absolute", "abs"),
    UNARY("torch.exp", "exp"), UNARY("torch.log", "log"),
    UNARY("torch.sqrt", "sqrt"), UNARY("torch.rsqrt", "rsqrt"),
    UNARY("torch.sin", "sin"), UNARY("torch.cos", "cos"),
    UNARY("torch.tanh", "tanh"), UNARY("torch.sigmoid", "sigmoid"),
    UNARY("torch.relu", "relu"), UNARY("torch.square", "square"),
    UNARY("torch.reciprocal", "reciprocal"),
    UNARY("torch.erf", "erf"), UNARY("torch.special.erf", "erf"),
    {"torch.masked_fill", "masked_fill", TC_CALL_OP, "input, mask, value"},
    {"torch.tril", "tril", TC_CALL_TRIL, "input, diagonal=0"},
    {"torch.triu", "triu", TC_CALL_TRIL, "input, diagonal=0"},
    /* creation ops: sizes as varargs or one sequence (TC_CALL_NEW) */
#define NEW_KW "dtype=None, layout=None, device=None, pin_memory=False, " \
               "requires_grad=False"
    {"torch.zeros", "zeros", TC_CALL_NEW, "*size, " NEW_KW},
    {"torch.ones", "ones", TC_CALL_NEW, "*size, " NEW_KW},
    {"torch.empty", "empty", TC_CALL_NEW,
     "*size, " NEW_KW ", memory_format=None"},
    {"torch.full", "full", TC_CALL_NEW, "size, fill_value, *, " NEW_KW},
    {"torch.arange", "arange", TC_CALL_NEW,
     "start=0, end=None, step=1, *, " NEW_KW},
#define LIKE_KW NEW_KW ", memory_format=None"
    {"torch.zeros_like", "zeros", TC_CALL_NEW, "input, *, " LIKE_KW},
    {"torch.ones_like", "ones", TC_CALL_NEW, "input, *, " LIKE_KW},
    {"torch.empty_like", "empty", TC_CALL_NEW, "input, *, " LIKE_KW},
    {"torch.full_like", "full", TC_CALL_NEW,
     "input, fill_value, *, " LIKE_KW},
    {"Tensor.new_zeros", "zeros", TC_CALL_NEW, "self, *size, " NEW_KW},
    {"Tensor.new_ones", "ones", TC_CALL_NEW, "self, *size, " NEW_KW},
    {"Tensor.new_empty", "empty", TC_CALL_NEW, "self, *size, " NEW_KW},
    {"Tensor.new_full", "full", TC_CALL_NEW,
     "self, size, fill_value, *, " NEW_KW},
#undef LIKE_KW
#undef NEW_KW
    {"torch.pow", "pow", TC_CALL_OP, "input, exponent"},
    BINARY("torch.maximum", "maximum"), BINARY("torch.minimum", "minimum"),
    {"torch.clamp", "clamp", TC_CALL_CLAMP, "input, min=None, max=None"},
    {"torch.clip", "clamp", TC_CALL_CLAMP, "input, min=None, max=None"},
    {"torch.clamp_min", "clamp_min", TC_CALL_OP, "input, min"},
    {"torch.clamp_max", "clamp_max", TC_CALL_OP, "input, max"},
    {"torch.where", "where", TC_CALL_OP, "condition, input, other"},
    BINARY("torch.lt", "lt"), BINARY("torch.less", "lt"),
    BINARY("torch.le", "le"), BINARY("torch.less_equal", "le"),
    BINARY("torch.gt", "gt"), BINARY("torch.greater", "gt"),
    BINARY("torch.ge", "ge"), BINARY("torch.greater_equal", "ge"),
    BINARY("torch.eq", "eq"), BINARY("torch.ne", "ne"),
    BINARY("torch.not_equal", "ne"),
    BINARY("torch.logical_and", "logical_and"),
    BINARY("torch.logical_or", "logical_or"),
    BINARY("torch.logical_xor", "logical_xor"),
    UNARY("torch.logical_not", "logical_not"),
    BINARY("torch.bitwise_and", "bitwise_and"),
    BINARY("torch.bitwise_or", "bitwise_or"),
    BINARY("torch.bitwise_xor", "bitwise_xor"),
    UNARY("torch.bitwise_not", "bitwise_not"),
    /* Tensor methods: self is the first parameter. */
    {"Tensor.add", "add", TC_CALL_ADD_SUB, "self, other, *, alpha=1"},
    {"Tensor.sub", "sub", TC_CALL_ADD_SUB, "self, other, *, alpha=1"},
    BINARY("Tensor.mul", "mul"),
    {"Tensor.div", "div", TC_CALL_DIV, "self, other, *, rounding_mode=None"},
    UNARY("Tensor.neg", "neg"), UNARY("Tensor.abs", "abs"),
    UNARY("Tensor.exp", "exp"), UNARY("Tensor.log", "log"),
    UNARY("Tensor.sqrt", "sqrt"), UNARY("Tensor.rsqrt", "rsqrt"),
    UNARY("Tensor.sin", "sin"), UNARY("Tensor.cos", "cos"),
    UNARY("Tensor.tanh", "tanh"), UNARY("Tensor.sigmoid", "sigmoid"),
    UNARY("Tensor.relu", "relu"), UNARY("Tensor.square", "square"),
    UNARY("Tensor.reciprocal", "reciprocal"),
    UNARY("Tensor.erf", "erf"),
    {"Tensor.masked_fill", "masked_fill", TC_CALL_OP, "self, mask, value"},
    {"Tensor.tril", "tril", TC_CALL_TRIL, "self, diagonal=0"},
    {"Tensor.triu", "triu", TC_CALL_TRIL, "self, diagonal=0"},
    {"Tensor.type_as", NULL, TC_CALL_TYPE_AS, "self, other"},
    {"Tensor.pow", "pow", TC_CALL_OP, "self, exponent"},
    BINARY("Tensor.maximum", "maximum"), BINARY("Tensor.minimum", "minimum"),
    {"Tensor.clamp", "clamp", TC_CALL_CLAMP, "self, min=None, max=None"},
    {"Tensor.clip", "clamp", TC_CALL_CLAMP, "self, min=None, max=None"},
    {"Tensor.clamp_min", "clamp_min", TC_CALL_OP, "self, min"},
    {"Tensor.clamp_max", "clamp_max", TC_CALL_OP, "self, max"},
    {"Tensor.where", "where", TC_CALL_WHERE_METHOD, "self, condition, other"},
    BINARY("Tensor.lt", "lt"), BINARY("Tensor.le", "le"),
    BINARY("Tensor.gt", "gt"), BINARY("Tensor.ge", "ge"),
    BINARY("Tensor.eq", "eq"), BINARY("Tensor.ne", "ne"),
    BINARY("Tensor.logical_and", "logical_and"),
    BINARY("Tensor.logical_or", "logical_or"),
    BINARY("Tensor.logical_xor", "logical_xor"),
    UNARY("Tensor.logical_not", "logical_not"),
    BINARY("Tensor.bitwise_and", "bitwise_and"),
    BINARY("Tensor.bitwise_or", "bitwise_or"),
    BINARY("Tensor.bitwise_xor", "bitwise_xor"),
    UNARY("Tensor.bitwise_not", "bitwise_not"),
    {"Tensor.to", "to", TC_CALL_CAST, "self, dtype"},
    {"Tensor.type", "to", TC_CALL_CAST, "self, dtype"},
    CAST("Tensor.float", "float32"), CAST("Tensor.double", "float64"),
    CAST("Tensor.int", "int32"), CAST("Tensor.long", "int64"),
    CAST("Tensor.bool", "bool"), CAST("Tensor.short", "int16"),
    CAST("Tensor.char", "int8"), CAST("Tensor.byte", "uint8"),
    CAST("Tensor.half", "float16"), CAST("Tensor.bfloat16", "bfloat16"),
    {"Tensor.size", NULL, TC_CALL_SIZE, "self, dim=None"},
    {"Tensor.dim", NULL, TC_CALL_DIM, "self"},
    {"Tensor.ndimension", NULL, TC_CALL_DIM, "self"},
    {"Tensor.numel", NULL, TC_CALL_NUMEL, "self"},
    /* reductions: "input" is "self" for methods; parse_args maps both */
#define RED(name, sig) {"torch." name, name, TC_CALL_REDUCE, "input, " sig}, \
                       {"Tensor." name, name, TC_CALL_REDUCE, "self, " sig}
    RED("sum", "dim=None, keepdim=False, *, dtype=None"),
    RED("mean", "dim=None, keepdim=False, *, dtype=None"),
    RED("prod", "dim=None, keepdim=False, *, dtype=None"),
    RED("amax", "dim=None, keepdim=False"),
    RED("amin", "dim=None, keepdim=False"),
    RED("any", "dim=None, keepdim=False"),
    RED("all", "dim=None, keepdim=False"),
    RED("argmax", "dim=None, keepdim=False"),
    RED("argmin", "dim=None, keepdim=False"),
    RED("var", "dim=None, unbiased=None, keepdim=False, *, correction=None"),
    RED("std", "dim=None, unbiased=None, keepdim=False, *, correction=None"),
    RED("logsumexp", "dim, keepdim=False"),
    RED("norm", "p=2, dim=None, keepdim=False, dtype=None"),
#undef RED
    {"torch.softmax", "softmax", TC_CALL_SOFTMAX, "input, dim, dtype=None"},
    {"Tensor.softmax", "softmax", TC_CALL_SOFTMAX, "self, dim, dtype=None"},
    {"F.softmax", "softmax", TC_CALL_SOFTMAX,
     "input, dim=None, _stacklevel=3, dtype=None"},
    {"torch.log_softmax", "log_softmax", TC_CALL_SOFTMAX,
     "input, dim, dtype=None"},
    {"Tensor.log_softmax", "log_softmax", TC_CALL_SOFTMAX,
     "self, dim, dtype=None"},
    {"F.log_softmax", "log_softmax", TC_CALL_SOFTMAX,
     "input, dim=None, _stacklevel=3, dtype=None"},
    {"F.layer_norm", NULL, TC_CALL_LAYER_NORM,
     "input, normalized_shape, weight=None, bias=None, eps=0.00001"},
    {"F.rms_norm", NULL, TC_CALL_RMS_NORM,
     "input, normalized_shape, weight=None, eps=None"},
    /* views and layout */
    {"Tensor.transpose", "transpose", TC_CALL_VIEW, "self, dim0, dim1"},
    {"torch.transpose", "transpose", TC_CALL_VIEW, "input, dim0, dim1"},
    {"Tensor.t", "t", TC_CALL_VIEW, "self"},
    {"torch.t", "t", TC_CALL_VIEW, "input"},
    {"Tensor.unsqueeze", "unsqueeze", TC_CALL_VIEW, "self, dim"},
    {"torch.unsqueeze", "unsqueeze", TC_CALL_VIEW, "input, dim"},
    {"Tensor.squeeze", "squeeze", TC_CALL_VIEW, "self, dim=None"},
    {"torch.squeeze", "squeeze", TC_CALL_VIEW, "input, dim=None"},
    {"Tensor.flatten", "flatten", TC_CALL_VIEW,
     "self, start_dim=0, end_dim=-1"},
    {"torch.flatten", "flatten", TC_CALL_VIEW,
     "input, start_dim=0, end_dim=-1"},
    {"Tensor.contiguous", "contiguous", TC_CALL_VIEW, "self"},
    {"Tensor.permute", "permute", TC_CALL_VIEW, "self, *dims"},
    {"torch.permute", "permute", TC_CALL_VIEW, "input, dims"},
    {"Tensor.view", "view", TC_CALL_VIEW, "self, *dims"},
    {"Tensor.reshape", "reshape", TC_CALL_VIEW, "self, *dims"},
    {"torch.reshape", "reshape", TC_CALL_VIEW, "input, shape"},
    {"Tensor.expand", "expand", TC_CALL_VIEW, "self, *dims"},
    {"Tensor.expand_as", "expand_as", TC_CALL_VIEW, "self, other"},
    {"Tensor.view_as", "view_as", TC_CALL_VIEW, "self, other"},
    {"Tensor.reshape_as", "reshape_as", TC_CALL_VIEW, "self, other"},
    {"Tensor.narrow", "narrow", TC_CALL_VIEW, "self, dim, start, length"},
    {"torch.narrow", "narrow", TC_CALL_VIEW, "input, dim, start, length"},
    {"Tensor.select", "select", TC_CALL_VIEW, "self, dim, index"},
    {"torch.select", "select", TC_CALL_VIEW, "input, dim, index"},
    {"Tensor.unflatten", "unflatten", TC_CALL_VIEW, "self, dim, sizes"},
    {"torch.unflatten", "unflatten", TC_CALL_VIEW, "input, dim, sizes"},
    {"Tensor.is_contiguous", "is_contiguous", TC_CALL_VIEW,
     "self, memory_format=None"},
    /* torch.nn.functional */
    {"F.relu", "relu", TC_CALL_NO_INPLACE, "input, inplace=False"},
    UNARY("F.sigmoid", "sigmoid"), UNARY("F.tanh", "tanh"),
    {"F.silu", "silu", TC_CALL_NO_INPLACE, "input, inplace=False"},
    {"F.gelu", "gelu", TC_CALL_GELU, "input, *, approximate=None"},
    {"F.softplus", "softplus", TC_CALL_OP, "input, beta=1, threshold=20"},
    {"F.leaky_relu", "leaky_relu", TC_CALL_NO_INPLACE,
     "input, negative_slope=0.01, inplace=False"},
    {"F.elu", "elu", TC_CALL_NO_INPLACE, "input, alpha=1.0, inplace=False"},
    {"F.mish", "mish", TC_CALL_NO_INPLACE, "input, inplace=False"},
    {"F.hardtanh", "clamp", TC_CALL_HARDTANH,
     "input, min_val=-1.0, max_val=1.0, inplace=False"},
    {"F.relu6", "clamp", TC_CALL_HARDTANH, "input, inplace=False"},
    {"F.normalize", NULL, TC_CALL_NORMALIZE,
     "input, p=2.0, dim=1, eps=0.000000000001, out=None"},
    /* extern ops: torch computes them (src/graph/extern.h) */
    {"torch.matmul", "matmul", TC_CALL_EXTERN, "input, other"},
    {"Tensor.matmul", "matmul", TC_CALL_EXTERN, "self, other"},
    {"torch.mm", "mm", TC_CALL_EXTERN, "input, mat2"},
    {"Tensor.mm", "mm", TC_CALL_EXTERN, "self, mat2"},
    {"torch.bmm", "bmm", TC_CALL_EXTERN, "input, mat2"},
    {"Tensor.bmm", "bmm", TC_CALL_EXTERN, "self, mat2"},
    {"torch.addmm", "addmm", TC_CALL_EXTERN,
     "input, mat1, mat2, *, beta=1, alpha=1"},
    {"torch.baddbmm", "baddbmm", TC_CALL_EXTERN,
     "input, batch1, batch2, *, beta=1, alpha=1"},
    {"F.linear", "linear", TC_CALL_EXTERN, "input, weight, bias=None"},
    {"F.scaled_dot_product_attention", "sdpa", TC_CALL_SDPA,
     "query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, "
     "scale=None, enable_gqa=False"},
    {"F.embedding", "embedding", TC_CALL_EMBEDDING,
     "input, weight, padding_idx=None, max_norm=None, norm_type=2.0, "
     "scale_grad_by_freq=False, sparse=False"},
    {"F.conv1d", "conv1d", TC_CALL_CONV,
     "input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1"},
    {"torch.conv1d", "conv1d", TC_CALL_CONV,
     "input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1"},
    {"F.conv2d", "conv2d", TC_CALL_CONV,
     "input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1"},
    {"torch.conv2d", "conv2d", TC_CALL_CONV,
     "input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1"},
    {"torch.cat", "cat", TC_CALL_CAT, "tensors, dim=0"},
    {"torch.concat", "cat", TC_CALL_CAT, "tensors, dim=0"},
    {"torch.concatenate", "cat", TC_CALL_CAT, "tensors, dim=0"},
    {"torch.stack", "stack", TC_CALL_CAT, "tensors, dim=0"},
    /* several views at once: a tuple of narrow / select views */
    {"Tensor.split", "split", TC_CALL_SPLIT, "self, split_size, dim=0"},
    {"torch.split", "split", TC_CALL_SPLIT,
     "tensor, split_size_or_sections, dim=0"},
    {"Tensor.chunk", "chunk", TC_CALL_SPLIT, "self, chunks, dim=0"},
    {"torch.chunk", "chunk", TC_CALL_SPLIT, "input, chunks, dim=0"},
    {"Tensor.unbind", "unbind", TC_CALL_SPLIT, "self, dim=0"},
    {"torch.unbind", "unbind", TC_CALL_SPLIT, "input, dim=0"},
    {"F.cross_entropy", "cross_entropy", TC_CALL_LOSS,
     "input, target, weight=None, size_average=None, ignore_index=-100, "
     "reduce=None, reduction=None, label_smoothing=0.0"},
    {"F.nll_loss", "nll_loss", TC_CALL_LOSS,
     "input, target, weight=None, size_average=None, ignore_index=-100, "
     "reduce=None, reduction=None"},
    {"F.group_norm", "group_norm", TC_CALL_GROUP_NORM,
     "input, num_groups, weight=None, bias=None, eps=0.00001"},
    {"torch.max", "max", TC_CALL_MAX_MIN, "input, dim=None, keepdim=False"},
    {"Tensor.max", "max", TC_CALL_MAX_MIN, "self, dim=None, keepdim=False"},
    {"torch.min", "min", TC_CALL_MAX_MIN, "input, dim=None, keepdim=False"},
    {"Tensor.min", "min", TC_CALL_MAX_MIN, "self, dim=None, keepdim=False"},
    {"F.dropout", NULL, TC_CALL_DROPOUT,
     "input, p=0.5, training=True, inplace=False"},
    /* builtins */
    UNARY("builtins.abs", "abs"),
};

#define NBINDINGS ((int)(sizeof(binding_defs) / sizeof(binding_defs[0])))

static tc_binding bindings[NBINDINGS];
static PyObject *binding_index;   /* {id(callable): index} */
static PyObject *trusted_modules; /* tuple of modules */

/* Parse a default literal: None, True, False, or a number. */
static PyObject *
parse_default(const char *s, size_t n)
{
    if (n == 4 && memcmp(s, "None", 4) == 0) {
        return Py_NewRef(Py_None);
    }
    if (n == 4 && memcmp(s, "True", 4) == 0) {
        return Py_NewRef(Py_True);
    }
    if (n == 5 && memcmp(s, "False", 5) == 0) {
        return Py_NewRef(Py_False);
    }
    char buf[32];
    if (n >= sizeof(buf)) {
        n = sizeof(buf) - 1;
    }
    memcpy(buf, s, n);
    buf[n] = 0;
    if (strchr(buf, '.') != NULL) {
        return PyFloat_FromDouble(atof(buf));
    }
    return PyLong_FromLongLong(atoll(buf));
}

/* "input, other, *, alpha=1" -> names, defaults, keyword-only start.
 * Parameter names point into the static signature text: each name ends at
 * ',' '=' or the end, so we copy them into a small static pool. */
static char name_pool[16384];
static size_t name_pool_used;

static int
parse_signature(tc_binding *b)
{
    const char *s = b->def->sig;
    b->nkwonly_from = TC_MAX_PARAMS;
    b->varargs = -1;
    while (*s) {
        while (*s == ' ' || *s == ',') {
            s++;
        }
        if (*s == 0) {
            break;
        }
        if (*s == '*' && s[1] != ' ' && s[1] != ',' && s[1] != 0) {
            b->varargs = b->nparams;     /* "*size": what follows is
                                            keyword-only */
            b->nkwonly_from = b->nparams + 1;
            s++;
        }
        else if (*s == '*') {
            b->nkwonly_from = b->nparams;
            s++;
            continue;
        }
        const char *start = s;
        while (*s && *s != ',' && *s != '=') {
            s++;
        }
        size_t len = (size_t)(s - start);
        if (b->nparams == TC_MAX_PARAMS
            || name_pool_used + len + 1 > sizeof(name_pool)) {
            PyErr_SetString(PyExc_RuntimeError, "binding table overflow");
            return -1;
        }
        char *name = name_pool + name_pool_used;
        memcpy(name, start, len);
        name[len] = 0;
        name_pool_used += len + 1;
        b->names[b->nparams] = name;
        if (*s == '=') {
            const char *d = ++s;
            while (*s && *s != ',') {
                s++;
            }
            b->defaults[b->nparams] = parse_default(d, (size_t)(s - d));
            if (b->defaults[b->nparams] == NULL) {
                return -1;
            }
        }
        b->nparams++;
    }
    return 0;
}

/* Resolve "torch.sin" / "Tensor.sin" / "F.relu" / "builtins.abs". */
static PyObject *
resolve_path(const char *path)
{
    const char *dot = strchr(path, '.');
    char head[32];
    size_t n = (size_t)(dot - path);
    memcpy(head, path, n);
    head[n] = 0;
    const char *modname = strcmp(head, "Tensor") == 0 ? "torch"
                        : strcmp(head, "F") == 0 ? "torch.nn.functional"
                        : head;
    PyObject *mod = PyImport_ImportModule(modname);
    if (mod == NULL) {
        return NULL;
    }
    PyObject *owner = mod;
    if (strcmp(head, "Tensor") == 0) {
        owner = PyObject_GetAttrString(mod, "Tensor");
        Py_DECREF(mod);
        if (owner == NULL) {
            return NULL;
        }
    }
    /* "torch.special.erf": one attribute per remaining dot */
    const char *name = dot + 1;
    while (owner != NULL && strchr(name, '.') != NULL) {
        char part[64];
        size_t k = (size_t)(strchr(name, '.') - name);
        if (k >= sizeof(part)) {
            Py_DECREF(owner);
            PyErr_SetString(PyExc_ValueError, "binding path too long");
            return NULL;
        }
        memcpy(part, name, k);
        part[k] = 0;
        Py_SETREF(owner, PyObject_GetAttrString(owner, part));
        name += k + 1;
    }
    if (owner == NULL) {
        return NULL;
    }
    PyObject *r = PyObject_GetAttrString(owner, name);
    Py_DECREF(owner);
    return r;
}

static int
init_trusted_modules(void)
{
    /* torch.nn too: torch.nn.functional.gelu(x) spelled out in full
     * reaches F through it */
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *nn = PyImport_ImportModule("torch.nn");
    PyObject *F = PyImport_ImportModule("torch.nn.functional");
    PyObject *math = PyImport_ImportModule("math");
    if (torch && nn && F && math) {
        trusted_modules = PyTuple_Pack(4, torch, nn, F, math);
    }
    Py_XDECREF(torch);
    Py_XDECREF(nn);
    Py_XDECREF(F);
    Py_XDECREF(math);
    return trusted_modules ? 0 : -1;
}

int
tc_bindings_init(void)
{
    binding_index = PyDict_New();
    if (binding_index == NULL || init_trusted_modules() < 0) {
        return -1;
    }
    for (int i = 0; i < NBINDINGS; i++) {
        bindings[i].def = &binding_defs[i];
        if (parse_signature(&bindings[i]) < 0) {
            return -1;
        }
        PyObject *fn = resolve_path(binding_defs[i].path);
        if (fn == NULL) {
            /* A torch build without this function: leave it out. */
            PyErr_Clear();
            continue;
        }
        PyObject *key = PyLong_FromVoidPtr(fn);
        PyObject *val = PyLong_FromLong(i);
        int rc = (key && val) ? PyDict_SetItem(binding_index, key, val) : -1;
        Py_XDECREF(key);
        Py_XDECREF(val);
        /* Keep fn alive for the process: its address is the key. */
        if (rc < 0) {
            Py_DECREF(fn);
            return -1;
        }
    }
    return 0;
}

const tc_binding *
tc_binding_find(PyObject *callable)
{
    PyObject *key = PyLong_FromVoidPtr(callable);
    if (key == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *val = PyDict_GetItemWithError(binding_index, key);
    Py_DECREF(key);
    if (val == NULL) {
        PyErr_Clear();
        return NULL;
    }
    return &bindings[PyLong_AsLong(val)];
}

const tc_binding *
tc_binding_by_path(const char *path)
{
    for (int i = 0; i < NBINDINGS; i++) {
        if (strcmp(binding_defs[i].path, path) == 0) {
            return bindings[i].def != NULL ? &bindings[i] : NULL;
        }
    }
    return NULL;
}

int
tc_is_trusted_module(PyObject *obj)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(trusted_modules); i++) {
        if (PyTuple_GET_ITEM(trusted_modules, i) == obj) {
            return 1;
        }
    }
    return 0;
}

PyObject *
tc_bindings_table(void)
{
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < NBINDINGS; i++) {
        const tc_binding_def *d = &binding_defs[i];
        PyObject *row = Py_BuildValue("(sz)", d->path, d->op);
        if (row == NULL || PyList_Append(list, row) < 0) {
            Py_XDECREF(row);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(row);
    }
    return list;
}
