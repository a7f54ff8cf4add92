/* step.c - the instructions the runtime performs itself at a segment exit.
 *
 * A STEP exit is one instruction the tracer could not compile (a call of
 * print, an attribute of an unknown object, formatting a tensor...).  The
 * runtime performs it on the concrete values in the frame's value stack,
 * through the C API call that implements it in CPython, and pushes the
 * result, exactly as the evaluator would.  A BRANCH exit takes bool() of the
 * top of stack.  On an exception the operands are already consumed, as in
 * CPython, and the caller throws it into the frame at the instruction.
 */
#include "step.h"

static PyObject *
pop_value(tc_iframe *f)
{
    return f->localsplus[--f->stacktop];
}

/* CALL: [.., NULL or method, callable or self, args...] (3.13: [..,
 * callable or method, NULL or self, args...]); CALL_KW (3.13) has the
 * keyword names on top. */
static PyObject *
step_call(tc_iframe *f, const tc_exit *x)
{
    PyObject *kwnames = x->opcode == CALL_KW ? pop_value(f)
                                             : Py_XNewRef(x->kwnames);
    int argc = x->oparg;
    PyObject **args = &f->localsplus[f->stacktop - argc];
    PyObject *callable, *self;
    pyframe_call_target(args[-2], args[-1], &callable, &self);
    int total = argc;
    if (self != NULL) {
        args--;
        total++;
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *r = PyObject_Vectorcall(callable, args, total - nkw, kwnames);
    Py_XDECREF(kwnames);
    for (int i = 0; i < argc + 2; i++) {
        Py_XDECREF(pop_value(f));
    }
    return r;
}

/* CALL_FUNCTION_EX: [.., NULL, callable, args, kwargs if oparg & 1]; the
 * result takes the NULL's place. */
static PyObject *
step_call_ex(tc_iframe *f, int oparg)
{
    PyObject *kwargs = (oparg & 1) ? pop_value(f) : NULL;
    PyObject *args = pop_value(f), *hi = pop_value(f), *lo = pop_value(f);
    PyObject *func, *unused;
    pyframe_call_target(lo, hi, &func, &unused);
    Py_XDECREF(lo == func ? hi : lo);  /* the NULL */
    PyObject *tuple = PyTuple_CheckExact(args) ? Py_NewRef(args)
                                               : PySequence_Tuple(args);
    PyObject *r = tuple ? PyObject_Call(func, tuple, kwargs) : NULL;
    Py_XDECREF(tuple);
    Py_DECREF(args);
    Py_DECREF(func);
    Py_XDECREF(kwargs);
    return r;
}

static PyObject *
step_format(tc_iframe *f, int oparg)
{
    PyObject *spec = (oparg & FVS_MASK) ? pop_value(f) : NULL;
    PyObject *value = pop_value(f);
    PyObject *r = tc_format_value(value, spec, oparg);
    Py_DECREF(value);
    Py_XDECREF(spec);
    return r;
}

static PyObject *
step_build_string(tc_iframe *f, int n)
{
    PyObject *parts = PyTuple_New(n);
    if (parts == NULL) {
        return NULL;
    }
    for (int i = n - 1; i >= 0; i--) {
        PyTuple_SET_ITEM(parts, i, pop_value(f));
    }
    PyObject *empty = PyUnicode_FromString("");
    PyObject *r = empty ? PyUnicode_Join(empty, parts) : NULL;
    Py_XDECREF(empty);
    Py_DECREF(parts);
    return r;
}

/* LOAD_ATTR / LOAD_METHOD: a method load pushes [NULL, bound attribute],
 * which CALL treats exactly like [method, self]. */
static int
step_load_attr(tc_iframe *f, const tc_exit *x)
{
    PyObject *owner = pop_value(f);
    PyObject *name = PyTuple_GET_ITEM(f->f_code->co_names,
                                      TC_LOAD_ATTR_NAME(x->oparg));
    PyObject *r = PyObject_GetAttr(owner, name);
    Py_DECREF(owner);
    if (r == NULL) {
        return -1;
    }
    int method = TC_LOAD_ATTR_IS_METHOD(x->opcode, x->oparg);
    if (method && !TC_NULL_AFTER_CALLABLE) {
        pyframe_push(f, NULL);
    }
    pyframe_push(f, r);
    if (method && TC_NULL_AFTER_CALLABLE) {
        pyframe_push(f, NULL);
    }
    return 0;
}

static int
step_store_attr(tc_iframe *f, const tc_exit *x)
{
    PyObject *owner = pop_value(f), *value = pop_value(f);
    int rc = PyObject_SetAttr(owner, PyTuple_GET_ITEM(f->f_code->co_names,
                                                      x->oparg), value);
    Py_DECREF(owner);
    Py_DECREF(value);
    return rc;
}

/* STORE_SUBSCR: [.., value, container, key]; DELETE_SUBSCR: [.., container,
 * key] */
static int
step_subscr_write(tc_iframe *f, int opcode)
{
    PyObject *key = pop_value(f), *container = pop_value(f);
    PyObject *value = opcode == STORE_SUBSCR ? pop_value(f) : NULL;
    int rc = value ? PyObject_SetItem(container, key, value)
                   : PyObject_DelItem(container, key);
    Py_DECREF(key);
    Py_DECREF(container);
    Py_XDECREF(value);
    return rc;
}

static PyObject *
step_binary(tc_iframe *f, const tc_exit *x)
{
    PyObject *b = pop_value(f), *a = pop_value(f), *r;
    switch (x->opcode) {
    case BINARY_SUBSCR:
        r = PyObject_GetItem(a, b);
        break;
    case COMPARE_OP:
        r = PyObject_RichCompare(a, b, TC_COMPARE_OP_ARG(x->oparg));
        if (r != NULL && TC_COMPARE_OP_TO_BOOL(x->oparg)) {
            int t = PyObject_IsTrue(r);
            Py_SETREF(r, t < 0 ? NULL : PyBool_FromLong(t));
        }
        break;
    case IS_OP:
        r = PyBool_FromLong((a == b) ^ x->oparg);
        break;
    case CONTAINS_OP: {
        int c = PySequence_Contains(b, a);
        r = c < 0 ? NULL : PyBool_FromLong(c ^ x->oparg);
        break;
    }
    default:
        r = tc_binary_op(x->oparg, a, b);
    }
    Py_DECREF(a);
    Py_DECREF(b);
    return r;
}

static PyObject *
step_unary(tc_iframe *f, int opcode)
{
    PyObject *v = pop_value(f), *r;
    if (opcode == UNARY_NEGATIVE) {
        r = PyNumber_Negative(v);
    }
    else if (opcode == UNARY_INVERT) {
        r = PyNumber_Invert(v);
    }
    else {
        int t = PyObject_IsTrue(v);
        r = t < 0 ? NULL : PyBool_FromLong(!t);
    }
    Py_DECREF(v);
    return r;
}

/* MAKE_FUNCTION: [.., defaults?, kwdefaults?, annotations?, closure?,
 * code] per the flag bits of oparg (3.11 and 3.12 take the qualified name
 * from the code object). */
static PyObject *
step_make_function(tc_iframe *f, int oparg)
{
    PyObject *code = pop_value(f);
    PyObject *parts[TC_FN_NPARTS] = {NULL};
    for (int bit = TC_FN_NPARTS - 1; bit >= 0; bit--) {
        if (oparg & (1 << bit)) {
            parts[bit] = pop_value(f);
        }
    }
    PyObject *func = pyframe_make_function(code, f->f_globals, parts);
    Py_DECREF(code);
    for (int i = 0; i < TC_FN_NPARTS; i++) {
        Py_XDECREF(parts[i]);
    }
    return func;
}

int
tc_step(tc_iframe *f, const tc_exit *x)
{
    PyObject *r;
    switch (x->opcode) {
    case CALL:
    case CALL_KW:
        r = step_call(f, x);
        break;
    case CALL_FUNCTION_EX:
        r = step_call_ex(f, x->oparg);
        break;
    case LOAD_ATTR:
    case LOAD_METHOD:
        return step_load_attr(f, x);
    case STORE_ATTR:
        return step_store_attr(f, x);
    case STORE_SUBSCR:
    case DELETE_SUBSCR:
        return step_subscr_write(f, x->opcode);
    case FORMAT_VALUE:
        r = step_format(f, x->oparg);
        break;
    case BUILD_STRING:
        r = step_build_string(f, x->oparg);
        break;
    case MAKE_FUNCTION:
        r = step_make_function(f, x->oparg);
        break;
    case UNARY_NEGATIVE:
    case UNARY_INVERT:
    case UNARY_NOT:
        r = step_unary(f, x->opcode);
        break;
    default:
        r = step_binary(f, x);
    }
    if (r == NULL) {
        return -1;
    }
    pyframe_push(f, r);
    return 0;
}

int
tc_branch(tc_iframe *f, const tc_exit *x, int *next_pc)
{
    PyObject *v = f->localsplus[f->stacktop - 1];
    int truth = PyObject_IsTrue(v);
    if (truth < 0) {
        return -1;
    }
    int on_true = x->jump == TC_JUMP_POP_IF_TRUE
                  || x->jump == TC_JUMP_IF_TRUE_OR_POP;
    int taken = truth == on_true;
    int keep = taken && (x->jump == TC_JUMP_IF_FALSE_OR_POP
                         || x->jump == TC_JUMP_IF_TRUE_OR_POP);
    if (!keep) {
        Py_DECREF(pop_value(f));
    }
    *next_pc = taken ? x->target : x->next_pc;
    return 0;
}
