/* pysem.c - Python semantics the tracer folds instead of tracing into.
 *
 * Unrolled loops and their iterators, grad-mode context managers, dicts
 * with constant keys, builtins (len, isinstance, range, ...), plain
 * objects, bound methods, functools.partial, and CALL (tc_tr_op_call).
 */
#include "tracer_internal.h"
#include "../graph/extern.h"
#include "../guards/nn_module.h"

/* ---- Python semantics: loops, grad-mode contexts, dicts, builtins ------- */

/* Callables the tracer gives their Python meaning instead of tracing
 * into them; looked up once. */
static struct {
    PyObject *iter, *enumerate, *zip, *reversed, *range, *len, *isinstance,
        *getattr, *hasattr, *setattr, *delattr, *partial, *no_grad, *enable_grad,
        *inference_mode, *set_grad_enabled, *is_grad_enabled,
        *has_torch_function, *has_torch_function_unary,
        *has_torch_function_variadic, *torch_function_mode_enabled,
        *get_tracing_state, *is_tracing, *deterministic,
        *deterministic_warn_only, *get_default_dtype, *import, *type,
        *is_compiling, *is_dynamo_compiling, *utils_is_compiling, *super,
        *all, *any, *sum, *sorted, *callable, *finfo, *iinfo,
        *signature, *is_autocast_enabled, *is_autocast_cpu_enabled,
        *is_any_autocast_enabled, *dispatch_stack_len, *defaultdict,
        *privateuse1_name, *ordered_dict, *chain, *record_function,
        *profiler_enabled, *autocast, *nullcontext, *device,
        *log_api_usage;
} K;

/* The builtins and torch context managers the tracer gives a meaning of
 * its own, looked up once when tcjit._C is imported: a trace may need
 * them before any call (a loop is the first thing a function does). */
int
tc_tracer_init(void)
{
    static const struct {
        const char *module, *name;
        PyObject **slot;
    } table[] = {
        {"builtins", "iter", &K.iter},
        {"builtins", "enumerate", &K.enumerate},
        {"builtins", "zip", &K.zip},
        {"builtins", "reversed", &K.reversed},
        {"builtins", "range", &K.range},
        {"builtins", "len", &K.len},
        {"builtins", "isinstance", &K.isinstance},
        {"builtins", "getattr", &K.getattr},
        {"builtins", "setattr", &K.setattr},
        {"builtins", "delattr", &K.delattr},
        {"builtins", "hasattr", &K.hasattr},
        {"functools", "partial", &K.partial},
        {"torch", "no_grad", &K.no_grad},
        {"torch", "autocast", &K.autocast},
        {"torch", "device", &K.device},
        {"torch._C", "_log_api_usage_once", &K.log_api_usage},
        {"contextlib", "nullcontext", &K.nullcontext},
        {"torch", "enable_grad", &K.enable_grad},
        {"torch", "inference_mode", &K.inference_mode},
        {"torch", "set_grad_enabled", &K.set_grad_enabled},
        {"torch", "is_grad_enabled", &K.is_grad_enabled},
        {"torch._C", "_has_torch_function", &K.has_torch_function},
        {"torch._C", "_has_torch_function_unary",
         &K.has_torch_function_unary},
        {"torch._C", "_has_torch_function_variadic",
         &K.has_torch_function_variadic},
        {"torch._C", "_is_torch_function_mode_enabled",
         &K.torch_function_mode_enabled},
        {"torch._C", "_get_tracing_state", &K.get_tracing_state},
        {"torch._C", "_is_tracing", &K.is_tracing},
        {"torch._C", "_get_deterministic_algorithms", &K.deterministic},
        {"torch._C", "_get_deterministic_algorithms_warn_only",
         &K.deterministic_warn_only},
        {"torch", "get_default_dtype", &K.get_default_dtype},
        {"builtins", "type", &K.type},
        {"builtins", "super", &K.super},
        {"builtins", "all", &K.all},
        {"builtins", "any", &K.any},
        {"builtins", "sum", &K.sum},
        {"builtins", "sorted", &K.sorted},
        {"builtins", "callable", &K.callable},
        {"torch", "finfo", &K.finfo},
        {"torch", "iinfo", &K.iinfo},
        {"inspect", "signature", &K.signature},
        {"torch", "is_autocast_enabled", &K.is_autocast_enabled},
        {"torch.compiler", "is_compiling", &K.is_compiling},
        {"torch.compiler", "is_dynamo_compiling", &K.is_dynamo_compiling},
        {"torch._utils", "is_compiling", &K.utils_is_compiling},
        {"collections", "defaultdict", &K.defaultdict},
        {"collections", "OrderedDict", &K.ordered_dict},
        {"itertools", "chain", &K.chain},
        {"torch.autograd.profiler", "record_function", &K.record_function},
        {"torch.autograd", "_profiler_enabled", &K.profiler_enabled},
        {"torch._C", "_get_privateuse1_backend_name", &K.privateuse1_name},
        {"builtins", "__import__", &K.import},
    };
    if (K.import != NULL) {
        return OK;
    }
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        PyObject *mod = PyImport_ImportModule(table[i].module);
        PyObject *v = mod ? PyObject_GetAttrString(mod, table[i].name) : NULL;
        Py_XDECREF(mod);
        if (v == NULL) {
            return ERROR;
        }
        Py_XSETREF(*table[i].slot, v);  /* kept for the process */
    }
    /* (deprecated or private: absent from some torch versions) */
    PyObject *mod = PyImport_ImportModule("torch");
    K.is_autocast_cpu_enabled = mod ? PyObject_GetAttrString(
        mod, "is_autocast_cpu_enabled") : NULL;
    PyObject *C = mod ? PyObject_GetAttrString(mod, "_C") : NULL;
    K.is_any_autocast_enabled = C ? PyObject_GetAttrString(
        C, "_is_any_autocast_enabled") : NULL;
    PyErr_Clear();
    K.dispatch_stack_len = C ? PyObject_GetAttrString(
        C, "_len_torch_dispatch_stack") : NULL;
    Py_XDECREF(C);
    Py_XDECREF(mod);
    PyErr_Clear();
    return OK;
}

/* A callable read from the frame whose meaning the tracer relies on. */
static int
guard_callable(tracer *T, tc_var *callable)
{
    if (callable->kind == TC_VAR_UNKNOWN && callable->source >= 0) {
        return tc_guard_id(T->out->guards, callable->source, callable->obj);
    }
    return OK;
}

/* Call callable(*args) with keywords kwnames (a tuple some arena var
 * owns) through the ordinary CALL path. */
int
tc_tr_call_with_args(tracer *T, tc_var *callable, tc_var **args, int n,
                     PyObject *kwnames)
{
    if (tc_tr_push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1)) != OK
        || tc_tr_push(T, callable) != OK) {
        return PyErr_Occurred() ? ERROR : UNSUPPORTED;
    }
    for (int i = 0; i < n; i++) {
        if (tc_tr_push(T, args[i]) != OK) {
            return UNSUPPORTED;
        }
    }
    T->kwnames = kwnames;
    return tc_tr_op_call(T, n);
}

int
tc_tr_call_object(tracer *T, PyObject *fn, tc_var **args, int n)
{
    tc_var *f = tc_var_const(&T->sh->arena, fn, -1);
    return f == NULL ? ERROR : tc_tr_call_with_args(T, f, args, n, NULL);
}

static tc_var *
new_const(tracer *T, PyObject *value)
{
    if (value == NULL) {
        return NULL;
    }
    tc_var *v = tc_var_const(&T->sh->arena, value, -1);
    Py_DECREF(value);
    return v;
}

static int
push_const(tracer *T, PyObject *value)
{
    return value == NULL ? ERROR : tc_tr_push(T, new_const(T, value));
}

/* ---- sequences known item by item, and iterators of unrolled loops ----
 *
 * An iterator is a DEFERRED var: obj is the builtin that makes it (iter,
 * enumerate, zip, reversed), items its arguments, index how many items it
 * has yielded.  FOR_ITER computes the next item from the arguments, so a
 * loop over a range, a tuple or a list (of tensors: graph inputs with
 * ITEM sources, length guarded) is unrolled into the graph.  If the
 * segment ends inside the loop, the exit template makes the iterator
 * afresh and advances it as far (TC_TMPL_ITER). */

static int
is_iterator(tc_var *v)
{
    return v->kind == TC_VAR_DEFERRED && v->node == TC_TMPL_ITER;
}

static Py_ssize_t iter_length(tracer *T, tc_var *it, int *rc);
static tc_var *iter_item(tracer *T, tc_var *it, Py_ssize_t k);

/* ---- sets of constants ----
 *
 * A set the traced code builds ({a, b}, a set comprehension, set(seq)) is
 * a DEFERRED var made at the exit as set(items[0]), items[0] a tuple of
 * its (constant, distinct) items in insertion order; SET_ADD and s.add
 * change it in place (a set this code built). */

int
tc_tr_is_set_var(const tc_var *v)
{
    return v->kind == TC_VAR_DEFERRED && v->node == TC_TMPL_CALL
           && v->obj == (PyObject *)&PySet_Type && v->nitems == 1
           && v->items[0]->kind == TC_VAR_TUPLE;
}

/* Whether var x can be an item of a set the trace knows: a constant, or
 * an object guarded by identity (torch.float32, a module), whose hash and
 * equality the real object answers as at run time. */
static int
set_item_known(const tc_var *x)
{
    return x->kind == TC_VAR_CONST || x->kind == TC_VAR_OBJECT;
}

/* A real set of the items of tuple var t (all constants): a new
 * reference, or NULL with *rc set. */
static PyObject *
real_set(tracer *T, tc_var *t, int *rc)
{
    PyObject *set = PySet_New(NULL);
    *rc = set ? OK : ERROR;
    for (int i = 0; set && i < t->nitems; i++) {
        tc_var *x = t->items[i];
        if ((*rc = tc_tr_reify(T, x)) != OK) {
            Py_CLEAR(set);
            break;
        }
        if (!set_item_known(x)) {
            *rc = tc_tr_unsupported(T, "a set of a %s", tc_var_kind_name(x));
            Py_CLEAR(set);
            break;
        }
        if (PySet_Add(set, x->obj) < 0) {
            Py_CLEAR(set);
            *rc = tc_tr_unsupported_from_exception(T, "set");
        }
    }
    return set;
}

/* The real set a set var stands for, for folding (==, <=, a constant
 * result): a new reference; NULL without an exception when an item is
 * not known at trace time (nothing recorded), with one on error. */
PyObject *
tc_tr_set_value(tracer *T, tc_var *s)
{
    tc_var *t = s->items[0];
    for (int i = 0; i < t->nitems; i++) {
        if (tc_tr_reify(T, t->items[i]) != OK) {
            return NULL;
        }
        if (!set_item_known(t->items[i])) {
            return NULL;
        }
    }
    int rc;
    PyObject *set = real_set(T, t, &rc);
    if (set == NULL && !PyErr_Occurred()) {
        PyErr_SetString(PyExc_SystemError, "tcjit: set of unknown items");
    }
    return set;
}

/* The set var of the distinct items of `items` (constants). */
static tc_var *
make_set(tracer *T, tc_var **items, int n, int *rc)
{
    tc_var *uniq[128];
    int m = 0;
    PyObject *seen = PySet_New(NULL);
    *rc = seen ? OK : ERROR;
    for (int i = 0; seen && i < n; i++) {
        if ((*rc = tc_tr_reify(T, items[i])) != OK) {
            break;
        }
        if (!set_item_known(items[i])) {
            *rc = tc_tr_unsupported(T, "a set of a %s",
                                    tc_var_kind_name(items[i]));
            break;
        }
        int has = PySet_Contains(seen, items[i]->obj);
        if (has < 0 || PySet_Add(seen, items[i]->obj) < 0) {
            *rc = tc_tr_unsupported_from_exception(T, "set");
            break;
        }
        if (!has) {
            if (m == 128) {
                *rc = tc_tr_unsupported(T, "a set of more than 128 items");
                break;
            }
            uniq[m++] = items[i];
        }
    }
    Py_XDECREF(seen);
    if (*rc != OK) {
        return NULL;
    }
    tc_var *t = tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, m, uniq);
    tc_var *s = t ? tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, 1, &t) : NULL;
    if (s == NULL) {
        *rc = ERROR;
        return NULL;
    }
    s->node = TC_TMPL_CALL;
    s->obj = Py_NewRef((PyObject *)&PySet_Type);
    s->index = T->serial;
    return s;
}

/* Add items to set var s in place. */
static int
set_add_items(tracer *T, tc_var *s, tc_var **items, int n)
{
    tc_var *all[256];
    int have = s->items[0]->nitems, rc;
    if (s->source >= 0 || s->index != T->serial) {
        return tc_tr_unsupported(T, "adding to a set the traced function did "
                                 "not build");
    }
    if (have + n > 256) {
        return tc_tr_unsupported(T, "a set of more than 128 items");
    }
    memcpy(all, s->items[0]->items, have * sizeof(tc_var *));
    memcpy(all + have, items, n * sizeof(tc_var *));
    tc_var *ns = make_set(T, all, have + n, &rc);
    if (ns == NULL) {
        return rc;
    }
    s->items[0] = ns->items[0];
    return OK;
}

/* The items of set var s in the order Python iterates the real set. */
static tc_var *
set_in_order(tracer *T, tc_var *s, int *rc)
{
    tc_var *t = s->items[0], *items[128];
    PyObject *set = real_set(T, t, rc);
    if (set == NULL) {
        return NULL;
    }
    Py_ssize_t pos = 0;
    Py_hash_t hash;
    PyObject *k;
    int n = 0;
    while (_PySet_NextEntry(set, &pos, &k, &hash) && n < 128) {
        for (int i = 0; i < t->nitems; i++) {
            if (t->items[i]->obj == k) {
                items[n++] = t->items[i];
                break;
            }
        }
    }
    Py_DECREF(set);
    tc_var *r = tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, n, items);
    *rc = r ? OK : ERROR;
    return r;
}

int
tc_tr_op_build_set(tracer *T, int n)
{
    if (T->sp < n) {
        return tc_tr_unsupported(T, "malformed stack");
    }
    int rc;
    tc_var *s = make_set(T, &T->stack[T->sp - n], n, &rc);
    if (s == NULL) {
        return rc;
    }
    T->sp -= n;
    return tc_tr_push(T, s);
}

static Py_ssize_t seq_length(tracer *T, tc_var *v, int *rc);
static tc_var *seq_item(tracer *T, tc_var *v, Py_ssize_t k);

/* A set var of the items of real set r (a new reference, consumed). */
static int
push_real_set(tracer *T, PyObject *r)
{
    tc_var *items[128];
    Py_ssize_t pos = 0;
    Py_hash_t hash;
    PyObject *k;
    int n = 0, rc = OK;
    if (r == NULL) {
        return tc_tr_unsupported_from_exception(T, "set operator");
    }
    while (rc == OK && _PySet_NextEntry(r, &pos, &k, &hash)) {
        if (n == 128) {
            rc = tc_tr_unsupported(T, "a set of more than 128 items");
            break;
        }
        items[n] = tc_tr_const_var(T, k);
        rc = items[n++] ? OK : ERROR;
    }
    Py_DECREF(r);
    tc_var *s = rc == OK ? make_set(T, items, n, &rc) : NULL;
    return s ? tc_tr_push(T, s) : rc;
}

/* a | b, a & b, a - b, a ^ b of sets this code built (or frozensets). */
int
tc_tr_set_binary(tracer *T, int nb, tc_var *a, tc_var *b)
{
    if (!tc_tr_is_set_var(a) && !tc_tr_is_set_var(b)) {
        return NOT_HANDLED;
    }
    if (nb >= NB_INPLACE_ADD && tc_tr_is_set_var(a)) {
        return tc_tr_unsupported(T, "an in-place operator on a set (it "
                                 "changes the set its aliases see)");
    }
    int rc = OK;
    PyObject *x = tc_tr_is_set_var(a) ? real_set(T, a->items[0], &rc)
                : a->kind == TC_VAR_CONST ? Py_NewRef(a->obj) : NULL;
    PyObject *y = x == NULL ? NULL
                : tc_tr_is_set_var(b) ? real_set(T, b->items[0], &rc)
                : b->kind == TC_VAR_CONST ? Py_NewRef(b->obj) : NULL;
    if (y == NULL) {
        Py_XDECREF(x);
        return rc != OK ? rc : NOT_HANDLED;
    }
    PyObject *r = tc_binary_op(nb % NB_INPLACE_ADD, x, y);
    Py_DECREF(x);
    Py_DECREF(y);
    if (r != NULL && !PySet_Check(r)) {
        return tc_tr_push_folded(T, r, "set operator");
    }
    return push_real_set(T, r);
}

/* SET_ADD (a set comprehension) and SET_UPDATE ({*a, *b}). */
int
tc_tr_op_set_add(tracer *T, int oparg, int update)
{
    tc_var *v = tc_tr_pop(T), *items[128];
    tc_var *s = oparg >= 1 && T->sp >= oparg ? T->stack[T->sp - oparg] : NULL;
    if (v == NULL || s == NULL || !tc_tr_is_set_var(s)) {
        return tc_tr_unsupported(T, "malformed set");
    }
    if (!update) {
        return set_add_items(T, s, &v, 1);
    }
    int rc;
    Py_ssize_t n = seq_length(T, v, &rc);
    if (n < 0 || n > 128) {
        return rc != OK ? rc : tc_tr_unsupported(T, "a set update of a %s",
                                                 tc_var_kind_name(v));
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if ((items[k] = seq_item(T, v, k)) == NULL) {
            return ERROR;
        }
    }
    return set_add_items(T, s, items, (int)n);
}

/* How many items a tuple, list, range, string or unrolled iterator still
 * yields; -1 if v is none of them (*rc says whether that is an error). */
static Py_ssize_t
seq_length(tracer *T, tc_var *v, int *rc)
{
    *rc = tc_tr_reify(T, v);
    if (*rc != OK) {
        return -1;
    }
    v = tc_tr_structseq_items(v) ? tc_tr_structseq_items(v) : v;
    if (v->kind == TC_VAR_TUPLE || v->kind == TC_VAR_LIST) {
        return v->nitems;
    }
    if (tc_tr_is_set_var(v)) {
        return v->items[0]->nitems;
    }
    if (is_iterator(v)) {
        Py_ssize_t n = iter_length(T, v, rc);
        return n < 0 ? n : n - v->index;
    }
    if (v->kind == TC_VAR_CONST && (PyRange_Check(v->obj)
                                    || PyUnicode_CheckExact(v->obj)
                                    || PyTuple_Check(v->obj)
                                    || PyFrozenSet_CheckExact(v->obj))) {
        Py_ssize_t n = PyObject_Length(v->obj);
        *rc = n < 0 ? ERROR : OK;
        return n;
    }
    return -1;
}

/* Item k of what seq_length measured. */
static tc_var *
seq_item(tracer *T, tc_var *v, Py_ssize_t k)
{
    v = tc_tr_structseq_items(v) ? tc_tr_structseq_items(v) : v;
    if (v->kind == TC_VAR_TUPLE || v->kind == TC_VAR_LIST) {
        return v->items[k];
    }
    if (tc_tr_is_set_var(v)) {
        int rc;
        tc_var *ordered = set_in_order(T, v, &rc);
        return ordered && k < ordered->nitems ? ordered->items[k] : NULL;
    }
    if (is_iterator(v)) {
        return iter_item(T, v, v->index + k);
    }
    if (PyFrozenSet_CheckExact(v->obj)) {
        /* a frozenset constant ({'a', 'b', 'c'} compiles to one): its
         * items in iteration order */
        PyObject *t = PySequence_Tuple(v->obj);
        tc_var *r = t ? new_const(T, PySequence_GetItem(t, k)) : NULL;
        Py_XDECREF(t);
        return r;
    }
    return new_const(T, PySequence_GetItem(v->obj, k));
}

static tc_var *
make_iter(tracer *T, PyObject *factory, tc_var **args, int n)
{
    tc_var *it = tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, n, args);
    if (it != NULL) {
        it->node = TC_TMPL_ITER;
        it->obj = Py_NewRef(factory);
    }
    return it;
}

tc_var *
tc_tr_iter_of(tracer *T, tc_var *seq)
{
    return make_iter(T, K.iter, &seq, 1);
}

/* Iterators are mutable objects but vars are values: an iterator is only
 * advanced in place when nothing else (a local, the stack below it, a
 * container on it) can see it. */
static int
is_aliased(tracer *T, tc_var *v)
{
    for (int i = 0; i < T->nlocals; i++) {
        if (T->locals[i] == v) {
            return 1;
        }
    }
    for (int i = 0; i < T->sp - 1; i++) {
        tc_var *s = T->stack[i];
        if (s == v) {
            return 1;
        }
        for (int j = 0; j < s->nitems; j++) {
            if (s->items[j] == v) {
                return 1;
            }
        }
    }
    return 0;
}

/* iter(), reversed(), enumerate(), zip() of known sequences (reversed
 * needs a sequence, the others also take an unrolled iterator). */

static int sequence_protocol_items(tracer *T, tc_var *v,
                                   tc_var **items);

static int
call_iter_builtin(tracer *T, PyObject *fn, tc_var **args, int nargs)
{
    int nseq = fn == K.zip ? nargs : 1, rc;
    if (nargs < 1 || nargs > 16 || (fn != K.zip && fn != K.enumerate
                                    && nargs != 1)
        || (fn == K.enumerate && nargs > 2)) {
        return NOT_HANDLED;
    }
    for (int i = 0; i < nseq; i++) {
        if (args[i]->kind == TC_VAR_NN_MODULE
            || tc_tr_is_module_slice(args[i])) {
            tc_var *items = tc_tr_nn_container_items(T, args[i], &rc);
            if (items == NULL) {
                return rc != OK ? rc : NOT_HANDLED;
            }
            args[i] = items;
        }
        tc_var *items = NULL;
        if ((rc = sequence_protocol_items(T, args[i], &items)) == OK) {
            args[i] = items;   /* zip(layer_types, per_layer_config_view) */
        }
        else if (rc != NOT_HANDLED) {
            return rc;
        }
        rc = OK;
        if ((is_iterator(args[i])
             && (fn == K.reversed || is_aliased(T, args[i])))
            || seq_length(T, args[i], &rc) < 0) {
            return rc != OK ? rc : NOT_HANDLED;
        }
    }
    if (fn == K.iter && is_iterator(args[0])) {
        return tc_tr_push(T, args[0]);  /* iter(it) is it */
    }
    if (fn == K.enumerate && nargs == 2
        && (tc_tr_reify(T, args[1]) != OK || args[1]->kind != TC_VAR_CONST
            || !PyLong_CheckExact(args[1]->obj))) {
        return PyErr_Occurred() ? ERROR : NOT_HANDLED;
    }
    return tc_tr_push(T, make_iter(T, fn, args, nargs));
}

/* itertools.chain(*seqs) of sequences known item by item (tuples,
 * lists, a frame dict's views): iter() of their items, one tuple. */
static int
call_chain(tracer *T, tc_var **args, int nargs)
{
    tc_var *items[TC_MAX_ITEMS];
    int n = 0;
    for (int i = 0; i < nargs; i++) {
        int rc = tc_tr_reify(T, args[i]);
        if (rc != OK) {
            return rc;
        }
        tc_var *s = args[i];
        if (s->kind != TC_VAR_TUPLE && s->kind != TC_VAR_LIST) {
            return tc_tr_unsupported(T, "itertools.chain() of a %s",
                                     tc_var_kind_name(s));
        }
        if (n + s->nitems > TC_MAX_ITEMS) {
            return tc_tr_unsupported(T, "itertools.chain() of more than "
                                     "%d items", TC_MAX_ITEMS);
        }
        memcpy(items + n, s->items, s->nitems * sizeof(tc_var *));
        n += s->nitems;
    }
    tc_var *all = tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, n, items);
    return all == NULL ? ERROR : tc_tr_push(T, tc_tr_iter_of(T, all));
}

/* zip(*seqs, strict=flag) (an optimizer's step zips its lists so): with
 * lengths known to be equal, zip(*seqs); eager's ValueError for unequal
 * ones comes from Python (a graph break). */
static int
call_zip_strict(tracer *T, tc_var **args, int nargs, PyObject *kwnames)
{
    if (PyTuple_GET_SIZE(kwnames) != 1 || nargs < 2
        || PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0),
                                            "strict") != 0) {
        return NOT_HANDLED;
    }
    int rc = tc_tr_reify(T, args[nargs - 1]);
    if (rc != OK) {
        return rc;
    }
    tc_var *flag = args[nargs - 1];
    if (flag->kind != TC_VAR_CONST || !PyBool_Check(flag->obj)) {
        return tc_tr_unsupported(T, "zip(strict=) with a non-constant flag");
    }
    for (int i = 1; flag->obj == Py_True && i < nargs - 1; i++) {
        Py_ssize_t n0 = seq_length(T, args[0], &rc);
        Py_ssize_t n = rc == OK ? seq_length(T, args[i], &rc) : -1;
        if (rc != OK) {
            return rc;
        }
        if (n0 < 0 || n != n0) {
            return tc_tr_unsupported(T, "zip(strict=True) of sequences of "
                                     "unknown or different lengths");
        }
    }
    return call_iter_builtin(T, K.zip, args, nargs - 1);
}

/* A tuple var of the keys dict var d has now (constants). */
static tc_var *
dict_keys(tracer *T, tc_var *d)
{
    tc_var *items[TC_MAX_ITEMS];
    if (d->nitems > TC_MAX_ITEMS) {
        return NULL;
    }
    for (int i = 0; i < d->nitems; i++) {
        items[i] = tc_var_const(&T->sh->arena, PyTuple_GET_ITEM(d->obj, i),
                                -1);
        if (items[i] == NULL) {
            return NULL;
        }
    }
    return tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, d->nitems, items);
}

/* tuple(seq), list(seq), set(seq), frozenset(seq) of a sequence or
 * unrolled iterator known item by item: a new tuple, list or set var (a
 * list or set is the caller's to mutate), a frozenset constant. */
static int
call_seq_ctor(tracer *T, PyObject *fn, tc_var **args, int nargs)
{
    tc_var_kind kind = fn == (PyObject *)&PyTuple_Type ? TC_VAR_TUPLE
                                                      : TC_VAR_LIST;
    tc_var *items[TC_MAX_ITEMS];
    Py_ssize_t n = 0;
    int rc = OK;
    if (nargs > 1) {
        return NOT_HANDLED;
    }
    tc_var *seq = nargs == 1 ? args[0] : NULL;
    if (seq != NULL) {
        if (is_iterator(seq) && is_aliased(T, seq)) {
            return NOT_HANDLED;  /* it is consumed: others would see it */
        }
        if ((rc = tc_tr_as_dict(T, seq)) == OK) {
            seq = dict_keys(T, seq);    /* list(d): its keys, now */
            if (seq == NULL) {
                return PyErr_Occurred() ? ERROR : NOT_HANDLED;
            }
        }
        else if (rc != NOT_HANDLED) {
            return rc;
        }
        n = seq_length(T, seq, &rc);
        if (n < 0 || n > TC_MAX_ITEMS) {
            return rc != OK ? rc : NOT_HANDLED;
        }
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if ((items[k] = seq_item(T, seq, k)) == NULL) {
            return PyErr_Occurred() ? ERROR : UNSUPPORTED;
        }
    }
    if (seq != NULL && is_iterator(seq)) {
        seq->index += (int)n;   /* exhausted */
    }
    if (fn == (PyObject *)&PySet_Type || fn == (PyObject *)&PyFrozenSet_Type) {
        tc_var *s = make_set(T, items, (int)n, &rc);
        if (s == NULL || fn == (PyObject *)&PySet_Type) {
            return s ? tc_tr_push(T, s) : rc;
        }
        /* a frozenset is immutable: a constant of the same items */
        PyObject *set = real_set(T, s->items[0], &rc);
        if (set == NULL) {
            return rc;
        }
        PyObject *fs = PyFrozenSet_New(set);
        Py_DECREF(set);
        return fs ? push_const(T, fs) : ERROR;
    }
    tc_var *v = tc_var_seq(&T->sh->arena, kind, (int)n, items);
    if (v != NULL && kind == TC_VAR_LIST) {
        v->index = T->serial;
    }
    return tc_tr_push(T, v);
}

/* all(seq) / any(seq) of a sequence or unrolled iterator whose items'
 * truth is known (constants, containers), stopping where Python stops. */
static int
call_all_any(tracer *T, int all, tc_var *seq)
{
    int rc;
    if (is_iterator(seq) && is_aliased(T, seq)) {
        return NOT_HANDLED;
    }
    Py_ssize_t n = seq_length(T, seq, &rc), k;
    if (n < 0) {
        return rc != OK ? rc : NOT_HANDLED;
    }
    int result = all;
    for (k = 0; k < n; k++) {
        tc_var *item = seq_item(T, seq, k);
        if (item == NULL || (rc = tc_tr_reify(T, item)) != OK) {
            return item == NULL ? ERROR : rc;
        }
        int truth;
        if (item->kind == TC_VAR_CONST || item->kind == TC_VAR_OBJECT) {
            truth = PyObject_IsTrue(item->obj);
            if (truth < 0) {
                return tc_tr_unsupported_from_exception(T, "truth value");
            }
        }
        else if (item->kind == TC_VAR_TUPLE || item->kind == TC_VAR_LIST
                 || item->kind == TC_VAR_DICT) {
            truth = item->nitems > 0;
        }
        else {
            return tc_tr_unsupported(T, "%s() of a %s (data-dependent)",
                                     all ? "all" : "any",
                                     tc_var_kind_name(item));
        }
        if (truth != all) {
            result = !all;
            k++;
            break;
        }
    }
    if (is_iterator(seq)) {
        seq->index += (int)k;   /* consumed as far as Python would */
    }
    return push_const(T, PyBool_FromLong(result));
}

/* sum(seq, start=0): start + seq[0] + seq[1] + ..., each + traced as
 * the operator is (tensors, numbers, sequences). */
static int
call_sum(tracer *T, tc_var **args, int nargs)
{
    tc_var *seq = args[0];
    int rc;
    if (is_iterator(seq) && is_aliased(T, seq)) {
        return NOT_HANDLED;
    }
    Py_ssize_t n = seq_length(T, seq, &rc);
    if (n < 0) {
        return rc != OK ? rc : NOT_HANDLED;
    }
    PyObject *zero = PyLong_FromLong(0);
    tc_var *acc = nargs == 2 ? args[1] : new_const(T, zero);
    if (acc == NULL) {
        return ERROR;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        tc_var *item = seq_item(T, seq, k);
        if (item == NULL) {
            return ERROR;
        }
        if (tc_tr_push(T, acc) != OK || tc_tr_push(T, item) != OK) {
            return ERROR;
        }
        if ((rc = tc_tr_op_binary(T, NB_ADD)) != OK) {
            return rc;
        }
        acc = tc_tr_pop(T);
    }
    if (is_iterator(seq)) {
        seq->index += (int)n;
    }
    return tc_tr_push(T, acc);
}

/* How many items an unrolled iterator yields from its start. */
static Py_ssize_t
iter_length(tracer *T, tc_var *it, int *rc)
{
    Py_ssize_t n = PY_SSIZE_T_MAX;
    int nseq = it->obj == K.zip ? it->nitems : 1;
    for (int i = 0; i < nseq; i++) {
        Py_ssize_t len = seq_length(T, it->items[i], rc);
        if (len < 0) {
            return -1;
        }
        n = len < n ? len : n;
    }
    return n;
}

/* Item k (counted from the iterator's start) of an unrolled iterator. */
static tc_var *
iter_item(tracer *T, tc_var *it, Py_ssize_t k)
{
    tc_var *parts[16];
    int nparts = it->obj == K.zip ? it->nitems : 1;
    if (it->obj == K.iter) {
        return seq_item(T, it->items[0], k);
    }
    if (it->obj == K.reversed) {
        int rc;
        Py_ssize_t n = seq_length(T, it->items[0], &rc);
        return n < 0 ? NULL : seq_item(T, it->items[0], n - 1 - k);
    }
    if (it->obj == K.enumerate) {
        long long start = it->nitems > 1
            ? PyLong_AsLongLong(it->items[1]->obj) : 0;
        if (start == -1 && PyErr_Occurred()) {
            return NULL;
        }
        parts[0] = new_const(T, PyLong_FromLongLong(start + k));
        parts[1] = seq_item(T, it->items[0], k);
        nparts = 2;
    }
    else {
        for (int i = 0; i < nparts; i++) {
            parts[i] = seq_item(T, it->items[i], k);
        }
    }
    for (int i = 0; i < nparts; i++) {
        if (parts[i] == NULL) {
            return NULL;
        }
    }
    return tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, nparts, parts);
}

/* collections.abc.Sequence.__iter__, the mixin that yields obj[0],
 * obj[1], ... until obj[i] raises IndexError (borrowed; NULL if absent). */
static PyObject *
sequence_mixin_iter(void)
{
    static PyObject *fn;
    if (fn == NULL) {
        PyObject *mod = PyImport_ImportModule("collections.abc");
        PyObject *seq = mod ? PyObject_GetAttrString(mod, "Sequence") : NULL;
        fn = seq ? PyObject_GetAttrString(seq, "__iter__") : NULL;
        Py_XDECREF(seq);
        Py_XDECREF(mod);
        PyErr_Clear();
    }
    return fn;
}

/* `for x in obj` where obj's class takes __iter__ from Sequence (a
 * transformers _PerLayerConfigView) and defines __len__ and __getitem__
 * in Python: the items obj[0] .. obj[len(obj) - 1], both methods inlined,
 * as a tuple var in *items.  Sequence's contract is that obj[len(obj)]
 * raises IndexError, which ends the mixin's loop.  NOT_HANDLED if obj is
 * no such object. */
static int
sequence_protocol_items(tracer *T, tc_var *v, tc_var **items)
{
    enum { MAX_SEQ_ITEMS = 256 };
    PyTypeObject *tp = tc_tr_new_object_class(v);
    if (tp == NULL && v->kind == TC_VAR_UNKNOWN && v->source >= 0
        && v->obj != NULL) {
        tp = Py_TYPE(v->obj);
    }
    PyObject *name = tp ? PyUnicode_InternFromString("__iter__") : NULL;
    PyObject *it = name ? _PyType_Lookup(tp, name) : NULL;
    Py_XDECREF(name);
    if (it == NULL || it != sequence_mixin_iter()) {
        PyErr_Clear();
        return NOT_HANDLED;
    }
    int rc = tc_tr_call_python_dunder(T, v, "__len__", NULL, 0);
    tc_var *len = rc == OK ? tc_tr_pop(T) : NULL;
    if (len != NULL && (rc = tc_tr_reify(T, len)) == OK
        && (len->kind != TC_VAR_CONST || !PyLong_CheckExact(len->obj))) {
        rc = tc_tr_unsupported(T, "a loop over a %s whose len() is not a "
                               "constant", tp->tp_name);
    }
    if (rc != OK) {
        return rc;
    }
    Py_ssize_t n = PyLong_AsSsize_t(len->obj);
    if (n < 0 || n > MAX_SEQ_ITEMS) {
        PyErr_Clear();
        return tc_tr_unsupported(T, "a loop over a %s of %zd items (up to "
                                 "%d are unrolled)", tp->tp_name, n,
                                 MAX_SEQ_ITEMS);
    }
    tc_var **got = PyMem_Malloc(sizeof(tc_var *) * (size_t)(n + 1));
    if (got == NULL) {
        PyErr_NoMemory();
        return ERROR;
    }
    for (Py_ssize_t i = 0; rc == OK && i < n; i++) {
        tc_var *idx = new_const(T, PyLong_FromSsize_t(i));
        rc = idx == NULL ? ERROR
                         : tc_tr_call_python_dunder(T, v, "__getitem__",
                                                    &idx, 1);
        rc = rc == NOT_HANDLED
            ? tc_tr_unsupported(T, "%s has no Python __getitem__",
                                tp->tp_name) : rc;
        got[i] = rc == OK ? tc_tr_pop(T) : NULL;
    }
    *items = rc == OK ? tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, (int)n, got)
                      : NULL;
    PyMem_Free(got);
    return rc != OK ? rc : *items == NULL ? ERROR : OK;
}

static int dict_view(tracer *T, tc_var *d, const char *which);

int
tc_tr_op_get_iter(tracer *T)
{
    tc_var *v = tc_tr_peek(T, 1);
    int rc;
    if (v == NULL) {
        return tc_tr_unsupported(T, "malformed stack");
    }
    if (v->kind == TC_VAR_NN_MODULE || tc_tr_is_module_slice(v)) {
        tc_var *items = tc_tr_nn_container_items(T, v, &rc);
        if (items == NULL) {
            return rc != OK ? rc
                            : tc_tr_unsupported(T, "a loop over module %s",
                                                Py_TYPE(v->obj)->tp_name);
        }
        T->stack[T->sp - 1] = v = items;
    }
    if ((rc = tc_tr_as_dict(T, v)) == OK) {
        /* `for k in d`: over its keys, as d.keys() is */
        if ((rc = dict_view(T, v, "keys")) != OK) {
            return rc;
        }
        tc_var *keys = tc_tr_pop(T);
        T->stack[T->sp - 1] = v = keys;
    }
    else if (rc != NOT_HANDLED) {
        return rc;
    }
    if (is_iterator(v)) {
        return is_aliased(T, v)
            ? tc_tr_unsupported(T,
                                "a loop over an iterator that is also stored "
                                "elsewhere")
            : OK;  /* iter(it) is it */
    }
    tc_var *items = NULL;
    if ((rc = sequence_protocol_items(T, v, &items)) == OK) {
        T->stack[T->sp - 1] = v = items;
    }
    else if (rc != NOT_HANDLED) {
        return rc;
    }
    if (seq_length(T, v, &rc) < 0) {
        return rc != OK ? rc
             : tc_tr_unsupported(T, "a loop over a %s (only ranges, tuples, "
                                 "lists and their enumerate/zip/reversed are "
                                 "unrolled)", tc_var_kind_name(v));
    }
    tc_tr_pop(T);
    return tc_tr_push(T, make_iter(T, K.iter, &v, 1));
}

int
tc_tr_op_for_iter(tracer *T, int oparg, int *next)
{
    tc_var *it = tc_tr_peek(T, 1), *item = NULL;
    int rc;
    if (it == NULL || !is_iterator(it)) {
        return tc_tr_unsupported(T, "a for loop over an unknown iterator");
    }
    Py_ssize_t n = iter_length(T, it, &rc);
    if (n < 0) {
        return rc != OK ? rc : tc_tr_unsupported(T, "malformed iterator");
    }
    if (it->index >= n) {
        tc_tr_pop(T);
        *next = pyframe_for_iter_exit(oparg, *next);
        return OK;
    }
    if ((item = iter_item(T, it, it->index)) == NULL) {
        return ERROR;
    }
    tc_var *advanced = make_iter(T, it->obj, it->items, it->nitems);
    if (advanced == NULL) {
        return ERROR;
    }
    advanced->index = it->index + 1;
    T->stack[T->sp - 1] = advanced;
    return tc_tr_push(T, item);
}

/* ---- grad-mode context managers ----
 *
 * `with torch.no_grad():` (enable_grad, inference_mode, set_grad_enabled)
 * changes T->grad_mode for the ops traced inside.  The context manager is
 * a DEFERRED var (TC_TMPL_CALL: made by calling obj(*items); index = the
 * mode it sets); BEFORE_WITH leaves on the stack a DEFERRED exit
 * (TC_TMPL_ENTER; index = the mode to restore), which the normal exit
 * sequence calls.  A segment that ends inside the block materializes the
 * context manager, enters it for real and leaves its __exit__ where
 * CPython expects it, so the rest of the block, its exception path
 * (WITH_EXCEPT_START) and the exit run in Python exactly as eager. */

static int
next_opcode(tracer *T)
{
    int pc = T->pc;
    while ((T->code[pc] & 0xff) == EXTENDED_ARG) {
        pc++;
    }
    pc += 1 + tc_inline_caches[T->code[pc] & 0xff];
    while (pc < T->ncode && (T->code[pc] & 0xff) == EXTENDED_ARG) {
        pc++;
    }
    return pc < T->ncode ? T->code[pc] & 0xff : -1;
}

/* *truth: 0/1 for a constant bool, -1 otherwise.  Returns OK, or the
 * reification's UNSUPPORTED/ERROR (kept apart from "not a constant"). */
static int
const_truth(tracer *T, tc_var *v, int *truth)
{
    int rc = tc_tr_reify(T, v);
    *truth = rc == OK && v->kind == TC_VAR_CONST && PyBool_Check(v->obj)
             ? v->obj == Py_True : -1;
    return rc;
}

/* The mode index of a context that leaves the grad mode as it is. */
#define CTX_KEEP_MODE (-1)

static int
is_grad_ctx_object_type(PyObject *tp)
{
    return tp == K.no_grad || tp == K.enable_grad || tp == K.inference_mode
           || tp == K.set_grad_enabled || tp == K.nullcontext;
}

static int
is_grad_ctx_object(PyObject *obj)
{
    return is_grad_ctx_object_type((PyObject *)Py_TYPE(obj));
}

/* The grad mode a call makes a context manager for (0/1), -1 if fn is
 * not one of them, or UNSUPPORTED/ERROR. */
static int
grad_ctx_mode(tracer *T, PyObject *fn, tc_var **args, int nargs,
              PyObject *kwnames)
{
    PyObject *inst = NULL;
    if (PyMethod_Check(fn) && nargs == 0) {
        /* the factory of a @torch.no_grad()-style decorator: the bound
         * clone() of such an object */
        PyObject *name = PyObject_GetAttrString(PyMethod_GET_FUNCTION(fn),
                                                "__name__");
        int is_clone = name && PyUnicode_Check(name)
                       && PyUnicode_CompareWithASCIIString(name, "clone") == 0;
        Py_XDECREF(name);
        PyErr_Clear();
        if (!is_clone) {
            return -1;
        }
        inst = PyMethod_GET_SELF(fn);
        if (!is_grad_ctx_object(inst)) {
            return -1;
        }
        fn = (PyObject *)Py_TYPE(inst);
    }
    if (fn != K.no_grad && fn != K.enable_grad && fn != K.inference_mode
        && fn != K.set_grad_enabled) {
        return -1;
    }
    if (kwnames != NULL) {
        return tc_tr_unsupported(T, "%s() with keyword arguments",
                                 ((PyTypeObject *)fn)->tp_name);
    }
    if (fn == K.no_grad || fn == K.enable_grad) {
        return nargs == 0 ? fn == K.enable_grad
                          : tc_tr_unsupported(T, "grad mode context with "
                                              "arguments");
    }
    int mode = -1;
    if (inst != NULL) {
        PyObject *m = PyObject_GetAttrString(inst, "mode");
        mode = m == Py_True ? 1 : m == Py_False ? 0 : -1;
        Py_XDECREF(m);
        PyErr_Clear();
    }
    else if (nargs == 1) {
        int rc = const_truth(T, args[0], &mode);
        if (rc != OK) {
            return rc;
        }
    }
    else if (nargs == 0 && fn == K.inference_mode) {
        mode = 1;
    }
    if (mode < 0) {
        return tc_tr_unsupported(T, "%s() with a non-constant mode",
                                 ((PyTypeObject *)fn)->tp_name);
    }
    if (fn == K.inference_mode) {
        /* inference_mode(False) inside inference mode would turn it off:
         * not traced */
        return mode ? 0 : tc_tr_unsupported(T, "torch.inference_mode(False)");
    }
    if (inst == NULL && next_opcode(T) != BEFORE_WITH) {
        return tc_tr_unsupported(T, "torch.set_grad_enabled() outside a with "
                                 "statement (changes global state)");
    }
    return mode;
}

static int
make_grad_ctx(tracer *T, tc_var *callable, tc_var **args, int nargs,
              int mode)
{
    if (guard_callable(T, callable) < 0) {
        return ERROR;
    }
    tc_var *ctx = tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, nargs, args);
    if (ctx == NULL) {
        return ERROR;
    }
    ctx->node = TC_TMPL_CALL;  /* only grad-mode contexts are made so */
    ctx->obj = Py_NewRef(callable->obj);
    ctx->index = mode;
    return tc_tr_push(T, ctx);
}

/* The argument named `name` (or at position pos) of a call, or NULL. */
static tc_var *
call_arg(tc_var **args, int nargs, PyObject *kwnames, int pos,
         const char *name)
{
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    for (int i = 0; i < nkw; i++) {
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i),
                                             name) == 0) {
            return args[nargs - nkw + i];
        }
    }
    return pos < nargs - nkw ? args[pos] : NULL;
}

/* ---- no-op context managers ----
 * contextlib.nullcontext() and torch.autocast(device_type, ...,
 * enabled=False) (transformers' rotary embeddings force float32 so):
 * with autocast off, which GLOBAL_STATE guards (frames under autocast are
 * not traced), neither changes what the block's ops compute.  Each is a
 * grad-mode context that keeps the mode; a segment that ends inside the
 * block materializes a nullcontext, equivalent there for the same
 * reason.  Returns NOT_HANDLED for other callables. */
static int
noop_ctx(tracer *T, tc_var *callable, tc_var **args, int nargs,
         PyObject *kwnames)
{
    PyObject *fn = callable->obj;
    if (fn == K.nullcontext) {
        if (nargs != 0) {
            return tc_tr_unsupported(T, "contextlib.nullcontext(enter_result)");
        }
        return make_grad_ctx(T, callable, NULL, 0, CTX_KEEP_MODE);
    }
    if (fn != K.autocast) {
        return NOT_HANDLED;
    }
    tc_var *dev = call_arg(args, nargs, kwnames, 0, "device_type");
    tc_var *en = call_arg(args, nargs, kwnames, 2, "enabled");
    int enabled = -1;
    int rc = en ? const_truth(T, en, &enabled) : OK;
    if (rc != OK) {
        return rc;
    }
    if (en == NULL || enabled != 0) {
        return tc_tr_unsupported(T, "torch.autocast() region (autocast "
                                 "changes the dtypes of the ops in it; only "
                                 "enabled=False is traced)");
    }
    rc = dev ? tc_tr_reify(T, dev) : UNSUPPORTED;
    if (rc == OK && (dev->kind != TC_VAR_CONST || !PyUnicode_Check(dev->obj))) {
        rc = UNSUPPORTED;
    }
    if (rc == OK) {
        /* eager's checks of the device type (it raises for unknown ones) */
        PyObject *probe = PyObject_CallFunction(K.autocast, "OOO", dev->obj,
                                                Py_None, Py_False);
        rc = probe ? OK : UNSUPPORTED;
        Py_XDECREF(probe);
        PyErr_Clear();
    }
    if (rc != OK) {
        return rc == ERROR ? rc
                           : tc_tr_unsupported(T, "torch.autocast() with a "
                                               "device_type that is no "
                                               "constant autocast device");
    }
    if (guard_callable(T, callable) < 0) {
        return ERROR;
    }
    tc_var nc = {0};
    nc.kind = TC_VAR_CONST;
    nc.obj = K.nullcontext;
    nc.source = -1;
    return make_grad_ctx(T, &nc, NULL, 0, CTX_KEEP_MODE);
}

/* BEFORE_WITH of a context manager whose class defines __enter__ and
 * __exit__ in Python (an object read from the frame or made by the
 * trace): `exit = ctx.__exit__` and `ctx.__enter__()` inlined, as CPython
 * does them; the block's normal end calls exit(None, None, None), which
 * is inlined too.  A segment that ends inside the block leaves the bound
 * __exit__ of the real object where CPython expects it (the object
 * carries what the traced __enter__ did to it), so the rest of the block
 * and its exception path run in Python as eager.  NOT_HANDLED for other
 * objects. */
static int
python_context(tracer *T, tc_var *ctx)
{
    static PyObject *enter_name, *exit_name;
    PyTypeObject *tp = tc_tr_is_new_object(ctx) ? tc_tr_new_object_class(ctx)
        : ctx->kind == TC_VAR_UNKNOWN && ctx->source >= 0 && ctx->obj
          && !PyType_Check(ctx->obj)
          && (Py_TYPE(ctx->obj)->tp_flags & Py_TPFLAGS_HEAPTYPE)
        ? Py_TYPE(ctx->obj) : NULL;
    if (enter_name == NULL
        && ((enter_name = PyUnicode_InternFromString("__enter__")) == NULL
            || (exit_name = PyUnicode_InternFromString("__exit__"))
               == NULL)) {
        return ERROR;
    }
    PyObject *enter = tp ? _PyType_Lookup(tp, enter_name) : NULL;
    PyObject *exit = tp ? _PyType_Lookup(tp, exit_name) : NULL;
    if (enter == NULL || exit == NULL || !PyFunction_Check(enter)
        || !PyFunction_Check(exit)) {
        return NOT_HANDLED;
    }
    tc_tr_pop(T);
    /* (a method var: its call binds this very var as self, so what
     * __enter__ and __exit__ set on it is seen after the block) */
    int rc = tc_tr_push_method_var(T, ctx, exit_name);
    return rc == OK ? tc_tr_call_python_dunder(T, ctx, "__enter__", NULL, 0)
                    : rc;
}

int
tc_tr_op_before_with(tracer *T)
{
    tc_var *ctx = tc_tr_peek(T, 1);
    /* (other values made at the exit by a call: sets, closures, classes) */
    int grad_ctx = ctx != NULL && ctx->kind == TC_VAR_DEFERRED
        && ctx->node == TC_TMPL_CALL
        && (PyType_Check(ctx->obj) ? is_grad_ctx_object_type(ctx->obj)
                                     || ctx->obj == K.record_function
            : PyMethod_Check(ctx->obj)
              && is_grad_ctx_object(PyMethod_GET_SELF(ctx->obj)));
    int rc = !grad_ctx && ctx != NULL ? python_context(T, ctx) : NOT_HANDLED;
    if (rc != NOT_HANDLED) {
        return rc;
    }
    if (!grad_ctx) {
        return tc_tr_unsupported(T, "a with statement on a %s (only grad-mode "
                                 "context managers and ones of Python "
                                 "classes are traced)",
                                 ctx ? tc_var_kind_name(ctx) : "?");
    }
    tc_var *exit = tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, 1, &ctx);
    if (exit == NULL) {
        return ERROR;
    }
    exit->node = TC_TMPL_ENTER;
    exit->index = T->grad_mode;
    tc_tr_pop(T);
    if (tc_tr_push(T, exit) != OK) {
        return ERROR;
    }
    if (ctx->index != CTX_KEEP_MODE) {   /* (record_function, autocast off) */
        T->grad_mode = ctx->index;
    }
    return push_const(T, Py_NewRef(Py_None));  /* what __enter__ returns */
}

/* Whether a traced with block of a grad-mode context is open here (its
 * exit value, a TC_TMPL_ENTER, on this or a caller's stack). */
static int
in_grad_block(tracer *T)
{
    for (; T != NULL; T = T->parent) {
        for (int i = 0; i < T->sp; i++) {
            tc_var *v = T->stack[i];
            if (v->kind == TC_VAR_DEFERRED && v->node == TC_TMPL_ENTER
                && v->items[0]->index != CTX_KEEP_MODE) {
                return 1;
            }
        }
    }
    return 0;
}

static PyObject *guarded_state(tracer *T, PyObject *fn, int *rc);

/* torch.autograd.profiler.record_function(name[, args]): a range for
 * the profiler.  With no profiler running (torch.autograd.
 * _profiler_enabled(), guarded False) entering and leaving it records
 * nothing, so a traced with block of it is its body; like a grad-mode
 * context it is a DEFERRED call that an exit inside the block makes and
 * enters for real.  NOT_HANDLED for other calls. */
static int
call_record_function(tracer *T, tc_var *callable, tc_var **args, int nargs,
                     PyObject *kwnames)
{
    if (callable->obj != K.record_function) {
        return NOT_HANDLED;
    }
    if (kwnames != NULL || nargs < 1 || nargs > 2
        || next_opcode(T) != BEFORE_WITH) {
        return tc_tr_unsupported(T, "record_function() outside a with "
                                 "statement, or with keywords");
    }
    int rc;
    PyObject *on = guarded_state(T, K.profiler_enabled, &rc);
    if (on == NULL) {
        return rc;
    }
    int running = on != Py_False;
    Py_DECREF(on);
    if (running) {
        return tc_tr_unsupported(T, "record_function() while the profiler "
                                 "runs (its range is recorded in Python)");
    }
    return make_grad_ctx(T, callable, args, nargs, CTX_KEEP_MODE);
}

/* torch.set_grad_enabled(mode) as a call (its object dropped): it sets
 * the grad mode at once (torch's __init__ does), for the ops traced
 * after it and for every exit after it, which sets the mode before the
 * frame goes on (tc_exit.set_grad; the next segment's GLOBAL_STATE guard
 * then sees it).  An optimizer's step turns grad off so, and back on in
 * a finally block.  NOT_HANDLED for the with-statement form. */
static int
call_set_grad_enabled(tracer *T, tc_var *callable, tc_var **args, int nargs,
                      PyObject *kwnames)
{
    if (callable->obj != K.set_grad_enabled || next_opcode(T) == BEFORE_WITH) {
        return NOT_HANDLED;
    }
    int mode, rc;
    if (kwnames != NULL || nargs != 1) {
        return tc_tr_unsupported(T, "torch.set_grad_enabled() with these "
                                 "arguments");
    }
    if ((rc = const_truth(T, args[0], &mode)) != OK) {
        return rc;
    }
    if (mode < 0) {
        return tc_tr_unsupported(T, "torch.set_grad_enabled() with a "
                                 "non-constant mode");
    }
    if (next_opcode(T) != POP_TOP) {
        return tc_tr_unsupported(T, "the object torch.set_grad_enabled() "
                                 "returns, kept (a context manager that "
                                 "changed the grad mode when made)");
    }
    if (in_grad_block(T)) {
        /* the block's __enter__, made at an exit, would record the mode
         * before this call as the one to restore */
        return tc_tr_unsupported(T, "torch.set_grad_enabled() inside a "
                                 "with block of a grad-mode context");
    }
    if (guard_callable(T, callable) < 0) {
        return ERROR;
    }
    T->grad_mode = mode;
    /* (the mode the segment was entered in needs no setting at exits) */
    T->sh->set_grad = mode == T->sh->entry_grad ? 0 : 1 + mode;
    return push_const(T, Py_NewRef(Py_None));  /* dropped by POP_TOP */
}

/* The normal exit of a with block: exit(None, None, None). */
static int
call_with_exit(tracer *T, tc_var *exit, int nargs)
{
    if (nargs != 3) {
        return tc_tr_unsupported(T, "a call of a context manager's __exit__");
    }
    T->grad_mode = exit->index;
    return push_const(T, Py_NewRef(Py_None));
}

/* ---- dicts with constant keys ---- */

static tc_var *
make_dict(tracer *T, PyObject *keys, tc_var **values)
{
    int n = (int)PyTuple_GET_SIZE(keys);
    tc_var *d = tc_var_seq(&T->sh->arena, TC_VAR_DICT, n, values);
    if (d != NULL) {
        d->obj = Py_NewRef(keys);
        d->index = T->serial;
    }
    return d;
}

/* Give v (every alias of it) the contents of the new var n; the arena
 * frees v's old contents through n. */
static void
replace_contents(tc_var *v, tc_var *n)
{
    tc_var old = *v;
    v->obj = n->obj;
    v->items = n->items;
    v->nitems = n->nitems;
    n->obj = old.obj;
    n->items = old.items;
    n->nitems = old.nitems;
}

#define MAX_FRAME_DICT 64

/* A dict read from the frame (an exact dict with str keys) as a DICT var,
 * in place, so every alias of v sees it: the keys guarded in order
 * (TYPE_MATCH, and tuple(d) == keys through a TC_SRC_CALL source), each
 * value a source of its own.  Its template stays the source (the real
 * dict, which the trace never mutates).  NOT_HANDLED if v is no such
 * dict. */
static int constant_key(PyObject *k, int depth);

int
tc_tr_as_dict(tracer *T, tc_var *v)
{
    if (v->kind == TC_VAR_DICT) {
        return OK;
    }
    if (v->kind != TC_VAR_UNKNOWN || v->source < 0
        || !(PyDict_CheckExact(v->obj)
             || (PyObject *)Py_TYPE(v->obj) == K.ordered_dict)) {
        return NOT_HANDLED;
    }
    tc_guard_set *gs = T->out->guards;
    PyObject *d = v->obj, *k, *val;
    Py_ssize_t n = PyDict_GET_SIZE(d);
    if (n > MAX_FRAME_DICT) {
        return tc_tr_unsupported(T, "a dict of %zd items", n);
    }
    tc_var *items[MAX_FRAME_DICT];
    /* (in the dict's own order: an OrderedDict's may differ from its
     * storage's; the keys guard compares tuple(d), that order) */
    PyObject *keys = PySequence_Tuple(d);
    int i = 0, rc = keys && PyTuple_GET_SIZE(keys) == n ? OK : ERROR;
    while (rc == OK && i < n) {
        k = PyTuple_GET_ITEM(keys, i);
        val = PyDict_GetItemWithError(d, k);
        if (val == NULL) {
            rc = PyErr_Occurred() ? ERROR
                 : tc_tr_unsupported(T, "a dict changed while read");
            break;
        }
        if (!constant_key(k, 0)) {
            rc = tc_tr_unsupported(T, "a dict with a key of type %s",
                                   Py_TYPE(k)->tp_name);
            break;
        }
        int src = tc_source_add(gs, TC_SRC_DICT_ITEM, v->source, 0, k);
        items[i] = src < 0 ? NULL : tc_tr_wrap_value(T, val, src, &rc);
        if (items[i++] == NULL) {
            rc = rc != OK ? rc : ERROR;
        }
    }
    int ksrc = rc == OK ? tc_source_add(gs, TC_SRC_CALL, v->source, 0,
                                        (PyObject *)&PyTuple_Type) : -1;
    if (rc == OK && (ksrc < 0 || tc_guard_type(gs, v->source, d) < 0
                     || tc_guard_equals(gs, ksrc, keys) < 0)) {
        rc = ERROR;
    }
    tc_var *nd = rc == OK ? make_dict(T, keys, items) : NULL;
    Py_XDECREF(keys);
    if (nd == NULL) {
        return rc != OK ? rc : ERROR;
    }
    replace_contents(v, nd);
    v->kind = TC_VAR_DICT;
    v->index = -1;  /* the frame's dict: never mutated by the trace */
    return OK;
}

/* *key reified, and a tuple of constants made one constant (a key
 * such as (None, None)); other kinds are left for the caller to refuse. */
static int
const_key_var(tracer *T, tc_var **key)
{
    int rc = tc_tr_reify(T, *key);
    if (rc != OK || (*key)->kind != TC_VAR_TUPLE) {
        return rc;
    }
    PyObject *kv = tc_tr_const_value(T, *key);
    if (kv == NULL) {
        return PyErr_Occurred() ? ERROR : OK;
    }
    tc_var *c = new_const(T, kv);
    if (c == NULL) {
        return ERROR;
    }
    *key = c;
    return OK;
}

/* Where key is among d's keys (hash, then identity or equality, as a
 * real dict finds it): *at is its index or -1.  A key must be a
 * constant (or a tuple of them); an unhashable one breaks (eager raises
 * TypeError). */
static int
dict_index(tracer *T, tc_var *d, tc_var *key, int *at)
{
    int rc = const_key_var(T, &key);
    if (rc != OK) {
        return rc;
    }
    if (key->kind != TC_VAR_CONST) {
        return tc_tr_unsupported(T, "a dict key of type %s",
                                 tc_var_kind_name(key));
    }
    PyObject *pos = PyDict_New();
    for (int i = 0; pos && i < d->nitems; i++) {
        PyObject *ix = PyLong_FromLong(i);
        if (ix == NULL || PyDict_SetItem(pos, PyTuple_GET_ITEM(d->obj, i),
                                         ix) < 0) {
            Py_CLEAR(pos);
        }
        Py_XDECREF(ix);
    }
    PyObject *ix = pos ? PyDict_GetItemWithError(pos, key->obj) : NULL;
    *at = ix ? (int)PyLong_AsLong(ix) : -1;
    Py_XDECREF(pos);
    if (PyErr_Occurred()) {
        return tc_tr_unsupported_from_exception(T, "dict lookup");
    }
    return OK;
}

/* Whether key k of a dict read from the frame is a constant whose
 * equality the guard on the keys decides: a str, int, bool or None, a
 * torch.dtype, or a tuple of them (_AUTO_DEFAULTS[(device.type,
 * dtype)]). */
static int
constant_key(PyObject *k, int depth)
{
    if (PyUnicode_CheckExact(k) || PyLong_CheckExact(k) || PyBool_Check(k)
        || k == Py_None || tc_dtype_from_torch(k) >= 0) {
        return 1;
    }
    if (!PyTuple_CheckExact(k) || depth > 2) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(k); i++) {
        if (!constant_key(PyTuple_GET_ITEM(k, i), depth + 1)) {
            return 0;
        }
    }
    return 1;
}

/* Whether src is the frame's own **kwargs dict, read by a segment that
 * starts at the frame's beginning. */
static int
is_own_varkw(tracer *T, int src)
{
    PyCodeObject *co = T->co;
    const tc_source *s = &T->out->guards->sources[src];
    return T->depth == 0 && T->start_pc == 0
           && (co->co_flags & CO_VARKEYWORDS) && s->kind == TC_SRC_LOCAL
           && s->index == co->co_argcount + co->co_kwonlyargcount
                          + ((co->co_flags & CO_VARARGS) != 0);
}

/* Whether the trace may change d in place: a dict built by the code
 * being traced at this level (a dict of a caller, or one read from the
 * frame, would be seen changed by Python if the call breaks). */
static int
check_mutable(tracer *T, tc_var *d, const char *what)
{
    if (d->source >= 0 && is_own_varkw(T, d->source)) {
        /* the frame's **kwargs from its first instruction: a dict made
         * for this call that nothing else holds; the exit writes the
         * changed one (a new dict) into its slot */
        T->written[T->out->guards->sources[d->source].index] = 1;
        d->source = -1;
        d->index = T->serial;
    }
    if (d->source < 0 && d->index >= 0 && d->index < T->serial) {
        /* built by a caller (an optimizer's step passes its lists to
         * _init_group): changed in place, logged first so that a call
         * that fails leaves it as it was */
        return tc_tr_log_state(T, d);
    }
    if (d->source >= 0 || d->index != T->serial) {
        return tc_tr_unsupported(T, "%s on a %s the traced function did "
                                 "not build", what, tc_var_kind_name(d));
    }
    return OK;
}

/* list.append(x) and list.extend(seq) on a list the traced code built,
 * in place (every alias sees it). */
static int
call_list_method(tracer *T, tc_var *l, PyObject *name, tc_var **args,
                 int nargs, PyObject *kwnames)
{
    int append = PyUnicode_CompareWithASCIIString(name, "append") == 0;
    int extend = PyUnicode_CompareWithASCIIString(name, "extend") == 0;
    if ((!append && !extend) || nargs != 1 || kwnames != NULL) {
        return NOT_HANDLED;
    }
    int rc = check_mutable(T, l, append ? "append" : "extend");
    if (rc != OK || (!append && (rc = tc_tr_reify(T, args[0])) != OK)) {
        return rc;
    }
    tc_var *src = args[0];
    if (extend && src->kind != TC_VAR_TUPLE && src->kind != TC_VAR_LIST) {
        return tc_tr_unsupported(T, "list.extend of a %s",
                                 tc_var_kind_name(src));
    }
    int add = append ? 1 : src->nitems;
    tc_var *items[TC_MAX_ITEMS];
    if (l->nitems + add > TC_MAX_ITEMS) {
        return tc_tr_unsupported(T, "list too long");
    }
    memcpy(items, l->items, l->nitems * sizeof(tc_var *));
    memcpy(items + l->nitems, append ? args : src->items,
           add * sizeof(tc_var *));
    tc_var *n = tc_var_seq(&T->sh->arena, TC_VAR_LIST, l->nitems + add,
                           items);
    if (n == NULL || push_const(T, Py_NewRef(Py_None)) != OK) {
        return PyErr_Occurred() ? ERROR : UNSUPPORTED;
    }
    replace_contents(l, n);
    return OK;
}

/* d[key] = value, in place (the key's place kept, or appended). */
static int
dict_store(tracer *T, tc_var *d, PyObject *key, int at, tc_var *value)
{
    if (at >= 0) {
        d->items[at] = value;
        return OK;
    }
    if (d->nitems >= 4 * TC_MAX_CALL_ARGS) {
        return tc_tr_unsupported(T, "dict too long");
    }
    tc_var *items[4 * TC_MAX_CALL_ARGS];
    memcpy(items, d->items, d->nitems * sizeof(tc_var *));
    items[d->nitems] = value;
    PyObject *one = PyTuple_Pack(1, key);
    PyObject *keys = one ? PySequence_Concat(d->obj, one) : NULL;
    Py_XDECREF(one);
    tc_var *nd = keys ? make_dict(T, keys, items) : NULL;
    Py_XDECREF(keys);
    if (nd == NULL) {
        return ERROR;
    }
    replace_contents(d, nd);
    return OK;
}

/* The keys of a dict literal must be constants and distinct (a repeated
 * key keeps its first position: not worth tracing). */
static int
check_keys(tracer *T, PyObject *keys)
{
    PyObject *set = PySet_New(keys);
    if (set == NULL) {
        return tc_tr_unsupported_from_exception(T, "dict keys");
    }
    int distinct = PySet_GET_SIZE(set) == PyTuple_GET_SIZE(keys);
    Py_DECREF(set);
    return distinct ? OK : tc_tr_unsupported(T, "a dict literal with repeated "
                                             "keys");
}

int
tc_tr_op_build_map(tracer *T, int n, int const_keys)
{
    int depth = const_keys ? n + 1 : 2 * n;
    if (T->sp < depth) {
        return tc_tr_unsupported(T, "malformed stack");
    }
    tc_var **base = &T->stack[T->sp - depth];
    tc_var *values[TC_MAX_CALL_ARGS];
    if (n > TC_MAX_CALL_ARGS) {
        return tc_tr_unsupported(T, "a dict literal of %d items", n);
    }
    PyObject *keys = PyTuple_New(n);
    if (keys == NULL) {
        return ERROR;
    }
    tc_var *kv = const_keys ? base[n] : NULL;
    int rc = kv && (kv->kind != TC_VAR_TUPLE || kv->nitems != n)
             ? tc_tr_unsupported(T, "malformed BUILD_CONST_KEY_MAP") : OK;
    for (int i = 0; rc == OK && i < n; i++) {
        tc_var *k = const_keys ? kv->items[i] : base[2 * i];
        values[i] = const_keys ? base[i] : base[2 * i + 1];
        rc = const_key_var(T, &k);
        if (rc == OK && k->kind != TC_VAR_CONST) {
            rc = tc_tr_unsupported(T, "a dict with a key of type %s",
                                   tc_var_kind_name(k));
        }
        if (rc == OK) {
            PyTuple_SET_ITEM(keys, i, Py_NewRef(k->obj));
        }
    }
    if (rc == OK) {
        rc = check_keys(T, keys);
    }
    if (rc == OK) {
        T->sp -= depth;
        rc = tc_tr_push(T, make_dict(T, keys, values));
    }
    Py_DECREF(keys);
    return rc;
}

/* DICT_MERGE (f(**a, **b): repeated keys are an error) and DICT_UPDATE
 * ({**a, **b}: later keys win). */
int
tc_tr_op_dict_merge(tracer *T, int oparg, int merge)
{
    tc_var *other = tc_tr_peek(T, 1), *d = tc_tr_peek(T, oparg + 1);
    int as = other ? tc_tr_as_dict(T, other) : NOT_HANDLED;
    if (as != OK && as != NOT_HANDLED) {
        return as;
    }
    if (other == NULL || d == NULL || other->kind != TC_VAR_DICT
        || d->kind != TC_VAR_DICT) {
        return tc_tr_unsupported(T, "merging a dict that is not a literal or "
                                 "**kwargs");
    }
    if (d->nitems + other->nitems > TC_MAX_CALL_ARGS) {
        return tc_tr_unsupported(T, "dict too long");
    }
    tc_var *values[TC_MAX_CALL_ARGS];
    PyObject *keys = PyList_New(0);
    if (keys == NULL) {
        return ERROR;
    }
    int n = 0, rc = OK;
    for (int i = 0; rc == OK && i < d->nitems + other->nitems; i++) {
        int mine = i < d->nitems;
        PyObject *k = PyTuple_GET_ITEM(mine ? d->obj : other->obj,
                                       mine ? i : i - d->nitems);
        tc_var *v = mine ? d->items[i] : other->items[i - d->nitems];
        int at = (int)PySequence_Index(keys, k);
        if (at < 0) {
            PyErr_Clear();
            rc = PyList_Append(keys, k) < 0 ? ERROR : OK;
            values[n++] = v;
        }
        else if (merge) {
            rc = tc_tr_unsupported(T,
                                   "got multiple values for keyword argument "
                                   "%R", k);
        }
        else {
            values[at] = v;
        }
    }
    PyObject *kt = rc == OK ? PyList_AsTuple(keys) : NULL;
    Py_DECREF(keys);
    if (rc != OK || kt == NULL) {
        return rc != OK ? rc : ERROR;
    }
    tc_var *merged = make_dict(T, kt, values);
    Py_DECREF(kt);
    if (merged == NULL) {
        return ERROR;
    }
    tc_tr_pop(T);
    T->stack[T->sp - oparg] = merged;
    return OK;
}

/* MAP_ADD (dict comprehensions): d[key] = value for the dict oparg deep,
 * as a one-item dict merged into it (a repeated key keeps its place and
 * takes the new value, as dict assignment does). */
int
tc_tr_op_map_add(tracer *T, int oparg)
{
    tc_var *value = tc_tr_pop(T), *key = tc_tr_pop(T);
    if (value == NULL || key == NULL) {
        return tc_tr_unsupported(T, "malformed stack");
    }
    int rc = const_key_var(T, &key);
    if (rc != OK) {
        return rc;
    }
    if (key->kind != TC_VAR_CONST) {
        return tc_tr_unsupported(T, "a dict with a key of type %s",
                                 tc_var_kind_name(key));
    }
    PyObject *keys = PyTuple_Pack(1, key->obj);
    tc_var *one = keys ? make_dict(T, keys, &value) : NULL;
    Py_XDECREF(keys);
    if (one == NULL) {
        return ERROR;
    }
    rc = tc_tr_push(T, one);
    return rc != OK ? rc : tc_tr_op_dict_merge(T, oparg, 0);
}

/* d[t] of a dict (or defaultdict) read from the frame keyed by a tensor
 * read from the frame: an optimizer's self.state[p].  A tensor hashes
 * by identity, so the lookup is of that object: ID_MATCH on t's source,
 * TYPE_MATCH on d's, and the value a source of its own, d[t] (read from
 * the dict's storage at run time, as d[t] finds a key that is there; a
 * key missing then fails that source's guards).  A key missing while
 * tracing (the first step of an optimizer, whose state is made then)
 * is a graph break (a defaultdict would insert it) that guards d's
 * length.  NOT_HANDLED for other subscripts. */
int
tc_tr_tensor_key_lookup(tracer *T, tc_var *d, tc_var *key)
{
    if (key->kind != TC_VAR_TENSOR || key->source < 0 || key->obj == NULL
        || d->kind != TC_VAR_UNKNOWN || d->source < 0 || d->obj == NULL
        || !(PyDict_CheckExact(d->obj)
             || (PyObject *)Py_TYPE(d->obj) == K.defaultdict)) {
        return NOT_HANDLED;
    }
    tc_guard_set *gs = T->out->guards;
    PyObject *value = PyDict_GetItemWithError(d->obj, key->obj);
    if (value == NULL) {
        if (PyErr_Occurred()) {
            return ERROR;
        }
        /* the break performs the lookup in Python; the dict's length
         * guarded, so the code is traced again once the item exists */
        return tc_guard_length(gs, d->source, d->obj) < 0 ? ERROR
            : tc_tr_unsupported(T, "a %s has no item for this tensor yet "
                                "(e.g. an optimizer's first step makes its "
                                "state)", Py_TYPE(d->obj)->tp_name);
    }
    Py_INCREF(value);
    int rc = OK;
    int src = tc_source_add(gs, TC_SRC_DICT_ITEM, d->source, 0, key->obj);
    tc_var *v = NULL;
    if (src < 0 || tc_guard_id(gs, key->source, key->obj) < 0
        || tc_guard_type(gs, d->source, d->obj) < 0) {
        rc = ERROR;
    }
    else {
        v = tc_tr_wrap_value(T, value, src, &rc);
    }
    Py_DECREF(value);
    return v == NULL ? (rc != OK ? rc : ERROR) : tc_tr_push(T, v);
}

/* The KeyError of d[key] for a key d does not have. */
static int
key_error(tracer *T, tc_var *key)
{
    if (key->kind != TC_VAR_CONST || key->obj == NULL) {
        return tc_tr_unsupported(T, "KeyError: a %s", tc_var_kind_name(key));
    }
    return tc_tr_raise(T, PyObject_CallOneArg(PyExc_KeyError, key->obj));
}

static PyObject *bound_call(PyObject *fn, PyObject *args);

/* Whether tc_tr_as_dict models dict d item by item. */
static int
modeled_whole(PyObject *d)
{
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    if (PyDict_GET_SIZE(d) > MAX_FRAME_DICT) {
        return 0;
    }
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (!constant_key(k, 0)) {
            return 0;
        }
    }
    return 1;
}

int
tc_tr_frame_dict_item(tracer *T, tc_var *d, tc_var *key, tc_var *dflt)
{
    static PyObject *dict_contains;
    /* keys that hash and compare as at run time: str, bytes, int, None,
     * and classes (by identity, pinned if read from the frame: a
     * validator table keyed by typing.Union, list, dict) */
    PyObject *k = key->obj;
    int atom = key->kind == TC_VAR_CONST
               && (PyUnicode_CheckExact(k) || PyBytes_CheckExact(k)
                   || PyLong_CheckExact(k) || k == Py_None);
    int cls = !atom && k != NULL && key->kind != TC_VAR_TENSOR
              && (PyType_Check(k) || (key->kind == TC_VAR_CONST
                                      && PyObject_IsInstance(
                                          k, (PyObject *)&PyBaseObject_Type)
                                      && Py_TYPE(k)->tp_hash
                                         == PyBaseObject_Type.tp_hash
                                      && Py_TYPE(k)->tp_richcompare
                                         == PyBaseObject_Type.tp_richcompare));
    if (d->kind != TC_VAR_UNKNOWN || d->source < 0 || d->obj == NULL
        || !PyDict_CheckExact(d->obj) || !(atom || cls)
        || modeled_whole(d->obj)) {
        return NOT_HANDLED;
    }
    if (cls && key->source >= 0
        && tc_guard_id(T->out->guards, key->source, k) < 0) {
        return ERROR;
    }
    PyObject *contains = tc_tr_lazy_attr(&dict_contains, "builtins",
                                         "dict.__contains__");
    PyObject *args = contains ? PyTuple_Pack(1, key->obj) : NULL;
    PyObject *has = args ? bound_call(contains, args) : NULL;   /* borrowed */
    Py_XDECREF(args);
    if (has == NULL) {
        return ERROR;
    }
    tc_guard_set *gs = T->out->guards;
    int csrc = tc_source_add(gs, TC_SRC_CALL, d->source, 0, has);
    PyObject *value = PyDict_GetItemWithError(d->obj, key->obj);
    if (csrc < 0 || (value == NULL && PyErr_Occurred())
        || tc_guard_type(gs, d->source, d->obj) < 0
        || tc_guard_equals(gs, csrc, value ? Py_True : Py_False) < 0) {
        return ERROR;
    }
    if (value == NULL) {
        return dflt ? tc_tr_push(T, dflt) : key_error(T, key);
    }
    int rc = OK;
    int src = tc_source_add(gs, TC_SRC_DICT_ITEM, d->source, 0, key->obj);
    tc_var *v = src < 0 ? NULL : tc_tr_wrap_value(T, value, src, &rc);
    return v == NULL ? (rc != OK ? rc : ERROR) : tc_tr_push(T, v);
}

/* d[key] and d.get(key, default) with a constant key. */
int
tc_tr_dict_lookup(tracer *T, tc_var *d, tc_var *key, tc_var *dflt)
{
    int at, rc = dict_index(T, d, key, &at);
    if (rc != OK) {
        return rc;
    }
    if (at >= 0) {
        return tc_tr_push(T, d->items[at]);
    }
    if (dflt != NULL) {
        return tc_tr_push(T, dflt);
    }
    return key_error(T, key);
}

/* d.pop(key[, default]) */
static int
dict_pop(tracer *T, tc_var *d, tc_var *key, tc_var *dflt)
{
    int at, rc = check_mutable(T, d, "pop");
    if (rc != OK || (rc = dict_index(T, d, key, &at)) != OK) {
        return rc;
    }
    if (at < 0) {
        return dflt ? tc_tr_push(T, dflt) : key_error(T, key);
    }
    tc_var *value = d->items[at];
    tc_var *items[4 * TC_MAX_CALL_ARGS];
    if (d->nitems > 4 * TC_MAX_CALL_ARGS) {
        return tc_tr_unsupported(T, "dict too long");
    }
    PyObject *keys = PyTuple_New(d->nitems - 1);
    for (int i = 0, j = 0; keys && i < d->nitems; i++) {
        if (i != at) {
            PyTuple_SET_ITEM(keys, j, Py_NewRef(PyTuple_GET_ITEM(d->obj, i)));
            items[j++] = d->items[i];
        }
    }
    tc_var *nd = keys ? make_dict(T, keys, items) : NULL;
    Py_XDECREF(keys);
    if (nd == NULL || tc_tr_push(T, value) != OK) {
        return PyErr_Occurred() ? ERROR : UNSUPPORTED;
    }
    replace_contents(d, nd);
    return OK;
}

/* d.setdefault(key[, default]) */
static int
dict_setdefault(tracer *T, tc_var *d, tc_var *key, tc_var *dflt)
{
    int at, rc = dict_index(T, d, key, &at);
    if (rc != OK) {
        return rc;
    }
    if (at >= 0) {
        return tc_tr_push(T, d->items[at]);
    }
    if ((rc = check_mutable(T, d, "setdefault")) != OK) {
        return rc;
    }
    if (dflt == NULL && (dflt = tc_tr_const_var(T, Py_None)) == NULL) {
        return ERROR;
    }
    if (tc_tr_push(T, dflt) != OK) {
        return UNSUPPORTED;
    }
    return dict_store(T, d, key->obj, -1, dflt);
}

/* The next instruction after the one at T->pc, and its oparg (-1 when
 * an EXTENDED_ARG makes it wide: no caller here needs those). */
static int
next_instr(tracer *T, int *oparg)
{
    int op = next_opcode(T);
    int pc = T->pc;
    while ((T->code[pc] & 0xff) == EXTENDED_ARG) {
        pc++;
    }
    pc += 1 + tc_inline_caches[T->code[pc] & 0xff];
    *oparg = pc < T->ncode && (T->code[pc] & 0xff) == op
             ? T->code[pc] >> 8 : -1;
    return op;
}

/* Whether the value the current call pushes is read through before any
 * other instruction runs: iterated (GET_ITER), tested by `in`, or the
 * last positional argument of a builtin that consumes its iterable and
 * keeps no reference to it (dict(d.items()), list(d.keys()), len(...)).
 * The pending call's callee is one of the two slots below its arguments
 * already pushed; the other is its NULL (the order is the version's).
 * 1, 0, or ERROR. */
static int fixed_identity(tracer *T, tc_var *v);

static int
pushed_value_read_at_once(tracer *T)
{
    int oparg, op = next_instr(T, &oparg);
    if (op == GET_ITER || op == CONTAINS_OP) {
        return 1;
    }
    if ((op != PRECALL && op != CALL) || oparg < 1 || T->kwnames != NULL
        || T->sp - oparg - 1 < 0) {
        return 0;
    }
    tc_var *a = T->stack[T->sp - oparg - 1], *b = T->stack[T->sp - oparg];
    tc_var *fn = a->kind == TC_VAR_NULL ? b : b->kind == TC_VAR_NULL ? a
                                                                     : NULL;
    if (fn == NULL || fn->obj == NULL) {
        return 0;
    }
    PyObject *consumers[] = {
        (PyObject *)&PyDict_Type, (PyObject *)&PyList_Type,
        (PyObject *)&PyTuple_Type, (PyObject *)&PySet_Type,
        (PyObject *)&PyFrozenSet_Type, K.ordered_dict, K.sorted, K.len,
        K.sum, K.all, K.any,
    };
    for (size_t i = 0; i < sizeof(consumers) / sizeof(consumers[0]); i++) {
        if (fn->obj == consumers[i]) {
            return fixed_identity(T, fn);  /* (`dict` may be rebound) */
        }
    }
    return 0;
}

/* d.keys(), d.values(), d.items(): a tuple of them, a snapshot.  A view
 * follows its dict, so the snapshot is exact only where the dict cannot
 * change while the view lives: the view is read through at once
 * (`for k, v in d.items()`, `dict(self.items())` in ModelOutput's
 * __getitem__), or the dict is one the trace never changes.  Any other
 * view as a value is not modeled. */
static int
dict_view(tracer *T, tc_var *d, const char *which)
{
    int op = T->code[T->pc] & 0xff;
    /* a dict read from the frame is never changed by the trace (the
     * same holds for what it inlines): a view of it is its snapshot
     * (itertools.chain(hooks.values(), ...)) */
    int frozen = d->source >= 0 && d->index < 0;
    int once = frozen || op == GET_ITER ? 1 : pushed_value_read_at_once(T);
    if (once == ERROR) {
        return ERROR;
    }
    if (!once) {
        return tc_tr_unsupported(T, "dict.%s() as a value (a view)", which);
    }
    tc_var *items[4 * TC_MAX_CALL_ARGS];
    if (d->nitems > 4 * TC_MAX_CALL_ARGS) {
        return tc_tr_unsupported(T, "dict too long");
    }
    for (int i = 0; i < d->nitems; i++) {
        tc_var *k = which[0] == 'v' ? NULL
                  : tc_var_const(&T->sh->arena, PyTuple_GET_ITEM(d->obj, i),
                                 -1);
        if (which[0] == 'k') {
            items[i] = k;
        }
        else if (which[0] == 'v') {
            items[i] = d->items[i];
        }
        else {
            tc_var *kv[2] = {k, d->items[i]};
            items[i] = k ? tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, 2, kv)
                         : NULL;
        }
        if (items[i] == NULL) {
            return ERROR;
        }
    }
    return tc_tr_push(T, tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, d->nitems,
                                    items));
}

/* d[key] = value as dict() and dict.update store it: a new key is
 * appended, a repeated one keeps its place and takes the new value. */
static int
dict_put(tracer *T, tc_var *d, tc_var *key, tc_var *value)
{
    int at, rc = const_key_var(T, &key);
    if (rc == OK && key->kind != TC_VAR_CONST) {
        rc = tc_tr_unsupported(T, "a dict with a key of type %s",
                               tc_var_kind_name(key));
    }
    if (rc == OK) {
        rc = dict_index(T, d, key, &at);
    }
    return rc == OK ? dict_store(T, d, key->obj, at, value) : rc;
}

/* The items of src (a dict, or a tuple / list of pairs) put into d. */
static int
dict_fill(tracer *T, tc_var *d, tc_var *src)
{
    int rc = tc_tr_as_dict(T, src);
    if (rc == OK) {
        for (int i = 0; rc == OK && i < src->nitems; i++) {
            tc_var *k = tc_tr_const_var(T, PyTuple_GET_ITEM(src->obj, i));
            rc = k ? dict_put(T, d, k, src->items[i]) : ERROR;
        }
        return rc;
    }
    if (rc != NOT_HANDLED || (rc = tc_tr_reify(T, src)) != OK) {
        return rc;
    }
    if (src->kind != TC_VAR_TUPLE && src->kind != TC_VAR_LIST) {
        return NOT_HANDLED;
    }
    for (int i = 0; rc == OK && i < src->nitems; i++) {
        tc_var *kv = src->items[i];
        rc = tc_tr_reify(T, kv);
        if (rc == OK && (kv->kind == TC_VAR_TUPLE || kv->kind == TC_VAR_LIST)
            && kv->nitems == 2) {
            rc = dict_put(T, d, kv->items[0], kv->items[1]);
        }
        else if (rc == OK) {
            /* eager raises (TypeError / ValueError): let it */
            rc = tc_tr_unsupported(T, "dict() of an item that is not a "
                                   "pair (%s)", tc_var_kind_name(kv));
        }
    }
    return rc;
}

/* dict(), dict(mapping or pairs), and keywords after them: a new DICT
 * var built as dict() builds it (in insertion order, a repeated key in
 * its first place with its last value).  ModelOutput.__getitem__ does
 * dict(self.items()). */
static int
call_dict_ctor(tracer *T, tc_var **args, int nargs, PyObject *kwnames)
{
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    int npos = nargs - nkw;
    if (npos > 1) {
        return NOT_HANDLED;   /* TypeError, raised by eager */
    }
    PyObject *none = PyTuple_New(0);
    tc_var *d = none ? make_dict(T, none, NULL) : NULL;
    Py_XDECREF(none);
    if (d == NULL) {
        return ERROR;
    }
    int rc = npos == 1 ? dict_fill(T, d, args[0]) : OK;
    for (int i = 0; rc == OK && i < nkw; i++) {
        tc_var *k = tc_tr_const_var(T, PyTuple_GET_ITEM(kwnames, i));
        rc = k ? dict_put(T, d, k, args[npos + i]) : ERROR;
    }
    return rc == OK ? tc_tr_push(T, d) : rc;
}

/* d.get / pop / setdefault / keys / values / items / copy */
static int
call_dict_method(tracer *T, tc_var *d, PyObject *name, tc_var **args,
                 int nargs, PyObject *kwnames)
{
    const char *m = PyUnicode_AsUTF8(name);
    if (m == NULL) {
        return ERROR;
    }
    if (kwnames != NULL) {
        return tc_tr_unsupported(T, "dict.%s() with keywords", m);
    }
    tc_var *dflt = nargs == 2 ? args[1] : NULL;
    if (strcmp(m, "get") == 0 && (nargs == 1 || nargs == 2)) {
        if (dflt == NULL && (dflt = tc_tr_const_var(T, Py_None)) == NULL) {
            return ERROR;
        }
        return tc_tr_dict_lookup(T, d, args[0], dflt);
    }
    if (strcmp(m, "pop") == 0 && (nargs == 1 || nargs == 2)) {
        return dict_pop(T, d, args[0], dflt);
    }
    if (strcmp(m, "setdefault") == 0 && (nargs == 1 || nargs == 2)) {
        return dict_setdefault(T, d, args[0], dflt);
    }
    if ((strcmp(m, "keys") == 0 || strcmp(m, "values") == 0
         || strcmp(m, "items") == 0) && nargs == 0) {
        return dict_view(T, d, m);
    }
    if (strcmp(m, "copy") == 0 && nargs == 0 && d->index >= 0) {
        /* of a dict the trace built (a plain dict): dict(d) */
        return call_dict_ctor(T, &d, 1, NULL);
    }
    return tc_tr_unsupported(T, "dict.%s() (not modeled)", m);
}

/* o[key] = value on an object the traced code made: its class's Python
 * __setitem__ inlined, or dict's (objects.c). */
static int
store_item_of_object(tracer *T, tc_var *o, tc_var *key, tc_var *value)
{
    static PyObject *str_setitem;
    if (str_setitem == NULL
        && (str_setitem = PyUnicode_InternFromString("__setitem__")) == NULL) {
        return ERROR;
    }
    PyObject *f = _PyType_Lookup(tc_tr_new_object_class(o), str_setitem);
    if (f != NULL && PyFunction_Check(f)) {
        tc_var *fv = tc_var_new(&T->sh->arena, TC_VAR_OBJECT, -1);
        if (fv == NULL) {
            return ERROR;
        }
        fv->obj = Py_NewRef(f);
        tc_var *args[3] = {o, key, value};
        int rc = tc_tr_inline_call(T, fv, args, 3, NULL);
        return rc == OK ? (tc_tr_pop(T) ? OK : ERROR) : rc;
    }
    if (f == NULL || tc_tr_new_object_items(T, o) == NULL) {
        return tc_tr_unsupported(T, "item assignment on a %s",
                                 tc_var_kind_name(o));
    }
    return tc_tr_new_object_store_item(T, o, key, value);
}

/* STORE_SUBSCR d[key] = value on a dict the traced code built. */
int
tc_tr_op_store_subscr(tracer *T)
{
    tc_var *key = tc_tr_pop(T), *d = tc_tr_pop(T), *value = tc_tr_pop(T);
    if (key == NULL || d == NULL || value == NULL) {
        return tc_tr_unsupported(T, "malformed stack");
    }
    if (tc_tr_is_new_object(d)) {
        return store_item_of_object(T, d, key, value);
    }
    if (d->kind == TC_VAR_TENSOR) {
        return tc_tr_setitem(T, d, key, value);
    }
    int at, rc = tc_tr_as_dict(T, d);
    if (rc != OK && rc != NOT_HANDLED) {
        return rc;
    }
    if (d->kind != TC_VAR_DICT) {
        return tc_tr_unsupported(T, "item assignment on a %s",
                                 tc_var_kind_name(d));
    }
    if (d->source >= 0 && d->index < 0
        && (rc = dict_index(T, d, key, &at)) == OK && at >= 0
        && (value == d->items[at]
            || (value->source >= 0 && value->source == d->items[at]->source))) {
        /* d[k] = d[k] of a frame dict (an optimizer's step writes back
         * the state tensors it updated in place): the same object, the
         * dict unchanged */
        return OK;
    }
    if (rc != OK) {
        return rc;
    }
    rc = check_mutable(T, d, "item assignment");
    if (rc != OK || (rc = dict_index(T, d, key, &at)) != OK) {
        return rc;
    }
    return dict_store(T, d, key->obj, at, value);
}

/* A TUPLE var of constants, the items of the tuple or list seq (at most
 * TC_MAX_CALL_ARGS of them: the caller checks). */
static tc_var *
const_seq_items(tracer *T, PyObject *seq)
{
    int n = (int)PySequence_Fast_GET_SIZE(seq);
    tc_var *items[TC_MAX_CALL_ARGS];
    for (int i = 0; i < n; i++) {
        items[i] = tc_tr_const_var(T, PySequence_Fast_GET_ITEM(seq, i));
        if (items[i] == NULL) {
            return NULL;
        }
    }
    return tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, n, items);
}

/* f(*args, **kwargs): the call with its arguments spread out. */
int
tc_tr_op_call_ex(tracer *T, int oparg)
{
    tc_var *kw = (oparg & 1) ? tc_tr_pop(T) : NULL, *a = tc_tr_pop(T),
           *f = tc_tr_pop(T);
    tc_var *null = tc_tr_pop(T);
    if (null == NULL || a == NULL) {
        return tc_tr_unsupported(T, "malformed stack");
    }
    int rc = tc_tr_reify(T, a);
    if (rc != OK) {
        return rc;
    }
    if (kw != NULL && (rc = tc_tr_as_dict(T, kw)) != OK
        && rc != NOT_HANDLED) {
        return rc;
    }
    /* f(*x.max(1)) */
    a = tc_tr_structseq_items(a) ? tc_tr_structseq_items(a) : a;
    if (a->kind == TC_VAR_CONST
        && (PyTuple_Check(a->obj) || PyList_Check(a->obj))) {
        /* x.view(*(x.size()[:-2] + (n,))): a constant tuple (a
         * torch.Size of static sizes) spread into constant arguments */
        Py_ssize_t na = PySequence_Fast_GET_SIZE(a->obj);
        if (na > TC_MAX_CALL_ARGS) {
            return tc_tr_unsupported(T, "call with %zd arguments", na);
        }
        a = const_seq_items(T, a->obj);
        if (a == NULL) {
            return ERROR;
        }
    }
    if (null->kind != TC_VAR_NULL
        || (a->kind != TC_VAR_TUPLE && a->kind != TC_VAR_LIST)
        || (kw != NULL && kw->kind != TC_VAR_DICT)) {
        return tc_tr_unsupported(T, "a call with *args or **kwargs of unknown "
                                 "length (*%s)", tc_var_kind_name(a));
    }
    int n = a->nitems + (kw ? kw->nitems : 0);
    tc_var *args[TC_MAX_CALL_ARGS];
    if (n > TC_MAX_CALL_ARGS) {
        return tc_tr_unsupported(T, "call with %d arguments", n);
    }
    memcpy(args, a->items, a->nitems * sizeof(tc_var *));
    for (int i = 0; kw && i < kw->nitems; i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(kw->obj, i))) {
            return tc_tr_unsupported(T, "keywords must be strings");
        }
        args[a->nitems + i] = kw->items[i];
    }
    /* the dict var owns its keys tuple for the whole trace */
    return tc_tr_call_with_args(T, f, args, n,
                          kw && kw->nitems ? kw->obj : NULL);
}

int
tc_tr_op_list_to_tuple(tracer *T)
{
    tc_var *l = tc_tr_pop(T);
    int rc = l ? tc_tr_reify(T, l) : tc_tr_unsupported(T, "malformed stack");
    if (rc != OK) {
        return rc;
    }
    if (l->kind != TC_VAR_LIST && l->kind != TC_VAR_TUPLE) {
        return tc_tr_unsupported(T, "tuple() of a %s", tc_var_kind_name(l));
    }
    return tc_tr_push(T, tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, l->nitems,
                                    l->items));
}

int
tc_tr_all_const(tc_var **args, int n)
{
    for (int i = 0; i < n; i++) {
        if (args[i]->kind != TC_VAR_CONST) {
            return 0;
        }
    }
    return 1;
}

/* Builtins (functions and int/float/bool) and math functions that are
 * pure on Python scalars. */
static int
is_pure_builtin(PyObject *fn)
{
    static const char *const pure[] = {"abs", "min", "max", "round", "len",
                                       "pow", NULL};
    if (fn == (PyObject *)&PyLong_Type || fn == (PyObject *)&PyFloat_Type
        || fn == (PyObject *)&PyBool_Type || fn == (PyObject *)&PySlice_Type
        || fn == (PyObject *)&PyUnicode_Type || fn == K.finfo
        || fn == K.iinfo || fn == K.device) {
        /* (torch.finfo(x.dtype).min: an immutable value of a constant) */
        return 1;
    }
    if (!PyCFunction_Check(fn)) {
        return 0;
    }
    const char *name = ((PyCFunctionObject *)fn)->m_ml->ml_name;
    PyObject *mod = ((PyCFunctionObject *)fn)->m_module;
    if (mod != NULL && PyUnicode_Check(mod)
        && PyUnicode_CompareWithASCIIString(mod, "math") == 0) {
        return 1;   /* math.sqrt(head_dim), math.log(2): pure on numbers */
    }
    if (mod == NULL || !PyUnicode_Check(mod)
        || PyUnicode_CompareWithASCIIString(mod, "builtins") != 0) {
        return 0;
    }
    int ok = 0;
    for (int i = 0; pure[i]; i++) {
        ok |= strcmp(pure[i], name) == 0;
    }
    return ok;
}

static int is_immutable_value(PyObject *obj);

/* Builtins that are pure on Python scalars: fold them. */
static int
fold_builtin_call(tracer *T, PyObject *fn, tc_var **args, int n,
                  PyObject *kwnames)
{
    /* (torch.device(type="cuda", index=0): FX prints devices so) */
    if (!is_pure_builtin(fn) || (kwnames != NULL && fn != K.device)
        || n > 4) {
        return UNSUPPORTED;
    }
    const char *name = PyType_Check(fn) ? ((PyTypeObject *)fn)->tp_name
                                        : ((PyCFunctionObject *)fn)->m_ml->ml_name;
    int rc = tc_tr_reify_all(T, args, n);
    if (rc != OK) {
        return rc;
    }
    /* constants; torch.int32 (an OBJECT: fixed); tuples, lists and sets
     * of constants as their values (max(config.attention_window)) */
    PyObject *argv[4];
    int held = 0, seqs = 0;
    for (int i = 0; i < n; i++) {
        int dtype = args[i]->kind == TC_VAR_OBJECT
                    && tc_dtype_from_torch(args[i]->obj) >= 0;
        argv[i] = args[i]->kind == TC_VAR_CONST || dtype
            ? Py_NewRef(args[i]->obj) : tc_tr_const_value(T, args[i]);
        seqs += args[i]->kind != TC_VAR_CONST && !dtype;
        if (argv[i] == NULL) {
            break;
        }
        held++;
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *r = held < n ? NULL
                : PyObject_Vectorcall(fn, argv, n - nkw, kwnames);
    for (int i = 0; i < held; i++) {
        Py_DECREF(argv[i]);
    }
    if (held < n) {
        return PyErr_Occurred() ? ERROR : UNSUPPORTED;
    }
    if (r == NULL) {
        return tc_tr_unsupported_from_exception(T, name);
    }
    if (seqs && !is_immutable_value(r)) {
        /* (an item of a container: one object for every call) */
        Py_DECREF(r);
        return UNSUPPORTED;
    }
    tc_var *v = tc_var_const(&T->sh->arena, r, -1);
    Py_DECREF(r);
    return tc_tr_push(T, v);
}

/* inspect.signature(f) of a Python function, or of a method of one, whose
 * identity the guards pin: a constant (transformers' apply_chunking_to_
 * forward counts the parameters of a module's forward).  A function read
 * from the frame is guarded as an inlined one is; a method by the identity
 * of its __func__. */
static int
fold_signature(tracer *T, tc_var *f)
{
    PyObject *o = f->obj;
    if (o == NULL || (f->kind != TC_VAR_CONST && f->kind != TC_VAR_OBJECT
                      && f->kind != TC_VAR_UNKNOWN)) {
        return NOT_HANDLED;
    }
    PyObject *fn = PyMethod_Check(o) ? PyMethod_GET_FUNCTION(o) : o;
    if (!PyFunction_Check(fn)) {
        return NOT_HANDLED;
    }
    if (PyMethod_Check(o) && f->source < 0) {
        return NOT_HANDLED;
    }
    if (PyMethod_Check(o)) {
        /* a bound method is made per read: its function is guarded */
        PyObject *func = PyUnicode_InternFromString("__func__");
        int a = func ? tc_source_add(T->out->guards, TC_SRC_ATTR, f->source,
                                     0, func) : -1;
        Py_XDECREF(func);
        if (a < 0 || tc_guard_id(T->out->guards, a, fn) < 0) {
            return ERROR;
        }
    }
    else if (f->source >= 0
             && tc_guard_function(T->out->guards, f->source, fn) < 0) {
        return ERROR;
    }
    return tc_tr_push_folded(T, PyObject_CallOneArg(K.signature, o),
                             "inspect.signature");
}

static PyObject *
callable_name(PyObject *fn)
{
    PyObject *name = PyObject_GetAttrString(fn, "__qualname__");
    if (name == NULL) {
        PyErr_Clear();
        name = PyObject_Repr(fn);
    }
    return name;
}

/* ---- builtins folded on what the tracer knows ---- */

/* The exact type of v's value, guarding it where it came from the frame;
 * NULL if unknown (borrowed). */
static PyObject *
known_type(tracer *T, tc_var *v)
{
    switch (v->kind) {
    case TC_VAR_TENSOR:
        /* TENSOR_MATCH guards an input's exact type (Tensor or
         * Parameter); computed tensors are Tensors */
        for (int i = 0; v->source >= 0 && i < T->out->guards->nguards; i++) {
            tc_guard *g = &T->out->guards->guards[i];
            if (g->kind == TC_GUARD_TENSOR_MATCH && g->source == v->source) {
                return g->tensor.type;
            }
        }
        return tc_tensor_type;
    case TC_VAR_TUPLE:
        return (PyObject *)&PyTuple_Type;
    case TC_VAR_LIST:
        return (PyObject *)&PyList_Type;
    case TC_VAR_DICT:
        return (PyObject *)&PyDict_Type;
    case TC_VAR_LAZY:
    case TC_VAR_UNKNOWN:
        if (v->source >= 0
            && tc_guard_type(T->out->guards, v->source, v->obj) < 0) {
            return NULL;
        }
        return (PyObject *)Py_TYPE(v->obj);
    case TC_VAR_CONST:
    case TC_VAR_OBJECT:
    case TC_VAR_NN_MODULE:  /* type-guarded when read */
        return (PyObject *)Py_TYPE(v->obj);
    case TC_VAR_DEFERRED:
        return tc_tr_is_set_var(v) ? (PyObject *)&PySet_Type
                             : (PyObject *)tc_tr_new_object_class(v);
    default:
        return NULL;
    }
}

/* type(x): its exact type, guarded where x came from the frame. */
static int
call_type(tracer *T, tc_var *x)
{
    if (tc_tr_reify(T, x) != OK) {
        return ERROR;
    }
    PyObject *t = known_type(T, x);
    if (t == NULL) {
        return PyErr_Occurred() ? ERROR : NOT_HANDLED;
    }
    if (x->source >= 0 && x->kind != TC_VAR_TENSOR
        && (((PyTypeObject *)t)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        /* a user class: its attributes are read through type(x), a
         * source of its own (they may change between calls) */
        int rc, src = tc_source_add(T->out->guards, TC_SRC_CALL, x->source, 0,
                                    K.type);
        tc_var *v = src < 0 ? NULL : tc_tr_wrap_value(T, t, src, &rc);
        return v == NULL ? (src < 0 ? ERROR : rc) : tc_tr_push(T, v);
    }
    if (tc_tr_is_new_object(x)) {
        return tc_tr_push(T, tc_tr_class_var(T, (PyTypeObject *)t));
    }
    tc_var *v = tc_var_new(&T->sh->arena, TC_VAR_OBJECT, -1);
    if (v == NULL) {
        return ERROR;
    }
    v->obj = Py_NewRef(t);
    return tc_tr_push(T, v);
}

/* ---- imports inside functions ---- */

/* The absolute name `from <level dots><name> import ...` means in the
 * traced code's module, or NULL (not a package-relative import the
 * globals explain). */
static PyObject *
absolute_name(tracer *T, PyObject *name, long level)
{
    if (level == 0) {
        return Py_NewRef(name);
    }
    PyObject *pkg = PyDict_GetItemString(T->globals, "__package__");
    if (pkg == NULL || !PyUnicode_Check(pkg)) {
        return NULL;
    }
    PyObject *base = Py_NewRef(pkg);
    for (long i = 1; base != NULL && i < level; i++) {
        Py_ssize_t dot = PyUnicode_FindChar(base, '.', 0,
                                            PyUnicode_GET_LENGTH(base), -1);
        PyObject *up = dot < 0 ? NULL : PyUnicode_Substring(base, 0, dot);
        Py_DECREF(base);
        base = up;
    }
    if (base == NULL || PyUnicode_GET_LENGTH(name) == 0) {
        return base;
    }
    PyObject *r = PyUnicode_FromFormat("%U.%U", base, name);
    Py_DECREF(base);
    return r;
}

/* A module already imported (and done initializing): importing it again
 * runs no code.  A new reference or NULL (no exception). */
static PyObject *
imported_module(PyObject *absname)
{
    PyObject *m = PyImport_GetModule(absname);
    if (m == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *spec = PyObject_GetAttrString(m, "__spec__");
    PyObject *init = spec && spec != Py_None
                     ? PyObject_GetAttrString(spec, "_initializing") : NULL;
    int busy = init != NULL && PyObject_IsTrue(init) == 1;
    PyErr_Clear();
    Py_XDECREF(spec);
    Py_XDECREF(init);
    if (busy) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* IMPORT_NAME of a module that is already imported: the module, as a
 * constant (`import torch._dynamo`, `from ..utils import x` inside a
 * function).  An import that would run code (a first import, a fromlist
 * name that is a submodule not yet imported, a replaced __import__)
 * breaks. */
int
tc_tr_op_import_name(tracer *T, int oparg)
{
    tc_var *fromlist = tc_tr_pop(T), *level = tc_tr_pop(T);
    PyObject *name = PyTuple_GetItem(T->co->co_names, oparg);
    if (fromlist == NULL || level == NULL || name == NULL) {
        PyErr_Clear();
        return tc_tr_unsupported(T, "malformed import");
    }
    if (PyDict_GetItemString(T->builtins, "__import__") != K.import) {
        return tc_tr_unsupported(T, "import with a replaced __import__");
    }
    /* the fromlist is None or a constant tuple of names (a TUPLE var) */
    int plain = fromlist->kind == TC_VAR_CONST && fromlist->obj == Py_None;
    long lvl = level->kind == TC_VAR_CONST && PyLong_CheckExact(level->obj)
               ? PyLong_AsLong(level->obj) : -1;
    if (lvl < 0 || (!plain && fromlist->kind != TC_VAR_TUPLE)
        || (plain && lvl != 0)) {
        PyErr_Clear();
        return tc_tr_unsupported(T, "an import of this form");
    }
    PyObject *absname = absolute_name(T, name, lvl);
    PyObject *mod = absname ? imported_module(absname) : NULL;
    Py_XDECREF(absname);
    for (int i = 0; mod && !plain && i < fromlist->nitems; i++) {
        tc_var *x = fromlist->items[i];
        if (x->kind != TC_VAR_CONST || !PyUnicode_Check(x->obj)
            || PyUnicode_CompareWithASCIIString(x->obj, "*") == 0
            || !PyObject_HasAttr(mod, x->obj)) {
            Py_CLEAR(mod);
        }
    }
    if (mod != NULL && plain) {
        /* `import a.b.c` binds the top package a */
        Py_ssize_t dot = PyUnicode_FindChar(name, '.', 0,
                                            PyUnicode_GET_LENGTH(name), 1);
        PyObject *top = dot < 0 ? Py_NewRef(name)
                                : PyUnicode_Substring(name, 0, dot);
        Py_SETREF(mod, top ? imported_module(top) : NULL);
        Py_XDECREF(top);
    }
    if (mod == NULL) {
        return PyErr_Occurred() ? ERROR
             : tc_tr_unsupported(T, "an import of %U that may run code "
                                 "(not imported yet)", name);
    }
    /* a constant source: attributes of it are guarded like a global
     * module's */
    int src = tc_source_add(T->out->guards, TC_SRC_CONST, -1, 0, mod);
    tc_var *v = src < 0 ? NULL : tc_var_new(&T->sh->arena, TC_VAR_OBJECT,
                                             src);
    if (v == NULL) {
        Py_DECREF(mod);
        return ERROR;
    }
    v->obj = mod;
    return tc_tr_push(T, v);
}

/* IMPORT_FROM: the attribute of the module on the stack, which stays. */
int
tc_tr_op_import_from(tracer *T, int oparg)
{
    tc_var *mod = tc_tr_peek(T, 1);
    PyObject *name = PyTuple_GetItem(T->co->co_names, oparg);
    if (mod == NULL || name == NULL) {
        PyErr_Clear();
        return tc_tr_unsupported(T, "malformed import");
    }
    int rc = tc_tr_push(T, mod);
    return rc != OK ? rc : tc_tr_op_load_attr(T, name, 0);
}

/* ---- `is` and `in` ---- */

/* Whether v stands for one object whatever the call: singletons, types
 * and dtypes (EQUALS on them is identity), objects the guards pin or that
 * torch's modules hold (OBJECT), and objects read from the frame, pinned
 * here by ID_MATCH.  1, 0, or ERROR. */
static int
fixed_identity(tracer *T, tc_var *v)
{
    PyObject *o = v->obj;
    /* torch.strided, torch.contiguous_format: Python cannot make others
     * (one the frame gave is guarded below) */
    const char *tn = o != NULL ? Py_TYPE(o)->tp_name : "";
    if ((!strcmp(tn, "torch.layout") || !strcmp(tn, "torch.memory_format"))
        && v->source < 0) {
        return 1;
    }
    switch (v->kind) {
    case TC_VAR_CONST:
        return o == Py_None || o == Py_True || o == Py_False
               || o == Py_Ellipsis || o == Py_NotImplemented
               || (PyType_Check(o) && Py_TYPE(o)->tp_richcompare
                                      == PyType_Type.tp_richcompare)
               || tc_dtype_from_torch(o) >= 0
               || tc_tr_is_enum_member(o);  /* identity-guarded, or a
                                                member read off its class */
    case TC_VAR_OBJECT:
        return 1;
    case TC_VAR_UNKNOWN:
    case TC_VAR_NN_MODULE:
        if (v->source < 0) {
            return 0;
        }
        return tc_guard_id(T->out->guards, v->source, o) < 0 ? ERROR : 1;
    default:
        return 0;
    }
}

/* `a is b` of two tensor vars (a != b).  An op eager answers with its
 * own operand (x.contiguous(), x.to(x.dtype), x.add_(1)) gives the
 * operand's var itself, so a var whose node the graph computes (an op's
 * result, a view; a written input counts as that input) is an object of
 * its own: 0.  Two frame tensors: 1 for one source read twice, else not
 * known (the guards do not pin how inputs alias). */
static int
same_tensor(tracer *T, tc_var *a, tc_var *b)
{
    const tc_graph *g = T->out->graph;
    int na = tc_tr_mut_identity(T, a->node);
    int nb = tc_tr_mut_identity(T, b->node);
    if (na < 0 || nb < 0) {
        return tc_tr_unsupported(T, "'is' between two tensors");
    }
    int inputs = g->nodes[na].kind == TC_NODE_INPUT
                 && g->nodes[nb].kind == TC_NODE_INPUT;
    if (na != nb && !inputs) {
        return 0;
    }
    if (na == nb && inputs && a->source >= 0 && a->source == b->source) {
        return 1;
    }
    return tc_tr_unsupported(T, "'is' between two tensors read from the "
                             "frame");
}

/* `a is b`: 1, 0, ERROR, or UNSUPPORTED where the trace cannot know
 * (two tensors: views and aliases are separate objects or not). */
static int
same_object(tracer *T, tc_var *a, tc_var *b)
{
    int rc;
    if (a == b) {
        return 1;
    }
    if ((rc = tc_tr_reify(T, a)) != OK || (rc = tc_tr_reify(T, b)) != OK) {
        return rc;
    }
    if (a->kind == TC_VAR_TENSOR && b->kind == TC_VAR_TENSOR) {
        return same_tensor(T, a, b);
    }
    /* objects of different types are different objects */
    PyObject *ta = a->kind == TC_VAR_NN_MODULE ? (PyObject *)Py_TYPE(a->obj)
                                               : known_type(T, a);
    PyObject *tb = ta == NULL ? NULL
                 : b->kind == TC_VAR_NN_MODULE ? (PyObject *)Py_TYPE(b->obj)
                 : known_type(T, b);
    if (PyErr_Occurred()) {
        return ERROR;
    }
    if (ta != NULL && tb != NULL && ta != tb) {
        return 0;
    }
    /* a list, dict or object the trace built is a new object */
    if (tc_tr_is_new_object(a) || tc_tr_is_new_object(b)) {
        return 0;
    }
    if ((a->kind == TC_VAR_LIST || a->kind == TC_VAR_DICT)
        && a->kind == b->kind && (a->source < 0 || b->source < 0)) {
        return 0;
    }
    int fa = fixed_identity(T, a);
    int fb = fa == 1 ? fixed_identity(T, b) : 0;
    if (fa < 0 || fb < 0) {
        return ERROR;
    }
    if (fa && fb) {
        return a->obj == b->obj;
    }
    return tc_tr_unsupported(T, "'is' between a %s and a %s",
                             tc_var_kind_name(a), tc_var_kind_name(b));
}

/* IS_OP: `a is b` (oparg 0), `a is not b` (1). */
int
tc_tr_op_is(tracer *T, int invert)
{
    tc_var *b = tc_tr_pop(T), *a = tc_tr_pop(T);
    if (a == NULL || b == NULL) {
        return tc_tr_unsupported(T, "malformed stack");
    }
    int r = same_object(T, a, b);
    if (r != 0 && r != 1) {
        return r;
    }
    return push_const(T, PyBool_FromLong(r != invert));
}

/* `item == x` as `in` asks it of a list or tuple item (identity first):
 * 1, 0, ERROR, or UNSUPPORTED. */
static int
contains_item(tracer *T, tc_var *item, tc_var *x)
{
    int rc = tc_tr_reify(T, item);
    if (rc != OK) {
        return rc;
    }
    if (item->kind == TC_VAR_TENSOR || x->kind == TC_VAR_TENSOR) {
        return tc_tr_unsupported(T, "'in' comparing a tensor (Tensor.__eq__ "
                                 "is elementwise)");
    }
    if ((item->kind == TC_VAR_CONST || item->kind == TC_VAR_OBJECT)
        && (x->kind == TC_VAR_CONST || x->kind == TC_VAR_OBJECT)) {
        /* values the guards fix (EQUALS, ID_MATCH) or torch's modules
         * hold; constants may be other objects at run time: equality
         * must decide, as it does unless an object is unequal to itself
         * (nan) */
        PyObject *r = PyObject_RichCompare(item->obj, x->obj, Py_EQ);
        int eq = r ? PyObject_IsTrue(r) : -1;
        Py_XDECREF(r);
        if (eq < 0) {
            return tc_tr_unsupported_from_exception(T, "'in'");
        }
        if (!eq && item->obj == x->obj) {
            return tc_tr_unsupported(T, "'in' of an object unequal to "
                                     "itself");
        }
        return eq;
    }
    rc = tc_tr_identity_equal(T, item, x);
    return rc != NOT_HANDLED ? rc
           : tc_tr_unsupported(T, "'in' comparing a %s with a %s",
                               tc_var_kind_name(x), tc_var_kind_name(item));
}

/* a == b for pinned objects whose equality is identity (functions,
 * classes' plain instances): 1 or 0, NOT_HANDLED for any others, or
 * ERROR.  (torch.autograd.Function.apply asks
 * `cls.setup_context != _SingleLevelFunction.setup_context`.) */
int
tc_tr_identity_equal(tracer *T, tc_var *a, tc_var *b)
{
    if (a->obj == NULL || b->obj == NULL) {
        return NOT_HANDLED;
    }
    richcmpfunc id_eq = PyBaseObject_Type.tp_richcompare;
    if (Py_TYPE(a->obj)->tp_richcompare != id_eq
        || Py_TYPE(b->obj)->tp_richcompare != id_eq) {
        return NOT_HANDLED;
    }
    int fa = fixed_identity(T, a);
    int fb = fa == 1 ? fixed_identity(T, b) : 0;
    if (fa < 0 || fb < 0) {
        return ERROR;
    }
    return fa && fb ? a->obj == b->obj : NOT_HANDLED;
}

#define MAX_GUARDED_SET 256

static int
scalar_set(PyObject *set)
{
    Py_ssize_t pos = 0;
    Py_hash_t hash;
    PyObject *k;
    if (PySet_GET_SIZE(set) > MAX_GUARDED_SET) {
        return 0;
    }
    while (_PySet_NextEntry(set, &pos, &k, &hash)) {
        if (!tc_tr_is_python_scalar(k)) {
            return 0;
        }
    }
    return 1;
}

static PyObject *bound_call(PyObject *fn, PyObject *args);

/* `x in c` of a value x read from the frame (a str, an int: not yet
 * specialized) and a collection of constants c the trace knows (a set it
 * built, a tuple or frozenset constant, a dict's keys): what the code
 * depends on is whether x is among them, so that is guarded, as
 * frozenset(c).__contains__(x) of x's source, not x's value (a
 * ModelOutput.__setattr__ called with each field name is one entry). */
static int
contains_lazy(tracer *T, tc_var *x, tc_var *c, int invert)
{
    if (x->kind != TC_VAR_LAZY || x->source < 0
        || !(PyUnicode_CheckExact(x->obj) || PyLong_CheckExact(x->obj))) {
        return NOT_HANDLED;
    }
    PyObject *items = NULL;
    int rc = OK;
    if (tc_tr_is_set_var(c)) {
        items = real_set(T, c->items[0], &rc);
    }
    else if (c->kind == TC_VAR_DICT) {
        items = Py_NewRef(c->obj);   /* its keys */
    }
    else if (c->kind == TC_VAR_TUPLE) {
        items = tc_tr_const_value(T, c);
    }
    else if (c->kind == TC_VAR_CONST && (PyFrozenSet_CheckExact(c->obj)
                                         || PyTuple_CheckExact(c->obj))) {
        items = Py_NewRef(c->obj);
    }
    if (items == NULL) {
        return rc != OK ? rc : (PyErr_Occurred() ? ERROR : NOT_HANDLED);
    }
    PyObject *fs = PyFrozenSet_New(items);
    Py_DECREF(items);
    PyObject *contains = fs ? PyObject_GetAttrString(fs, "__contains__")
                            : NULL;
    Py_XDECREF(fs);
    PyObject *none = PyTuple_New(0);
    PyObject *f = contains && none ? bound_call(contains, none) : NULL;
    Py_XDECREF(contains);
    Py_XDECREF(none);
    if (f == NULL) {
        /* an unhashable item: as before, on x's value */
        PyErr_Clear();
        return NOT_HANDLED;
    }
    int src = tc_source_add(T->out->guards, TC_SRC_CALL, x->source, 0, f);
    PyObject *r = src >= 0 ? PyObject_CallOneArg(f, x->obj) : NULL;
    if (r == NULL || tc_guard_equals(T->out->guards, src, r) < 0) {
        Py_XDECREF(r);
        return ERROR;
    }
    int found = r == Py_True;
    Py_DECREF(r);
    return push_const(T, PyBool_FromLong(found != invert));
}

/* Whether the class of an object made here defines `name` in Python. */
static int
has_python_slot(tc_var *o, const char *name)
{
    PyObject *n = PyUnicode_FromString(name);
    PyObject *f = n ? _PyType_Lookup(tc_tr_new_object_class(o), n) : NULL;
    Py_XDECREF(n);
    PyErr_Clear();
    return f != NULL && PyFunction_Check(f);
}

/* CONTAINS_OP: `x in c` (oparg 0), `x not in c` (1), for the tuples,
 * lists and dicts the tracer knows item by item, and constants. */
int
tc_tr_op_contains(tracer *T, int invert)
{
    tc_var *c = tc_tr_pop(T), *x = tc_tr_pop(T);
    if (c == NULL || x == NULL) {
        return tc_tr_unsupported(T, "malformed stack");
    }
    int rc, found = 0;
    if ((rc = tc_tr_reify(T, c)) != OK) {
        return rc;
    }
    rc = contains_lazy(T, x, c, invert);
    if (rc != NOT_HANDLED) {
        return rc;
    }
    if ((rc = tc_tr_reify(T, x)) != OK) {
        return rc;
    }
    if ((rc = tc_tr_as_dict(T, c)) != OK && rc != NOT_HANDLED) {
        return rc;
    }
    if (tc_tr_new_object_items(T, c) != NULL && !has_python_slot(c,
                                                                "__contains__")) {
        c = tc_tr_new_object_items(T, c);
    }
    if (c->kind == TC_VAR_UNKNOWN && c->source >= 0
        && (PySet_CheckExact(c->obj) || PyFrozenSet_CheckExact(c->obj))) {
        /* a set of constants read from the frame: guarded by value */
        if (!scalar_set(c->obj)) {
            return tc_tr_unsupported(T, "'in' of a set of %zd items that "
                                     "are not all constants",
                                     PySet_GET_SIZE(c->obj));
        }
        /* a set is mutable: the guard keeps a copy */
        PyObject *copy = PySet_CheckExact(c->obj) ? PySet_New(c->obj)
                                                  : Py_NewRef(c->obj);
        if (copy == NULL
            || tc_guard_equals(T->out->guards, c->source, copy) < 0) {
            Py_XDECREF(copy);
            return ERROR;
        }
        Py_DECREF(copy);
        c->kind = TC_VAR_CONST;
    }
    PyObject *tmpset = NULL;
    if (tc_tr_is_set_var(c)) {
        /* a set this code built: ask the real set of its items */
        if ((tmpset = real_set(T, c->items[0], &rc)) == NULL) {
            return rc;
        }
        c = new_const(T, tmpset);
        if (c == NULL) {
            return ERROR;
        }
    }
    if (c->kind == TC_VAR_DICT || c->kind == TC_VAR_CONST) {
        if (x->kind != TC_VAR_CONST) {
            return tc_tr_unsupported(T, "'in' of a %s in a %s",
                                     tc_var_kind_name(x),
                                     tc_var_kind_name(c));
        }
        /* a dict's keys are constants: ask a dict of them (hash, then
         * identity or equality, as the real one does) */
        PyObject *keys = c->kind == TC_VAR_DICT ? PyDict_New()
                                                : Py_NewRef(c->obj);
        for (int i = 0; keys && c->kind == TC_VAR_DICT && i < c->nitems;
             i++) {
            if (PyDict_SetItem(keys, PyTuple_GET_ITEM(c->obj, i),
                               Py_None) < 0) {
                Py_CLEAR(keys);
            }
        }
        found = keys ? PySequence_Contains(keys, x->obj) : -1;
        Py_XDECREF(keys);
        if (found < 0) {
            return tc_tr_unsupported_from_exception(T, "'in'");
        }
    }
    else if (c->kind == TC_VAR_TUPLE || c->kind == TC_VAR_LIST) {
        for (int i = 0; !found && i < c->nitems; i++) {
            found = contains_item(T, c->items[i], x);
            if (found != 0 && found != 1) {
                return found;
            }
        }
    }
    else {
        /* a class's own __contains__ (a Mapping's, through __getitem__) */
        rc = tc_tr_call_python_dunder(T, c, "__contains__", &x, 1);
        if (rc != OK) {
            return rc == NOT_HANDLED
                ? tc_tr_unsupported(T, "'in' of a %s", tc_var_kind_name(c))
                : rc;
        }
        tc_var *r = tc_tr_pop(T);
        int truth = -1;
        if (r != NULL && const_truth(T, r, &truth) != OK) {
            return ERROR;
        }
        if (truth < 0) {
            return tc_tr_unsupported(T, "'in' of a %s that is not a bool",
                                     tc_var_kind_name(c));
        }
        found = truth;
    }
    return push_const(T, PyBool_FromLong(found != invert));
}

/* The classinfo argument of isinstance: a class or a tuple of them. */
static PyObject *
classinfo_of(tracer *T, tc_var *v)
{
    if (v->kind == TC_VAR_TUPLE) {
        PyObject *t = PyTuple_New(v->nitems);
        for (int i = 0; t && i < v->nitems; i++) {
            PyObject *c = classinfo_of(T, v->items[i]);
            if (c == NULL) {
                Py_CLEAR(t);
                break;
            }
            PyTuple_SET_ITEM(t, i, c);
        }
        return t;
    }
    if ((v->kind != TC_VAR_CONST && v->kind != TC_VAR_OBJECT
         && v->kind != TC_VAR_UNKNOWN) || !PyType_Check(v->obj)) {
        return NULL;
    }
    if (guard_callable(T, v) < 0) {
        return NULL;
    }
    return Py_NewRef(v->obj);
}

static int
call_isinstance(tracer *T, tc_var **args, int nargs)
{
    if (nargs != 2) {
        return NOT_HANDLED;
    }
    PyObject *type = known_type(T, args[0]);
    PyObject *cls = type ? classinfo_of(T, args[1]) : NULL;
    if (cls == NULL) {
        return PyErr_Occurred() ? ERROR : NOT_HANDLED;
    }
    /* constants answer for themselves (__class__ may differ from type) */
    int r = args[0]->kind == TC_VAR_CONST || args[0]->kind == TC_VAR_OBJECT
        ? PyObject_IsInstance(args[0]->obj, cls)
        : PyObject_IsSubclass(type, cls);
    Py_DECREF(cls);
    if (r < 0) {
        return tc_tr_unsupported_from_exception(T, "isinstance");
    }
    return push_const(T, PyBool_FromLong(r));
}

/* len() of a tensor is its first size; of a sequence from the frame, its
 * guarded length (the items need not be read). */
static int
call_len(tracer *T, tc_var **args, int nargs)
{
    tc_var *x = nargs == 1 ? args[0] : NULL;
    Py_ssize_t n = -1;
    int rc = NOT_HANDLED;
    if (x == NULL) {
        return NOT_HANDLED;
    }
    if (tc_tr_is_module_slice(x)) {
        tc_var *items = tc_tr_nn_container_items(T, x, &rc);
        return items ? push_const(T, PyLong_FromLong(items->nitems)) : rc;
    }
    if (x->kind == TC_VAR_TENSOR) {
        const tc_layout *l = &tc_tr_tensor_node(T, x)->layout;
        if (l->ndim == 0) {
            return tc_tr_unsupported(T, "len() of a 0-d tensor");
        }
        return push_const(T, PyLong_FromLongLong(l->sizes[0]));
    }
    if (x->kind == TC_VAR_LAZY
        && (PyTuple_CheckExact(x->obj) || PyList_CheckExact(x->obj))) {
        if (tc_guard_length(T->out->guards, x->source, x->obj) < 0) {
            return ERROR;
        }
        n = PyObject_Length(x->obj);
    }
    else if (tc_tr_is_set_var(x)) {
        n = x->items[0]->nitems;
    }
    else if (x->kind == TC_VAR_TUPLE || x->kind == TC_VAR_LIST
             || (rc = tc_tr_as_dict(T, x)) == OK) {
        n = x->nitems;
    }
    else if (rc != NOT_HANDLED) {
        return rc;
    }
    else if (x->kind != TC_VAR_CONST) {
        /* an object whose class defines __len__ in Python: inlined (len()
         * checks what it returns: an int >= 0, else eager raises) */
        rc = tc_tr_call_python_dunder(T, x, "__len__", NULL, 0);
        tc_var *r = rc == OK ? tc_tr_peek(T, 1) : NULL;
        if (r != NULL && (rc = tc_tr_reify(T, r)) != OK) {
            return rc;
        }
        if (r != NULL && (r->kind != TC_VAR_CONST || !PyLong_Check(r->obj)
                          || _PyLong_Sign(r->obj) < 0)) {
            return tc_tr_unsupported(T, "len() of a %s: __len__ returned "
                                     "no constant int >= 0",
                                     Py_TYPE(x->obj)->tp_name);
        }
        return rc;
    }
    else {
        return NOT_HANDLED;  /* constants fold with the other builtins */
    }
    return push_const(T, PyLong_FromSsize_t(n));
}

static PyObject *
const_str(tracer *T, tc_var *v)
{
    if (tc_tr_reify(T, v) != OK) {
        PyErr_Clear();
        return NULL;
    }
    return v->kind == TC_VAR_CONST && PyUnicode_CheckExact(v->obj) ? v->obj
                                                                   : NULL;
}

static int is_user_object(PyObject *obj);
static int push_method_result(tracer *T, PyObject *r, PyObject *name);

/* Guard source callables f(obj) = fn(obj, *args) (hasattr(obj, name),
 * dict.get(obj, key)): self = (fn, args); one per (fn, args) for the
 * process, since sources are interned by the callable's identity.
 * Borrowed, or NULL with an exception. */
static PyObject *
bound_call_fn(PyObject *self, PyObject *obj)
{
    PyObject *fn = PyTuple_GET_ITEM(self, 0), *args = PyTuple_GET_ITEM(self, 1);
    if (fn == K.hasattr && PyTuple_GET_SIZE(args) == 1) {
        /* (modules: without nn.Module's AttributeError for absent names) */
        int r = tc_nn_hasattr(obj, PyTuple_GET_ITEM(args, 0));
        return r < 0 ? NULL : Py_NewRef(r ? Py_True : Py_False);
    }
    PyObject *argv[8];
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    argv[0] = obj;
    for (Py_ssize_t i = 0; i < n && i < 7; i++) {
        argv[i + 1] = PyTuple_GET_ITEM(args, i);
    }
    return PyObject_Vectorcall(fn, argv, n + 1, NULL);
}

static PyMethodDef bound_call_def = {"call", bound_call_fn, METH_O, NULL};

static PyObject *
bound_call(PyObject *fn, PyObject *args)
{
    static PyObject *cache;
    if (cache == NULL && (cache = PyDict_New()) == NULL) {
        return NULL;
    }
    if (PyTuple_GET_SIZE(args) > 7) {
        PyErr_SetString(PyExc_ValueError, "tcjit: too many arguments");
        return NULL;
    }
    PyObject *key = PyTuple_Pack(2, fn, args);
    PyObject *f = key ? PyDict_GetItemWithError(cache, key) : NULL;
    if (f != NULL || key == NULL || PyErr_Occurred()) {
        Py_XDECREF(key);
        return f;
    }
    f = PyCFunction_New(&bound_call_def, key);
    if (f == NULL || PyDict_SetItem(cache, key, f) < 0) {
        Py_XDECREF(f);
        Py_DECREF(key);
        return NULL;
    }
    Py_DECREF(key);
    Py_DECREF(f);
    return f;
}

static PyObject *
has_attr_callable(PyObject *name)
{
    PyObject *args = PyTuple_Pack(1, name);
    PyObject *f = args ? bound_call(K.hasattr, args) : NULL;
    Py_XDECREF(args);
    return f;
}

/* descr(obj, *args) of a read-only method of a builtin container class
 * (dict.get, dict.__getitem__, __contains__, __len__) on an object read
 * from the frame (a dict subclass a library keeps, reached by super()):
 * the result is a source of its own, f(obj) = descr(obj, *args) with the
 * arguments constants.  NOT_HANDLED if that does not apply. */
static int
call_read_only_method(tracer *T, PyObject *descr, tc_var **args, int nargs,
                      PyObject *kwnames)
{
    static const char *const read_only[] = {"get", "__getitem__",
                                            "__contains__", "__len__", NULL};
    if (!(Py_IS_TYPE(descr, &PyMethodDescr_Type)
          || Py_IS_TYPE(descr, &PyWrapperDescr_Type))
        || kwnames != NULL || nargs < 1 || nargs > 4
        || args[0]->kind != TC_VAR_UNKNOWN || args[0]->source < 0) {
        return NOT_HANDLED;
    }
    PyTypeObject *owner = PyDescr_TYPE(descr);
    const char *name = PyUnicode_AsUTF8(PyDescr_NAME(descr));
    int ok = 0;
    for (int i = 0; name && read_only[i]; i++) {
        ok |= strcmp(read_only[i], name) == 0;
    }
    if (!ok || (owner != &PyDict_Type && owner != &PyList_Type
                && owner != &PyTuple_Type)
        || !PyObject_TypeCheck(args[0]->obj, owner)) {
        return NOT_HANDLED;
    }
    int rc = tc_tr_reify_all(T, args + 1, nargs - 1);
    if (rc != OK) {
        return rc;
    }
    if (!tc_tr_all_const(args + 1, nargs - 1)) {
        return NOT_HANDLED;
    }
    PyObject *rest = PyTuple_New(nargs - 1);
    for (int i = 1; rest && i < nargs; i++) {
        PyTuple_SET_ITEM(rest, i - 1, Py_NewRef(args[i]->obj));
    }
    PyObject *f = rest ? bound_call(descr, rest) : NULL;
    Py_XDECREF(rest);
    int src = f ? tc_source_add(T->out->guards, TC_SRC_CALL, args[0]->source,
                                0, f) : -1;
    if (src < 0 || tc_guard_type(T->out->guards, args[0]->source,
                                 args[0]->obj) < 0) {
        return ERROR;
    }
    PyObject *r = PyObject_CallOneArg(f, args[0]->obj);
    if (r == NULL) {
        return tc_tr_unsupported_from_exception(T, name);
    }
    tc_var *v = tc_tr_wrap_value(T, r, src, &rc);
    Py_DECREF(r);
    return v == NULL ? rc : tc_tr_push(T, v);
}

/* Whether x (a var the trace knows by type, or read from the frame) has
 * attribute name: 1, 0, ERROR, or UNSUPPORTED.  What the type holds
 * (methods, class attributes) is fixed by the type's guard; an instance
 * attribute of an object read from the frame is guarded on its presence
 * (hasattr(x, name) as a source of its own), so a config without
 * `is_causal` and one with it get entries of their own. */
static int
has_attr(tracer *T, tc_var *x, PyObject *name)
{
    if (tc_tr_reify(T, x) != OK) {
        return ERROR;
    }
    if (x->kind == TC_VAR_CONST || x->kind == TC_VAR_OBJECT) {
        PyObject *a = PyObject_GetAttr(x->obj, name);
        if (a == NULL && !PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return tc_tr_unsupported_from_exception(T, "hasattr");
        }
        PyErr_Clear();
        Py_XDECREF(a);
        return a != NULL;
    }
    if (tc_tr_is_new_object(x)) {
        int has = tc_tr_new_object_has_attr(x, name);
        if (has >= 0) {
            return has;
        }
        /* its class's __getattribute__, traced: an AttributeError is no;
         * refused, what it did is undone (Python runs hasattr again) */
        int undo = T->sh->nundo, fx = T->sh->nfx, mark[2];
        tc_tr_mut_mark(T, mark);
        T->sh->catching++;
        int rc = tc_tr_new_object_attr(T, x, name, 0);
        T->sh->catching--;
        rc = tc_tr_caught_attribute_error(T, rc);
        if (rc != 0 && rc != 1 && rc != RAISED) {
            tc_tr_undo_to(T->sh, undo);
            T->sh->nfx = fx;
            tc_tr_mut_rollback(T, mark);
        }
        return rc;
    }
    PyObject *type = x->kind == TC_VAR_TENSOR || x->kind == TC_VAR_NN_MODULE
                     || (x->kind == TC_VAR_UNKNOWN && x->source >= 0)
                     ? known_type(T, x) : NULL;
    if (type == NULL) {
        return PyErr_Occurred() ? ERROR
             : tc_tr_unsupported(T, "hasattr() of a %s",
                                 tc_var_kind_name(x));
    }
    if (_PyType_Lookup((PyTypeObject *)type, name) != NULL) {
        return 1;
    }
    if (x->source < 0) {
        /* a tensor the graph computes has no instance attributes */
        return x->kind == TC_VAR_TENSOR ? 0
             : tc_tr_unsupported(T, "hasattr() of a %s",
                                 tc_var_kind_name(x));
    }
    /* (a class's own __getattr__, a config's attribute_map, runs again
     * in the guard, as attribute reads of such objects do) */
    int known = x->kind == TC_VAR_TENSOR || x->kind == TC_VAR_NN_MODULE
                || is_user_object(x->obj)
                || PyFunction_Check(x->obj) || PyType_Check(x->obj);
    if (!known || x->obj == NULL) {
        return tc_tr_unsupported(T, "hasattr(%s, %R) (an instance attribute)",
                                 ((PyTypeObject *)type)->tp_name, name);
    }
    if (tc_tr_pending_attr(T, x, name) != NULL) {
        return 1;
    }
    PyObject *f = has_attr_callable(name);
    int src = f ? tc_source_add(T->out->guards, TC_SRC_CALL, x->source, 0, f)
                : -1;
    PyObject *r = src >= 0 ? PyObject_CallOneArg(f, x->obj) : NULL;
    if (r == NULL || tc_guard_equals(T->out->guards, src, r) < 0) {
        Py_XDECREF(r);
        return ERROR;
    }
    Py_DECREF(r);
    return r == Py_True;
}

/* getattr(x, "name") is the attribute load x.name; with a default, the
 * default where x has no such attribute (has_attr guards which). */
static int
call_getattr(tracer *T, tc_var **args, int nargs)
{
    PyObject *name = nargs >= 2 && nargs <= 3 ? const_str(T, args[1]) : NULL;
    if (name == NULL) {
        return NOT_HANDLED;
    }
    if (nargs == 3) {
        int has = has_attr(T, args[0], name);
        if (has != 0 && has != 1) {
            return has;
        }
        if (!has) {
            return tc_tr_push(T, args[2]);
        }
    }
    if (tc_tr_push(T, args[0]) != OK) {
        return UNSUPPORTED;
    }
    return tc_tr_op_load_attr(T, name, 0);
}

/* setattr(o, "name", v) and delattr(o, "name"): STORE_ATTR and
 * DELETE_ATTR, None pushed. */
static int
call_setattr(tracer *T, int set, tc_var **args, int nargs)
{
    PyObject *name = nargs == 2 + set ? const_str(T, args[1]) : NULL;
    if (name == NULL) {
        return PyErr_Occurred() ? ERROR : NOT_HANDLED;
    }
    int rc = set ? tc_tr_push(T, args[2]) : OK;
    if (rc == OK && set) {
        rc = tc_tr_push(T, args[0]);
    }
    rc = rc != OK ? rc : set ? tc_tr_op_store_attr(T, name)
                             : tc_tr_op_delete_attr(T, args[0], name);
    return rc == OK ? push_const(T, Py_NewRef(Py_None)) : rc;
}

/* hasattr(x, "name") (has_attr). */
static int
call_hasattr(tracer *T, tc_var **args, int nargs)
{
    PyObject *name = nargs == 2 ? const_str(T, args[1]) : NULL;
    if (name == NULL) {
        return PyErr_Occurred() ? ERROR : NOT_HANDLED;
    }
    int has = has_attr(T, args[0], name);
    if (has != 0 && has != 1) {
        return has;
    }
    return push_const(T, PyBool_FromLong(has));
}

static int
call_range(tracer *T, tc_var **args, int nargs)
{
    if (nargs < 1 || nargs > 3) {
        return NOT_HANDLED;
    }
    PyObject *t = PyTuple_New(nargs);
    for (int i = 0; t && i < nargs; i++) {
        if (tc_tr_reify(T, args[i]) != OK) {
            Py_CLEAR(t);
            break;
        }
        if (args[i]->kind != TC_VAR_CONST) {
            Py_DECREF(t);
            return tc_tr_unsupported(T, "range() of a %s",
                                     tc_var_kind_name(args[i]));
        }
        PyTuple_SET_ITEM(t, i, Py_NewRef(args[i]->obj));
    }
    if (t == NULL) {
        return ERROR;
    }
    PyObject *r = PyObject_Call(K.range, t, NULL);
    Py_DECREF(t);
    return tc_tr_push_folded(T, r, "range");
}

/* ---- torch's global state and __torch_function__ ---- */

/* A query of torch's global state (no arguments, no side effects) that
 * traced code cannot change: its value now, guarded as `fn() == value`
 * (a TC_SRC_CALL source).  NULL with *rc set if the value is not one the
 * trace can take as a constant. */
static PyObject *
guarded_state(tracer *T, PyObject *fn, int *rc)
{
    PyObject *r = PyObject_CallNoArgs(fn);
    int src = r ? tc_source_add(T->out->guards, TC_SRC_CALL, -1, 0, fn) : -1;
    if (src < 0 || tc_guard_equals(T->out->guards, src, r) < 0) {
        Py_XDECREF(r);
        *rc = ERROR;
        return NULL;
    }
    *rc = OK;
    return r;
}

static int
is_state_query(PyObject *fn)
{
    return fn == K.torch_function_mode_enabled || fn == K.get_tracing_state
           || fn == K.is_tracing || fn == K.deterministic
           || fn == K.deterministic_warn_only || fn == K.get_default_dtype
           || fn == K.privateuse1_name;
}

/* torch.is_grad_enabled() is the mode the trace is in (a with block of
 * no_grad changes it; GLOBAL_STATE guards the mode at entry); the other
 * queries are guarded on their value. */
static int
call_state_query(tracer *T, PyObject *fn, int nargs)
{
    if (nargs != 0) {
        return NOT_HANDLED;
    }
    if (fn == K.is_grad_enabled) {
        return push_const(T, PyBool_FromLong(T->grad_mode));
    }
    int rc;
    PyObject *r = guarded_state(T, fn, &rc);
    if (r == NULL) {
        return rc;
    }
    if (fn == K.get_tracing_state && r != Py_None) {
        Py_DECREF(r);
        return tc_tr_unsupported(T, "torch.jit.trace is running");
    }
    return push_const(T, r);
}

/* Whether v overrides torch functions as torch's check_has_torch_function
 * decides it: 0 no, 1 yes (or not known), ERROR.  Tensors the tracer
 * holds are torch.Tensor or nn.Parameter exactly (TENSOR_MATCH; a
 * subclass stays opaque), whose __torch_function__ is the default;
 * containers are not looked into, as torch does not; anything else is
 * asked, with its type guarded. */
static int
overrides_torch(tracer *T, tc_var *v)
{
    switch (v->kind) {
    case TC_VAR_TENSOR:
    case TC_VAR_TUPLE:
    case TC_VAR_LIST:
    case TC_VAR_DICT:
    case TC_VAR_METHOD:
    case TC_VAR_CELL:
        return 0;
    case TC_VAR_DEFERRED:
        /* iterators, functions, grad-mode contexts, strings; an
         * attribute read at the exit could be anything */
        return v->node == TC_TMPL_ATTR;
    default:
        break;
    }
    if (v->obj == NULL) {
        return 1;
    }
    PyObject *r = PyObject_CallOneArg(K.has_torch_function_unary, v->obj);
    if (r == NULL) {
        return ERROR;
    }
    int yes = r == Py_True;
    Py_DECREF(r);
    if (!yes && v->source >= 0 && v->kind != TC_VAR_NN_MODULE
        && tc_guard_type(T->out->guards, v->source, v->obj) < 0) {
        return ERROR;
    }
    return yes;
}

/* torch.overrides.has_torch_function(args), _unary(x), _variadic(*args):
 * False when no argument overrides torch functions and no
 * TorchFunctionMode is active, so torch.nn.functional's wrappers inline
 * down to the ops they call.  An argument that does override breaks: its
 * __torch_function__ decides what the call means. */
static int
call_has_torch_function(tracer *T, PyObject *fn, tc_var **args, int nargs)
{
    if (fn == K.has_torch_function) {
        if (nargs != 1) {
            return NOT_HANDLED;
        }
        int rc = tc_tr_reify(T, args[0]);
        if (rc != OK) {
            return rc;
        }
        if (args[0]->kind != TC_VAR_TUPLE && args[0]->kind != TC_VAR_LIST) {
            return tc_tr_unsupported(T, "has_torch_function() of a %s",
                                     tc_var_kind_name(args[0]));
        }
        nargs = args[0]->nitems;
        args = args[0]->items;
    }
    else if (fn == K.has_torch_function_unary && nargs != 1) {
        return NOT_HANDLED;
    }
    int rc;
    PyObject *mode = guarded_state(T, K.torch_function_mode_enabled, &rc);
    if (mode == NULL) {
        return rc;
    }
    Py_DECREF(mode);
    if (mode != Py_False) {
        return tc_tr_unsupported(T, "has_torch_function under a "
                                 "TorchFunctionMode");
    }
    for (int i = 0; i < nargs; i++) {
        int yes = overrides_torch(T, args[i]);
        if (yes != 0) {
            return yes < 0 ? ERROR
                : tc_tr_unsupported(T, "an argument of type %s overrides "
                                    "torch functions (__torch_function__)",
                                    args[i]->obj
                                    ? Py_TYPE(args[i]->obj)->tp_name
                                    : tc_var_kind_name(args[i]));
        }
    }
    return push_const(T, Py_NewRef(Py_False));
}

/* KeyError(key) of a builtin exception class and constants: made where
 * it is raised (tc_tr_op_raise), or by the exit if it escapes. */
static int
make_exception(tracer *T, tc_var *cls, tc_var **args, int nargs)
{
    int rc = tc_tr_reify_all(T, args, nargs);
    if (rc != OK) {
        return rc;
    }
    if (!tc_tr_all_const(args, nargs)) {
        return NOT_HANDLED;
    }
    if (cls->source >= 0
        && tc_guard_id(T->out->guards, cls->source, cls->obj) < 0) {
        return ERROR;
    }
    tc_var *e = tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, nargs, args);
    if (e == NULL) {
        return ERROR;
    }
    e->node = TC_TMPL_CALL;
    e->obj = Py_NewRef(cls->obj);
    return tc_tr_push(T, e);
}

/* The exception instance `raise v` raises: v an exception made as above,
 * one the trace raised and caught (a constant), or a builtin exception
 * class; a new reference, or NULL (UNSUPPORTED / ERROR in *rc). */
static PyObject *
exception_to_raise(tracer *T, tc_var *v, int *rc)
{
    PyObject *argv[TC_MAX_CALL_ARGS];
    *rc = UNSUPPORTED;
    if (v->kind == TC_VAR_CONST && PyExceptionInstance_Check(v->obj)) {
        return Py_NewRef(v->obj);
    }
    int made = v->kind == TC_VAR_DEFERRED && v->node == TC_TMPL_CALL
               && v->obj != NULL && PyExceptionClass_Check(v->obj)
               && v->nitems <= TC_MAX_CALL_ARGS;
    int cls = !made && v->obj != NULL && PyExceptionClass_Check(v->obj)
              && !(((PyTypeObject *)v->obj)->tp_flags & Py_TPFLAGS_HEAPTYPE);
    if (!made && !cls) {
        tc_tr_unsupported(T, "raising a %s", tc_var_kind_name(v));
        return NULL;
    }
    if (cls && v->source >= 0
        && tc_guard_id(T->out->guards, v->source, v->obj) < 0) {
        *rc = ERROR;
        return NULL;
    }
    for (int i = 0; made && i < v->nitems; i++) {
        argv[i] = v->items[i]->obj;
    }
    PyObject *e = PyObject_Vectorcall(v->obj, argv, made ? v->nitems : 0,
                                      NULL);
    *rc = e ? OK : ERROR;
    return e;
}

/* RAISE_VARARGS 1 (raise e) and 2 (raise e from None). */
int
tc_tr_op_raise(tracer *T, int oparg)
{
    tc_var *cause = oparg == 2 ? tc_tr_pop(T) : NULL;
    tc_var *v = oparg >= 1 ? tc_tr_pop(T) : NULL;
    if (v == NULL || (oparg == 2 && (cause == NULL || !tc_tr_is_none(cause)))) {
        return tc_tr_unsupported(T, oparg == 0 ? "a bare raise"
                                 : "raise ... from an exception");
    }
    int rc;
    PyObject *e = exception_to_raise(T, v, &rc);
    if (e == NULL) {
        return rc;
    }
    if (oparg == 2) {
        PyException_SetCause(e, NULL);   /* (and __suppress_context__) */
    }
    return tc_tr_raise(T, e);
}

static int
call_builtin_semantics(tracer *T, tc_var *callable, tc_var **args,
                       int nargs, PyObject *kwnames)
{
    PyObject *fn = callable->obj;
    int rc = NOT_HANDLED;
    if (fn == K.zip && kwnames != NULL) {
        return call_zip_strict(T, args, nargs, kwnames);
    }
    if (fn == (PyObject *)&PyDict_Type) {
        return call_dict_ctor(T, args, nargs, kwnames);
    }
    if (kwnames != NULL) {
        return NOT_HANDLED;
    }
    if (PyExceptionClass_Check(fn)
        && !(((PyTypeObject *)fn)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        return make_exception(T, callable, args, nargs);
    }
    if (is_pure_builtin(fn) && nargs <= 4) {
        /* on constants, before torch's overloads of abs, min, ... */
        int r = tc_tr_reify_all(T, args, nargs);
        if (r != OK) {
            return r;
        }
        if (tc_tr_all_const(args, nargs)) {
            rc = fold_builtin_call(T, fn, args, nargs, kwnames);
        }
    }
    if (rc != NOT_HANDLED) {
        /* folded */
    }
    else if (fn == K.signature && nargs == 1) {
        rc = fold_signature(T, args[0]);
    }
    else if (fn == K.chain) {
        rc = call_chain(T, args, nargs);
    }
    else if (fn == K.iter || fn == K.reversed || fn == K.enumerate
        || fn == K.zip) {
        rc = call_iter_builtin(T, fn, args, nargs);
    }
    else if (fn == K.range) {
        rc = call_range(T, args, nargs);
    }
    else if (fn == (PyObject *)&PyTuple_Type
             || fn == (PyObject *)&PyList_Type
             || fn == (PyObject *)&PySet_Type
             || fn == (PyObject *)&PyFrozenSet_Type) {
        rc = call_seq_ctor(T, fn, args, nargs);
    }
    else if (fn == K.callable && nargs == 1) {
        /* by type: functions the trace made, modules, classes, ... */
        tc_var *x = args[0];
        PyObject *tp = x->kind == TC_VAR_DEFERRED
            && (x->node == TC_TMPL_FUNCTION || tc_tr_is_closure(x))
            ? (PyObject *)&PyFunction_Type : known_type(T, x);
        rc = tp == NULL ? (PyErr_Occurred() ? ERROR : NOT_HANDLED)
           : push_const(T, PyBool_FromLong(
                 ((PyTypeObject *)tp)->tp_call != NULL));
    }
    else if ((fn == K.all || fn == K.any) && nargs == 1) {
        rc = call_all_any(T, fn == K.all, args[0]);
    }
    else if (fn == K.sum && (nargs == 1 || nargs == 2)) {
        rc = call_sum(T, args, nargs);
    }
    else if (fn == K.sorted && nargs == 1) {
        /* of constants: a new list in their order */
        rc = call_seq_ctor(T, (PyObject *)&PyList_Type, args, nargs);
        tc_var *l = rc == OK ? tc_tr_peek(T, 1) : NULL;
        PyObject *c = l ? tc_tr_const_value(T, l) : NULL;
        if (l != NULL && c == NULL) {
            T->sp--;
            rc = PyErr_Occurred() ? ERROR
               : tc_tr_unsupported(T, "sorted() of values that are not "
                                   "constants");
        }
        else if (c != NULL) {
            T->sp--;
            rc = PyList_Sort(c) < 0
                ? tc_tr_unsupported_from_exception(T, "sorted")
                : push_method_result(T, Py_NewRef(c), K.sorted);
            Py_DECREF(c);
        }
    }
    else if (fn == (PyObject *)&PyUnicode_Type && nargs == 1
             && args[0]->obj != NULL && PyType_Check(args[0]->obj)
             && Py_TYPE(args[0]->obj)->tp_repr == PyType_Type.tp_repr) {
        /* str(model.__class__): its name, once its identity is pinned */
        int fixed = fixed_identity(T, args[0]);
        rc = fixed < 0 ? ERROR
           : fixed ? push_const(T, PyObject_Str(args[0]->obj)) : NOT_HANDLED;
    }
    else if (fn == K.len) {
        rc = call_len(T, args, nargs);
    }
    else if (fn == K.isinstance) {
        rc = call_isinstance(T, args, nargs);
    }
    else if (fn == K.getattr) {
        rc = call_getattr(T, args, nargs);
    }
    else if (fn == K.hasattr) {
        rc = call_hasattr(T, args, nargs);
    }
    else if (fn == K.setattr || fn == K.delattr) {
        rc = call_setattr(T, fn == K.setattr, args, nargs);
    }
    else if (fn == K.has_torch_function || fn == K.has_torch_function_unary
             || fn == K.has_torch_function_variadic) {
        rc = call_has_torch_function(T, fn, args, nargs);
    }
    else if (fn == K.is_grad_enabled || is_state_query(fn)) {
        rc = call_state_query(T, fn, nargs);
    }
    else if ((fn == K.is_autocast_enabled || fn == K.is_autocast_cpu_enabled
              || fn == K.is_any_autocast_enabled) && nargs <= 1) {
        /* False: a trace starts only with every autocast off, and
         * GLOBAL_STATE keeps it so (tracer.c); a with torch.autocast block
         * is not entered in a trace */
        rc = push_const(T, Py_NewRef(Py_False));
    }
    else if (fn == K.dispatch_stack_len && fn != NULL && nargs == 0) {
        /* 0: a trace starts only with no TorchDispatchMode (GLOBAL_STATE) */
        rc = push_const(T, PyLong_FromLong(0));
    }
    else if ((fn == K.is_compiling || fn == K.is_dynamo_compiling
              || fn == K.utils_is_compiling) && nargs == 0) {
        /* True in what is compiled, as under Dynamo: libraries take their
         * compile-friendly paths there (what runs eagerly sees False) */
        rc = push_const(T, Py_NewRef(Py_True));
    }
    else if (fn == K.type && nargs == 1) {
        rc = call_type(T, args[0]);
    }
    if (rc != NOT_HANDLED && rc != ERROR && guard_callable(T, callable) < 0) {
        return ERROR;
    }
    return rc;
}

/* ---- plain Python objects, bound methods, functools.partial ---- */

/* An instance of a user class (a transformers config, a dataclass): not
 * a type, module or tensor. */
static int
is_user_object(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    return (tp->tp_flags & Py_TPFLAGS_HEAPTYPE)
           && !PyType_Check(obj) && !PyModule_Check(obj)
           && !PyObject_TypeCheck(obj, (PyTypeObject *)tc_tensor_type);
}

int
tc_tr_object_truth(tracer *T, tc_var *v)
{
    static PyObject *str_bool, *str_len;
    if (str_bool == NULL) {
        str_bool = PyUnicode_InternFromString("__bool__");
        str_len = PyUnicode_InternFromString("__len__");
        if (str_bool == NULL || str_len == NULL) {
            PyErr_Clear();
            return -2;
        }
    }
    int rc = tc_tr_as_dict(T, v);
    if (rc == OK) {
        return v->nitems > 0;   /* keys guarded */
    }
    if (rc != NOT_HANDLED) {
        PyErr_Clear();
        return -2;
    }
    tc_var *items = tc_tr_new_object_items(T, v);
    if (items != NULL) {
        return items->nitems > 0;
    }
    PyTypeObject *tp = tc_tr_new_object_class(v);
    if (tp == NULL && v->kind == TC_VAR_UNKNOWN && v->source >= 0
        && v->obj != NULL && (PyFunction_Check(v->obj)
                              || PyCFunction_Check(v->obj))) {
        /* a function (a validator a table maps to): true, by its type */
        if (tc_guard_type(T->out->guards, v->source, v->obj) < 0) {
            PyErr_Clear();
            return -2;
        }
        return 1;
    }
    if (tp == NULL && v->kind == TC_VAR_UNKNOWN && v->source >= 0
        && is_user_object(v->obj)) {
        if (tc_guard_type(T->out->guards, v->source, v->obj) < 0) {
            PyErr_Clear();
            return -2;
        }
        tp = Py_TYPE(v->obj);
    }
    if (tp == NULL || _PyType_Lookup(tp, str_bool) != NULL
        || _PyType_Lookup(tp, str_len) != NULL) {
        return -2;
    }
    return 1;   /* an object is true unless its class says otherwise */
}

/* obj.name of an object read from the frame: the type guarded, the value
 * read now and a source of its own, whose guards read it again on every
 * call -- through the class's own __getattribute__ / __getattr__ or
 * property where it has one (a config's attribute_map), as Python
 * would. */
int
tc_tr_object_attr(tracer *T, tc_var *owner, PyObject *name, int method)
{
    if (owner->kind == TC_VAR_UNKNOWN && owner->source >= 0
        && PyType_Check(owner->obj)
        && (((PyTypeObject *)owner->obj)->tp_flags & Py_TPFLAGS_HEAPTYPE)
        && Py_TYPE(owner->obj)->tp_getattro == PyType_Type.tp_getattro) {
        /* cls.attr of a user class read from the frame (type(self).forward,
         * a class constant): pinned by identity, the attribute a source of
         * its own */
        if (tc_guard_id(T->out->guards, owner->source, owner->obj) < 0) {
            return ERROR;
        }
        return tc_tr_push_attr(T, owner->source, name,
                               PyObject_GetAttr(owner->obj, name), method,
                               "class attribute");
    }
    if ((owner->kind == TC_VAR_UNKNOWN || owner->kind == TC_VAR_OBJECT)
        && owner->obj != NULL && PyCode_Check(owner->obj) && !method) {
        /* func.__code__.co_varnames: a code object is immutable, so its
         * attributes fold once its identity is pinned */
        if (owner->source >= 0 && owner->kind == TC_VAR_UNKNOWN
            && tc_guard_id(T->out->guards, owner->source, owner->obj) < 0) {
            return ERROR;
        }
        return push_method_result(T, PyObject_GetAttr(owner->obj, name),
                                  name);
    }
    if (owner->kind == TC_VAR_UNKNOWN && owner->source >= 0
        && PyFunction_Check(owner->obj)) {
        /* func.__code__, func.__name__: sources of their own (a function's
         * attributes may be assigned) */
        return tc_tr_push_attr(T, owner->source, name,
                               PyObject_GetAttr(owner->obj, name), method,
                               "function attribute");
    }
    if (owner->kind != TC_VAR_UNKNOWN || owner->source < 0
        || !is_user_object(owner->obj)) {
        return NOT_HANDLED;
    }
    tc_var *set = tc_tr_pending_attr(T, owner, name);
    if (set != NULL) {
        /* written earlier in this segment (made at its exit) */
        return tc_tr_push_loaded_attr(T, set, method);
    }
    PyTypeObject *tp = Py_TYPE(owner->obj);
    PyObject *descr = _PyType_Lookup(tp, name);
    if (descr != NULL && PyFunction_Check(descr) && method) {
        return NOT_HANDLED;  /* a method: inlined at the call */
    }
    if (tc_guard_type(T->out->guards, owner->source, owner->obj) < 0) {
        return ERROR;
    }
    return tc_tr_push_attr(T, owner->source, name,
                           PyObject_GetAttr(owner->obj, name), method,
                           "attribute");
}

/* Inline `func(self, *args)`, func read from source fsrc. */
static int
inline_method(tracer *T, PyObject *func, int fsrc, tc_var *self,
              tc_var **args, int nargs, PyObject *kwnames)
{
    tc_var *all[TC_MAX_CALL_ARGS];
    if (nargs + 1 > TC_MAX_CALL_ARGS) {
        return tc_tr_unsupported(T, "call with %d arguments", nargs);
    }
    tc_var *f = tc_var_new(&T->sh->arena, TC_VAR_UNKNOWN, fsrc);
    if (f == NULL) {
        return ERROR;
    }
    f->obj = Py_NewRef(func);
    all[0] = self;
    memcpy(all + 1, args, nargs * sizeof(tc_var *));
    return tc_tr_inline_call(T, f, all, nargs + 1, kwnames);
}

/* Whether obj's type has no mutating methods and its methods run no
 * user code: str, bytes, numbers, tuples (torch.Size), frozensets. */
static int
is_immutable_value(PyObject *obj)
{
    return PyUnicode_CheckExact(obj) || PyBytes_CheckExact(obj)
           || PyLong_CheckExact(obj) || PyFloat_CheckExact(obj)
           || PyBool_Check(obj) || PyComplex_CheckExact(obj)
           || PyFrozenSet_CheckExact(obj) || PyRange_Check(obj)
           || PySlice_Check(obj) || obj == Py_None
           || (PyTuple_Check(obj) && !(Py_TYPE(obj)->tp_flags
                                       & Py_TPFLAGS_HEAPTYPE))
           || (PyTuple_Check(obj)
               && strcmp(Py_TYPE(obj)->tp_name, "torch.Size") == 0);
}

/* A var of r, a method's result on constants: constants, and a list as a
 * list var of them (each call gets a new list). */
static int
push_method_result(tracer *T, PyObject *r, PyObject *name)
{
    if (r == NULL) {
        return tc_tr_unsupported_from_exception(T, "method");
    }
    if (PyList_CheckExact(r) && PyList_GET_SIZE(r) <= 128) {
        tc_var *items[128];
        int n = (int)PyList_GET_SIZE(r);
        for (int i = 0; i < n; i++) {
            items[i] = tc_tr_const_var(T, PyList_GET_ITEM(r, i));
            if (items[i] == NULL) {
                Py_DECREF(r);
                return ERROR;
            }
        }
        Py_DECREF(r);
        tc_var *v = tc_var_seq(&T->sh->arena, TC_VAR_LIST, n, items);
        if (v != NULL) {
            v->index = T->serial;
        }
        return tc_tr_push(T, v);
    }
    if (!is_immutable_value(r)) {
        int rc = tc_tr_unsupported(T, "%U() returned a %s", name,
                                   Py_TYPE(r)->tp_name);
        Py_DECREF(r);
        return rc;
    }
    return push_const(T, r);
}

/* s.startswith(p), shape.index(d), names.count(x), xs.copy(): methods that
 * do not mutate their object, of a value the trace knows completely (a
 * str, a tuple or torch.Size, a list or tuple of constants), folded by
 * calling them now (a list's on a copy). */
static int
call_const_method(tracer *T, tc_var *self, PyObject *name, tc_var **args,
                  int nargs, PyObject *kwnames)
{
    int seq = self->kind == TC_VAR_LIST || self->kind == TC_VAR_TUPLE;
    if (seq && PyUnicode_CompareWithASCIIString(name, "index")
        && PyUnicode_CompareWithASCIIString(name, "count")) {
        return NOT_HANDLED;   /* a list's other methods may mutate it */
    }
    int rc = tc_tr_reify(T, self);
    if (rc != OK || (rc = tc_tr_reify_all(T, args, nargs)) != OK) {
        return rc;
    }
    if (!seq && (self->kind != TC_VAR_CONST
                 || !is_immutable_value(self->obj))) {
        return NOT_HANDLED;
    }
    if (!tc_tr_all_const(args, nargs) || nargs > 8) {
        return NOT_HANDLED;
    }
    PyObject *obj = tc_tr_const_value(T, self);
    if (obj == NULL) {
        return PyErr_Occurred() ? ERROR : NOT_HANDLED;
    }
    PyObject *argv[9];
    argv[0] = obj;
    for (int i = 0; i < nargs; i++) {
        argv[i + 1] = args[i]->obj;
    }
    if (kwnames != NULL) {
        nargs -= (int)PyTuple_GET_SIZE(kwnames);
    }
    PyObject *r = PyObject_VectorcallMethod(name, argv,
                                            (nargs + 1)
                                            | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                            kwnames);
    Py_DECREF(obj);
    return push_method_result(T, r, name);
}

/* obj.method(...) on a plain object: type(obj).method inlined with
 * self = obj.  The guard is on obj.method.__func__, the function Python
 * itself would call (an instance attribute shadowing it fails it). */
static int
call_method(tracer *T, tc_var *m, tc_var **args, int nargs,
            PyObject *kwnames)
{
    tc_var *self = m->items[0];
    if (tc_tr_is_set_var(self) && kwnames == NULL && nargs == 1
        && PyUnicode_CompareWithASCIIString(m->obj, "add") == 0) {
        int rc = set_add_items(T, self, args, 1);
        return rc == OK ? push_const(T, Py_NewRef(Py_None)) : rc;
    }
    int rc = call_const_method(T, self, m->obj, args, nargs, kwnames);
    if (rc != NOT_HANDLED) {
        return rc;
    }
    if (self->kind == TC_VAR_LIST) {
        return call_list_method(T, self, m->obj, args, nargs, kwnames);
    }
    rc = tc_tr_call_new_object_method(T, self, m->obj, args, nargs, kwnames);
    if (rc != NOT_HANDLED) {
        return rc;
    }
    if (nargs >= 1 && nargs <= 2 && kwnames == NULL
        && PyUnicode_CompareWithASCIIString(m->obj, "get") == 0) {
        tc_var *dflt = nargs == 2 ? args[1] : tc_tr_const_var(T, Py_None);
        rc = dflt ? tc_tr_frame_dict_item(T, self, args[0], dflt) : ERROR;
        if (rc != NOT_HANDLED) {
            return rc;
        }
    }
    rc = tc_tr_as_dict(T, self);
    if (rc == OK) {
        return call_dict_method(T, self, m->obj, args, nargs, kwnames);
    }
    if (rc != NOT_HANDLED) {
        return rc;
    }
    if (self->kind != TC_VAR_UNKNOWN || self->source < 0
        || !is_user_object(self->obj)) {
        return NOT_HANDLED;
    }
    PyObject *bound = PyObject_GetAttr(self->obj, m->obj);
    if (bound == NULL) {
        return tc_tr_unsupported_from_exception(T, "method");
    }
    rc = NOT_HANDLED;
    if (PyMethod_Check(bound) && PyMethod_GET_SELF(bound) == self->obj
        && PyFunction_Check(PyMethod_GET_FUNCTION(bound))) {
        int msrc = tc_source_add(T->out->guards, TC_SRC_ATTR, self->source,
                                 0, m->obj);
        PyObject *fname = PyUnicode_FromString("__func__");
        int fsrc = msrc < 0 || fname == NULL ? -1
            : tc_source_add(T->out->guards, TC_SRC_ATTR, msrc, 0, fname);
        Py_XDECREF(fname);
        rc = fsrc < 0 ? ERROR
           : inline_method(T, PyMethod_GET_FUNCTION(bound), fsrc, self, args,
                           nargs, kwnames);
    }
    Py_DECREF(bound);
    return rc;
}

static int
attr_source(tracer *T, int parent, const char *name)
{
    PyObject *n = PyUnicode_FromString(name);
    int src = n ? tc_source_add(T->out->guards, TC_SRC_ATTR, parent, 0, n)
                : -1;
    Py_XDECREF(n);
    return src;
}

/* A bound method read from the frame (m = obj.method; m(x)). */
static int
call_bound_method(tracer *T, tc_var *callable, tc_var **args, int nargs,
                  PyObject *kwnames)
{
    PyObject *m = callable->obj;
    if (!PyFunction_Check(PyMethod_GET_FUNCTION(m))) {
        return NOT_HANDLED;
    }
    int ssrc = attr_source(T, callable->source, "__self__");
    int fsrc = attr_source(T, callable->source, "__func__");
    int rc;
    tc_var *self = ssrc < 0 || fsrc < 0 ? NULL
        : tc_tr_wrap_value(T, PyMethod_GET_SELF(m), ssrc, &rc);
    if (self == NULL) {
        return ssrc < 0 || fsrc < 0 ? ERROR : rc;
    }
    return inline_method(T, PyMethod_GET_FUNCTION(m), fsrc, self, args,
                         nargs, kwnames);
}

/* functools.partial(func, *pargs, **pkw)(*args, **kw): guarded by
 * identity (its func, args and keywords are read-only), then called as
 * func(*pargs, *args, **{**pkw, **kw}). */
static int
call_partial(tracer *T, tc_var *callable, tc_var **args, int nargs,
             PyObject *kwnames)
{
    PyObject *p = callable->obj;
    PyObject *func = PyObject_GetAttrString(p, "func");
    PyObject *pargs = PyObject_GetAttrString(p, "args");
    PyObject *pkw = PyObject_GetAttrString(p, "keywords");
    tc_var *all[TC_MAX_CALL_ARGS], *f = NULL;
    PyObject *names = NULL, *keys = NULL;
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, n = 0, rc = OK;
    if (!func || !pargs || !pkw || !PyTuple_Check(pargs)
        || !PyDict_Check(pkw)) {
        rc = PyErr_Occurred() ? ERROR : NOT_HANDLED;
        goto done;
    }
    if (PyTuple_GET_SIZE(pargs) + PyDict_GET_SIZE(pkw) + nargs
        > TC_MAX_CALL_ARGS) {
        rc = tc_tr_unsupported(T, "a partial with too many arguments");
        goto done;
    }
    if (tc_guard_id(T->out->guards, callable->source, p) < 0) {
        rc = ERROR;
        goto done;
    }
    int fsrc = attr_source(T, callable->source, "func");
    int asrc = attr_source(T, callable->source, "args");
    int ksrc = attr_source(T, callable->source, "keywords");
    if (fsrc < 0 || asrc < 0 || ksrc < 0
        || (f = tc_tr_wrap_value(T, func, fsrc, &rc)) == NULL) {
        rc = rc != OK ? rc : ERROR;
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pargs); i++) {
        int src = tc_source_add(T->out->guards, TC_SRC_ITEM, asrc, i, NULL);
        all[n] = src < 0 ? NULL
               : tc_tr_wrap_value(T, PyTuple_GET_ITEM(pargs, i), src, &rc);
        if (all[n++] == NULL) {
            rc = rc != OK ? rc : ERROR;
            goto done;
        }
    }
    for (int i = 0; i < nargs - nkw; i++) {
        all[n++] = args[i];
    }
    /* keywords: the partial's, unless the call gives them too */
    names = PyList_New(0);
    if (names == NULL) {
        rc = ERROR;
        goto done;
    }
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(pkw, &pos, &k, &v)) {
        int overridden = 0;
        for (int i = 0; i < nkw; i++) {
            overridden |= PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, i),
                                            k) == 0;
        }
        if (overridden) {
            continue;
        }
        int src = tc_source_add(T->out->guards, TC_SRC_DICT_ITEM, ksrc, 0, k);
        all[n] = src < 0 ? NULL : tc_tr_wrap_value(T, v, src, &rc);
        if (all[n++] == NULL || PyList_Append(names, k) < 0) {
            rc = rc != OK ? rc : ERROR;
            goto done;
        }
    }
    for (int i = 0; i < nkw; i++) {
        all[n++] = args[nargs - nkw + i];
        if (PyList_Append(names, PyTuple_GET_ITEM(kwnames, i)) < 0) {
            rc = ERROR;
            goto done;
        }
    }
    keys = PyList_AsTuple(names);
    /* an arena var keeps the keyword names alive for the trace */
    if (keys == NULL || tc_var_const(&T->sh->arena, keys, -1) == NULL) {
        rc = ERROR;
        goto done;
    }
    if (n > 16) {
        rc = tc_tr_unsupported(T, "call with %d arguments", n);
        goto done;
    }
    rc = tc_tr_call_with_args(T, f, all, n,
                        PyTuple_GET_SIZE(keys) ? keys : NULL);
done:
    Py_XDECREF(func);
    Py_XDECREF(pargs);
    Py_XDECREF(pkw);
    Py_XDECREF(names);
    Py_XDECREF(keys);
    return rc;
}

/* super(), Cls(...) of a plain class, and builtin slots (object.__setattr__,
 * dict.keys) called on an object the traced code made (objects.c). */
static int
call_object_semantics(tracer *T, tc_var *callable, tc_var **args, int nargs,
                      PyObject *kwnames)
{
    PyObject *fn = callable->obj;
    int rc;
    if (fn == K.super && kwnames == NULL) {
        rc = tc_tr_call_super(T, args, nargs);
        return rc == OK && guard_callable(T, callable) < 0 ? ERROR : rc;
    }
    if (PyType_Check(fn)) {
        return tc_tr_call_class(T, callable, args, nargs, kwnames);
    }
    rc = tc_tr_call_slot(T, fn, args, nargs, kwnames);
    if (rc != NOT_HANDLED) {
        return rc;
    }
    rc = call_read_only_method(T, fn, args, nargs, kwnames);
    if (rc != NOT_HANDLED) {
        return rc;
    }
    tc_var *d = nargs >= 1 && Py_IS_TYPE(fn, &PyMethodDescr_Type)
                ? tc_tr_new_object_items(T, args[0]) : NULL;
    if (d != NULL) {
        /* OrderedDict.keys(self), dict.get(self, k): on its items
         * (read-only: a mutating method refuses the view) */
        return call_dict_method(T, d, PyDescr_NAME(fn), args + 1, nargs - 1,
                                kwnames);
    }
    return NOT_HANDLED;
}

/* Calls whose Python meaning the tracer implements itself; NOT_HANDLED
 * lets op_call go on with torch bindings and inlining. */
/* Whether fn, or the function an lru_cache wrapper caches, is marked
 * torch._dynamo.assume_constant_result (`_dynamo_marked_constant`). */
static int
is_marked_constant(PyObject *fn)
{
    static const char *const names[] = {"_dynamo_marked_constant",
                                        "__wrapped__"};
    PyObject *m = PyObject_GetAttrString(fn, names[0]);
    PyObject *inner = m == NULL && !PyFunction_Check(fn)
        ? (PyErr_Clear(), PyObject_GetAttrString(fn, names[1])) : NULL;
    if (inner != NULL) {
        m = PyObject_GetAttrString(inner, names[0]);
        Py_DECREF(inner);
    }
    PyErr_Clear();
    int marked = m == Py_True;
    Py_XDECREF(m);
    return marked;
}

/* A call of a function marked assume_constant_result (transformers'
 * is_torch_available(), install and hardware probes) with constant
 * arguments: called now, its (immutable) result a constant, the function
 * pinned by identity, as Dynamo does. */
static int
call_marked_constant(tracer *T, tc_var *callable, tc_var **args, int nargs,
                     PyObject *kwnames)
{
    PyObject *fn = callable->obj;
    if (fn == NULL || !is_marked_constant(fn)) {
        return NOT_HANDLED;
    }
    int rc = tc_tr_reify_all(T, args, nargs);
    if (rc != OK) {
        return rc;
    }
    if (!tc_tr_all_const(args, nargs) || nargs > TC_MAX_CALL_ARGS) {
        return NOT_HANDLED;
    }
    if (callable->source >= 0
        && tc_guard_id(T->out->guards, callable->source, fn) < 0) {
        return ERROR;
    }
    PyObject *argv[TC_MAX_CALL_ARGS];
    for (int i = 0; i < nargs; i++) {
        argv[i] = args[i]->obj;
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *r = PyObject_Vectorcall(fn, argv, nargs - nkw, kwnames);
    if (r == NULL) {
        return tc_tr_unsupported_from_exception(T, "a constant function");
    }
    if (!is_immutable_value(r)) {
        rc = tc_tr_unsupported(T, "a constant function returned a %s",
                               Py_TYPE(r)->tp_name);
        Py_DECREF(r);
        return rc;
    }
    return push_const(T, r);
}

static int
call_python_semantics(tracer *T, tc_var *callable, tc_var **args,
                      int nargs, PyObject *kwnames)
{
    if (callable->kind == TC_VAR_DEFERRED) {
        if (callable->node == TC_TMPL_ENTER) {
            return call_with_exit(T, callable, nargs);
        }
        if (callable->node == TC_TMPL_FUNCTION || tc_tr_is_closure(callable)) {
            return tc_tr_inline_call(T, callable, args, nargs, kwnames);
        }
        return NOT_HANDLED;
    }
    if (callable->kind == TC_VAR_METHOD) {
        return call_method(T, callable, args, nargs, kwnames);
    }
    if (callable->kind != TC_VAR_OBJECT && callable->kind != TC_VAR_UNKNOWN
        && callable->kind != TC_VAR_CONST) {
        return NOT_HANDLED;
    }
    PyObject *fn = callable->obj;
    int rc = call_set_grad_enabled(T, callable, args, nargs, kwnames);
    if (rc == NOT_HANDLED) {
        rc = call_record_function(T, callable, args, nargs, kwnames);
    }
    if (rc == NOT_HANDLED) {
        rc = call_marked_constant(T, callable, args, nargs, kwnames);
    }
    if (rc == NOT_HANDLED) {
        rc = tc_tr_call_deepcopy(T, fn, args, nargs, kwnames);
    }
    if (rc != NOT_HANDLED) {
        return rc;
    }
    int mode = grad_ctx_mode(T, fn, args, nargs, kwnames);
    if (mode != -1) {
        return mode < 0 ? mode : make_grad_ctx(T, callable, args, nargs,
                                               mode);
    }
    rc = noop_ctx(T, callable, args, nargs, kwnames);
    if (rc != NOT_HANDLED) {
        return rc;
    }
    rc = call_object_semantics(T, callable, args, nargs, kwnames);
    if (rc != NOT_HANDLED) {
        return rc;
    }
    rc = tc_tr_call_autograd_function(T, callable, args, nargs, kwnames);
    if (rc != NOT_HANDLED) {
        return rc;
    }
    if (PyMethod_Check(fn) && is_grad_ctx_object(PyMethod_GET_SELF(fn))) {
        /* __exit__ of a with block entered before this segment: it
         * changes the real grad mode, so Python must run it */
        return tc_tr_unsupported(T, "the end of a with block that an earlier "
                                 "segment entered");
    }
    if (PyMethod_Check(fn) && callable->source >= 0) {
        return call_bound_method(T, callable, args, nargs, kwnames);
    }
    if (Py_TYPE(fn) == (PyTypeObject *)K.partial && callable->source >= 0) {
        return call_partial(T, callable, args, nargs, kwnames);
    }
    return call_builtin_semantics(T, callable, args, nargs, kwnames);
}

/* rc: what a registry entry or an inlining made of a call of fn.  When it
 * refused (UNSUPPORTED, nothing pushed), the call as a generic extern node
 * (externcall.c) instead; if that is refused too, the first reason
 * stands. */
static int
generic_instead(tracer *T, PyObject *fn, tc_var **args, int nargs,
                PyObject *kwnames, int rc, int sp, int nnodes)
{
    if (rc != UNSUPPORTED || T->sp != sp || T->sh->force_eager) {
        return rc;
    }
    /* what the refused attempt built does not run (an RNG op the inlined
     * body reached would draw twice) */
    tc_graph_drop_effects(T->out->graph, nnodes);
    PyObject *why = T->out->reason;
    T->out->reason = NULL;
    rc = tc_tr_call_generic(T, fn, args, nargs, kwnames, 1);
    if (rc == UNSUPPORTED || rc == NOT_HANDLED) {
        Py_XSETREF(T->out->reason, why);
        return UNSUPPORTED;
    }
    Py_XDECREF(why);
    return rc;
}

int
tc_tr_op_call(tracer *T, int argc)
{
    PyObject *kwnames = T->kwnames;
    T->kwnames = NULL;
    if (T->sp < argc + 2) {
        return tc_tr_unsupported(T, "malformed call stack");
    }
    tc_var **argv = &T->stack[T->sp - argc];
    tc_var *x = tc_tr_peek(T, argc + 1), *y = tc_tr_peek(T, argc + 2);
    tc_var *callable = x;
    int nargs = argc;
    if (y->kind != TC_VAR_NULL) {
        callable = y;     /* method call: x is self */
        argv--;
        nargs++;
    }
    tc_var *args[TC_MAX_CALL_ARGS];
    if (nargs > TC_MAX_CALL_ARGS) {
        return tc_tr_unsupported(T, "call with %d arguments", nargs);
    }
    memcpy(args, argv, nargs * sizeof(tc_var *));
    T->sp -= argc + 2;
    int rc = tc_tr_call_out(T, callable, args, nargs, kwnames);
    if (rc != NOT_HANDLED) {
        return rc;
    }
    rc = call_python_semantics(T, callable, args, nargs, kwnames);
    if (rc != NOT_HANDLED) {
        return rc;
    }
    if (callable->kind == TC_VAR_METHOD) {
        tc_var *self = callable->items[0];
        PyObject *descr = self->kind == TC_VAR_TENSOR
            ? _PyType_Lookup((PyTypeObject *)tc_tensor_type, callable->obj)
            : NULL;
        const tc_binding *mb = descr ? tc_binding_find(descr) : NULL;
        if (descr != NULL && nargs < 16) {
            /* a tensor method: its registry entry, else a generic extern */
            tc_var *margs[16];
            margs[0] = self;
            memcpy(margs + 1, args, nargs * sizeof(tc_var *));
            int sp = T->sp, nn = T->out->graph->nnodes;
            rc = mb ? NOT_HANDLED
                    : tc_tr_call_inplace(T, callable->obj, margs, nargs + 1,
                                         kwnames);
            rc = rc != NOT_HANDLED ? rc
               : mb ? generic_instead(T, descr, margs, nargs + 1, kwnames,
                                      tc_tr_call_binding(T, mb, margs,
                                                         nargs + 1, kwnames),
                                      sp, nn)
                    : tc_tr_call_generic(T, descr, margs, nargs + 1, kwnames,
                                         1);
            if (rc != NOT_HANDLED) {
                return rc;
            }
        }
        else if (self->kind == TC_VAR_OBJECT && self->obj != NULL
                 && (PyType_Check(self->obj) || PyModule_Check(self->obj))) {
            /* torch.sort: a function of torch._C._VariableFunctions */
            PyObject *fn = PyObject_GetAttr(self->obj, callable->obj);
            if (fn == NULL) {
                PyErr_Clear();
            }
            rc = fn ? tc_tr_call_torch_inplace(T, fn, args, nargs, kwnames)
                    : NOT_HANDLED;
            rc = fn && rc == NOT_HANDLED
                ? tc_tr_call_generic(T, fn, args, nargs, kwnames, 0) : rc;
            Py_XDECREF(fn);
            if (rc != NOT_HANDLED) {
                return rc;
            }
        }
        return tc_tr_unsupported(T, "call to %s.%U (not a traceable torch op)",
                                 self->kind == TC_VAR_LAZY && self->obj
                               ? Py_TYPE(self->obj)->tp_name
                               : tc_var_kind_name(self), callable->obj);
    }
    if (callable->kind == TC_VAR_NN_MODULE) {
        return tc_tr_call_nn_module(T, callable, args, nargs, kwnames);
    }
    if (callable->kind != TC_VAR_OBJECT && callable->kind != TC_VAR_CONST
        && callable->kind != TC_VAR_UNKNOWN) {
        return tc_tr_unsupported(T, "call of a %s value", tc_var_kind_name(callable));
    }
    PyObject *fn = callable->obj;
    const tc_binding *b = tc_binding_find(fn);
    if (b != NULL) {
        /* arguments the registry entry does not take (div's
         * rounding_mode, addmm's beta): a generic extern node */
        int sp = T->sp, nn = T->out->graph->nnodes;
        rc = tc_tr_call_binding(T, b, args, nargs, kwnames);
        return generic_instead(T, fn, args, nargs, kwnames, rc, sp, nn);
    }
    if (PyFunction_Check(fn)) {
        /* a torch.nn.functional function the tracer cannot inline: a
         * generic extern node */
        int sp = T->sp, nn = T->out->graph->nnodes;
        rc = tc_tr_inline_call(T, callable, args, nargs, kwnames);
        return generic_instead(T, fn, args, nargs, kwnames, rc, sp, nn);
    }
    if (tc_tr_is_build_class(T, fn)) {
        return tc_tr_build_class(T, args, nargs, kwnames);
    }
    if (fn == K.device || fn == K.log_api_usage) {
        /* their meaning is relied on (a value folded, a call dropped) */
        if (guard_callable(T, callable) < 0) {
            return ERROR;
        }
        if (fn == K.log_api_usage && nargs == 1 && kwnames == NULL) {
            /* torchvision's usage logging: nothing eager's results see */
            return push_const(T, Py_NewRef(Py_None));
        }
    }
    rc = fold_builtin_call(T, fn, args, nargs, kwnames);
    if (rc != UNSUPPORTED || T->out->reason != NULL) {
        return rc;
    }
    rc = tc_tr_call_torch_inplace(T, fn, args, nargs, kwnames);
    rc = rc != NOT_HANDLED ? rc
                           : tc_tr_call_generic(T, fn, args, nargs, kwnames, 0);
    if (rc != NOT_HANDLED) {
        return rc;
    }
    PyObject *name = callable_name(fn);
    if (name == NULL) {
        return ERROR;
    }
    rc = tc_tr_unsupported(T, "call to %U (not a traceable torch op)", name);
    Py_DECREF(name);
    return rc;
}
