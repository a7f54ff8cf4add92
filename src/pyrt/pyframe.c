/* pyframe.c - per-version bytecode facts read from the running interpreter. */
#include "pyframe.h"

unsigned char tc_inline_caches[256];

/* dis._inline_cache_entries is a list indexed by opcode on 3.11 and 3.12,
 * a dict by opcode name on 3.13 (turned into that list here); reading it
 * keeps us from hard-coding a table that changes per release. */
int
pyframe_init_opcode_info(void)
{
    PyObject *dis = PyImport_ImportModule("dis");
    if (dis == NULL) {
        return -1;
    }
    PyObject *caches = PyObject_GetAttrString(dis, "_inline_cache_entries");
    if (caches != NULL && PyDict_Check(caches)) {
        PyObject *by_name = caches;
        PyObject *names = PyObject_GetAttrString(dis, "opname");
        Py_ssize_t n = names ? PySequence_Length(names) : -1;
        caches = n < 0 ? NULL : PyList_New(n);
        for (Py_ssize_t i = 0; caches != NULL && i < n; i++) {
            PyObject *name = PySequence_GetItem(names, i);
            PyObject *c = name ? PyDict_GetItemWithError(by_name, name) : NULL;
            Py_XDECREF(name);
            if (c == NULL && (name == NULL || PyErr_Occurred())) {
                Py_CLEAR(caches);
                break;
            }
            PyList_SET_ITEM(caches, i, c ? Py_NewRef(c) : PyLong_FromLong(0));
        }
        Py_XDECREF(names);
        Py_DECREF(by_name);
    }
    Py_DECREF(dis);
    if (caches == NULL) {
        return -1;
    }
    int rc = -1;
    PyObject *seq = PySequence_Fast(caches, "dis._inline_cache_entries");
    if (seq == NULL) {
        goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n && i < 256; i++) {
        long c = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (c < 0 || c > 255) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_RuntimeError, "bad inline cache size");
            }
            goto done;
        }
        tc_inline_caches[i] = (unsigned char)c;
    }
    rc = 0;
done:
    Py_XDECREF(seq);
    Py_DECREF(caches);
    return rc;
}

/* MAKE_CELL and COPY_FREE_VARS, as the evaluator runs them before RESUME.
 * A frame resumed past its first instruction must have them done or
 * LOAD_DEREF reads a raw value as a cell and crashes. */
int
pyframe_run_prologue(tc_iframe *f)
{
    PyCodeObject *co = f->f_code;
    const unsigned char *kinds =
        (const unsigned char *)PyBytes_AS_STRING(co->co_localspluskinds);
    PyObject *func = pyframe_func(f);
    PyObject *closure = func ? PyFunction_GET_CLOSURE(func) : NULL;
    int first_free = co->co_nlocalsplus - co->co_nfreevars;
    for (int i = 0; i < co->co_nlocalsplus; i++) {
        if (kinds[i] & TC_CO_FAST_FREE) {
            if (closure == NULL) {
                PyErr_SetString(PyExc_SystemError, "tcjit: missing closure");
                return -1;
            }
            Py_XSETREF(f->localsplus[i],
                       Py_NewRef(PyTuple_GET_ITEM(closure, i - first_free)));
        }
        else if (kinds[i] & TC_CO_FAST_CELL) {
            PyObject *cell = PyCell_New(f->localsplus[i]);
            if (cell == NULL) {
                return -1;
            }
            Py_XSETREF(f->localsplus[i], cell);
        }
    }
    return 0;
}

#if TC_PY313
/* The instruction at op_pc has inline CACHE entries (read from the
 * unspecialized code: the running one may be specialized or
 * instrumented). */
static int
has_cache(PyCodeObject *co, int op_pc)
{
    PyObject *bytes = PyCode_GetCode(co);
    if (bytes == NULL) {
        PyErr_Clear();
        return 1;
    }
    const tc_codeunit *code = (const tc_codeunit *)PyBytes_AS_STRING(bytes);
    int r = op_pc < PyBytes_GET_SIZE(bytes) / 2
            && tc_inline_caches[code[op_pc] & 0xff] > 0;
    Py_DECREF(bytes);
    return r;
}
#endif

PyObject *
pyframe_throw_at(PyThreadState *ts, tc_iframe *f, int op_pc)
{
#if TC_PY313
    /* 3.13 looks the handler up at instr_ptr - 1 (as for a generator
     * suspended just after its YIELD_VALUE), and the traceback entry it
     * adds points at instr_ptr: op_pc + 1 is op_pc's first CACHE entry,
     * same position, where the instruction has one.  Where it has none
     * (CALL_KW, FORMAT_*, ...), op_pc + 1 is the next instruction, maybe
     * another line: the entry is moved back onto op_pc when the exception
     * leaves the frame. */
    PyCodeObject *co = (PyCodeObject *)Py_NewRef(f->f_code);
    f->instr_ptr = pyframe_code_start(co) + op_pc + 1;
    PyObject *r = _PyEval_EvalFrameDefault(ts, (struct _PyInterpreterFrame *)f,
                                           1);
    if (r == NULL) {
        PyObject *exc = PyErr_GetRaisedException();
        PyObject *tb = exc ? PyException_GetTraceback(exc) : NULL;
        PyTracebackObject *t = (PyTracebackObject *)tb;
        if (t != NULL && t->tb_frame != NULL
            && t->tb_lasti == (op_pc + 1) * (int)sizeof(tc_codeunit)
            && !has_cache(co, op_pc)) {
            PyCodeObject *tco = PyFrame_GetCode(t->tb_frame);
            if (tco == co) {
                t->tb_lasti = op_pc * (int)sizeof(tc_codeunit);
                t->tb_lineno = -1;  /* computed from tb_lasti when read */
            }
            Py_DECREF(tco);
        }
        Py_XDECREF(tb);
        PyErr_SetRaisedException(exc);
    }
    Py_DECREF(co);
    return r;
#else
    f->prev_instr = pyframe_code_start(f->f_code) + op_pc;
    return _PyEval_EvalFrameDefault(ts, (struct _PyInterpreterFrame *)f, 1);
#endif
}

/* One varint of the exception table: 6 bits a byte, most significant
 * first, 0x40 on every byte but the last (0x80 marks an entry's first). */
static int
table_varint(const unsigned char **p, const unsigned char *end)
{
    if (*p >= end) {
        return -1;
    }
    unsigned b = *(*p)++;
    int v = b & 63;
    while ((b & 64) && *p < end) {
        b = *(*p)++;
        v = (v << 6) | (b & 63);
    }
    return v;
}

int
pyframe_exception_handler(PyCodeObject *co, int pc, int *depth, int *lasti)
{
    PyObject *t = co->co_exceptiontable;
    if (t == NULL || !PyBytes_Check(t)) {
        return -1;
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(t);
    const unsigned char *end = p + PyBytes_GET_SIZE(t);
    while (p < end) {
        int start = table_varint(&p, end), len = table_varint(&p, end);
        int target = table_varint(&p, end), dl = table_varint(&p, end);
        if (start < 0 || len < 0 || target < 0 || dl < 0 || start > pc) {
            return -1;   /* (entries are sorted by start) */
        }
        if (pc < start + len) {
            *depth = dl >> 1;
            *lasti = dl & 1;
            return target;
        }
    }
    return -1;
}

PyObject *
pyframe_make_function(PyObject *code, PyObject *globals,
                      PyObject *const parts[TC_FN_NPARTS])
{
    PyFunctionObject *func = (PyFunctionObject *)PyFunction_New(code,
                                                                globals);
    if (func == NULL) {
        return NULL;
    }
    PyObject **fields[TC_FN_NPARTS] = {
        &func->func_defaults, &func->func_kwdefaults,
        &func->func_annotations, &func->func_closure};
    for (int i = 0; i < TC_FN_NPARTS; i++) {
        if (parts[i] != NULL) {
            Py_XSETREF(*fields[i], Py_NewRef(parts[i]));
        }
    }
#if TC_PY312
    func->func_version = ((PyCodeObject *)code)->co_version;
#endif
    return (PyObject *)func;
}

PyObject *
tc_binary_op(int nb, PyObject *a, PyObject *b)
{
    switch (nb) {
    case NB_ADD: return PyNumber_Add(a, b);
    case NB_SUBTRACT: return PyNumber_Subtract(a, b);
    case NB_MULTIPLY: return PyNumber_Multiply(a, b);
    case NB_TRUE_DIVIDE: return PyNumber_TrueDivide(a, b);
    case NB_FLOOR_DIVIDE: return PyNumber_FloorDivide(a, b);
    case NB_REMAINDER: return PyNumber_Remainder(a, b);
    case NB_POWER: return PyNumber_Power(a, b, Py_None);
    case NB_MATRIX_MULTIPLY: return PyNumber_MatrixMultiply(a, b);
    case NB_AND: return PyNumber_And(a, b);
    case NB_OR: return PyNumber_Or(a, b);
    case NB_XOR: return PyNumber_Xor(a, b);
    case NB_LSHIFT: return PyNumber_Lshift(a, b);
    case NB_RSHIFT: return PyNumber_Rshift(a, b);
    case NB_INPLACE_ADD: return PyNumber_InPlaceAdd(a, b);
    case NB_INPLACE_SUBTRACT: return PyNumber_InPlaceSubtract(a, b);
    case NB_INPLACE_MULTIPLY: return PyNumber_InPlaceMultiply(a, b);
    case NB_INPLACE_TRUE_DIVIDE: return PyNumber_InPlaceTrueDivide(a, b);
    case NB_INPLACE_FLOOR_DIVIDE: return PyNumber_InPlaceFloorDivide(a, b);
    case NB_INPLACE_REMAINDER: return PyNumber_InPlaceRemainder(a, b);
    case NB_INPLACE_POWER: return PyNumber_InPlacePower(a, b, Py_None);
    case NB_INPLACE_MATRIX_MULTIPLY: return PyNumber_InPlaceMatrixMultiply(a, b);
    case NB_INPLACE_AND: return PyNumber_InPlaceAnd(a, b);
    case NB_INPLACE_OR: return PyNumber_InPlaceOr(a, b);
    case NB_INPLACE_XOR: return PyNumber_InPlaceXor(a, b);
    case NB_INPLACE_LSHIFT: return PyNumber_InPlaceLshift(a, b);
    case NB_INPLACE_RSHIFT: return PyNumber_InPlaceRshift(a, b);
    default:
        PyErr_Format(PyExc_SystemError, "tcjit: binary op %d", nb);
        return NULL;
    }
}
