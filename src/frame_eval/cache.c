/* cache.c - co_extra slots holding each code object's tcjit state. */
#include "cache.h"

static Py_ssize_t extra_index = -1;
static PyObject *codes_with_state; /* list: every code we attached state to */

void
tc_entry_free(tc_entry *e)
{
    if (e == NULL) {
        return;
    }
    tc_guards_free(e->guards);
    PyMem_Free(e->input_sources);
    for (int i = 0; i < e->nconsts; i++) {
        Py_DECREF(e->consts[i]);
    }
    PyMem_Free(e->consts);
    tc_template_clear(&e->ret);
    tc_exit_clear(&e->exit);
    tc_writebacks_clear(&e->wb);
    if (e->be != NULL) {
        e->be->free(e->code);
    }
    Py_XDECREF(e->backend_fn);
    Py_XDECREF(e->backend);
    PyMem_Free(e);
}

static void
state_free(void *p)
{
    tc_code_state *st = p;
    if (st == NULL) {
        return;
    }
    tc_entry *e = st->entries;
    while (e) {
        tc_entry *next = e->next;
        tc_entry_free(e);
        e = next;
    }
    tc_guards_free(st->sources);
    PyMem_Free(st);
}

int
tc_cache_init(void)
{
    extra_index = pyframe_request_code_extra_index(state_free);
    codes_with_state = PyList_New(0);
    return (extra_index < 0 || codes_with_state == NULL) ? -1 : 0;
}

tc_code_state *
tc_code_state_get(PyCodeObject *co)
{
    void *p = NULL;
    if (pyframe_code_get_extra((PyObject *)co, extra_index, &p) < 0) {
        return NULL;
    }
    return p;
}

/* The first return instruction of the code: when a compiled call fails, we
 * resume the frame there so CPython unwinds it through its normal return
 * path, then hand the caller our exception. */
static void
find_return(PyCodeObject *co, tc_code_state *st)
{
    PyObject *bytes = PyCode_GetCode(co);
    st->fail_pc = -1;
    if (bytes == NULL) {
        PyErr_Clear();
        return;
    }
    const tc_codeunit *code = (const tc_codeunit *)PyBytes_AS_STRING(bytes);
    int n = (int)(PyBytes_GET_SIZE(bytes) / 2);
    for (int pc = 0; pc < n; pc += 1 + tc_inline_caches[code[pc] & 0xff]) {
        int op = code[pc] & 0xff;
        int prefixed = pc > 0 && (code[pc - 1] & 0xff) == EXTENDED_ARG;
        if (op == RETURN_VALUE || (op == RETURN_CONST && !prefixed)) {
            st->fail_pc = pc;
            st->fail_pushes = op == RETURN_VALUE;
            break;
        }
    }
    Py_DECREF(bytes);
}

tc_code_state *
tc_code_state_create(PyCodeObject *co)
{
    tc_code_state *st = PyMem_Calloc(1, sizeof(*st));
    if (st == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    st->frame_id = -1;
    find_return(co, st);
    if (PyList_Append(codes_with_state, (PyObject *)co) < 0
        || pyframe_code_set_extra((PyObject *)co, extra_index, st) < 0) {
        PyMem_Free(st);
        return NULL;
    }
    return st;
}

int
tc_cache_reset(void)
{
    Py_ssize_t n = PyList_GET_SIZE(codes_with_state);
    for (Py_ssize_t i = 0; i < n; i++) {
        /* Overwriting a co_extra slot calls its free function on the old
         * value (state_free), so this both detaches and frees the state. */
        PyObject *co = PyList_GET_ITEM(codes_with_state, i);
        if (pyframe_code_set_extra(co, extra_index, NULL) < 0) {
            return -1;
        }
    }
    return PyList_SetSlice(codes_with_state, 0, n, NULL);
}

void
tc_view_of(tc_iframe *f, tc_frame_view *fv)
{
    PyObject *func = pyframe_func(f);
    fv->localsplus = f->localsplus;
    fv->globals = f->f_globals;
    fv->builtins = f->f_builtins;
    fv->closure = func ? PyFunction_GET_CLOSURE(func) : NULL;
    fv->stack = f->localsplus + f->f_code->co_nlocalsplus;
}
