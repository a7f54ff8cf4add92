/* pyframe.h - the one place that knows CPython's private frame layout.
 *
 * The PEP 523 hook receives a _PyInterpreterFrame, whose definition lives in
 * CPython's internal headers and changes between minor versions.  Rather than
 * include internal headers (which drag in build-core-only pieces), we mirror
 * the two layouts we support, 3.11 and 3.12, and expose small accessors.
 * Everything else in tcjit goes through these functions; no other file may
 * use #if PY_VERSION_HEX for frame details.
 */
#ifndef TCJIT_PYFRAME_H
#define TCJIT_PYFRAME_H

#include <Python.h>
#include <frameobject.h>
#include <opcode.h>
#include <stdbool.h>

#if PY_VERSION_HEX < 0x030b0000 || PY_VERSION_HEX >= 0x030d0000
#error "tcjit supports CPython 3.11 and 3.12"
#endif

#if PY_VERSION_HEX >= 0x030c0000
#define TC_PY312 1
#else
#define TC_PY312 0
#endif

typedef uint16_t tc_codeunit;

/* x[a:b] is one BINARY_SLICE instruction from 3.12 on (container, start,
 * stop on the stack); 3.11 builds a slice and subscripts. */
#ifdef BINARY_SLICE
#define TC_HAVE_BINARY_SLICE 1
#else
#define TC_HAVE_BINARY_SLICE 0
#endif

#if TC_PY312
typedef struct tc_iframe {
    PyCodeObject *f_code;
    struct tc_iframe *previous;
    PyObject *f_funcobj;
    PyObject *f_globals;
    PyObject *f_builtins;
    PyObject *f_locals;
    PyFrameObject *frame_obj;
    tc_codeunit *prev_instr;
    int stacktop;
    uint16_t return_offset;
    char owner;
    PyObject *localsplus[1];
} tc_iframe;
#else
typedef struct tc_iframe {
    PyFunctionObject *f_func;
    PyObject *f_globals;
    PyObject *f_builtins;
    PyObject *f_locals;
    PyCodeObject *f_code;
    PyFrameObject *frame_obj;
    struct tc_iframe *previous;
    tc_codeunit *prev_instr;
    int stacktop;
    bool is_entry;
    char owner;
    PyObject *localsplus[1];
} tc_iframe;
#endif

/* Frame owners (same values in 3.11 and 3.12). */
#define TC_FRAME_OWNED_BY_THREAD 0
#define TC_FRAME_OWNED_BY_GENERATOR 1

typedef PyObject *(*tc_eval_fn)(PyThreadState *, tc_iframe *, int);

/* Exported by CPython but declared with the private frame type. */
PyAPI_FUNC(PyObject *) _PyEval_EvalFrameDefault(PyThreadState *tstate,
                                                struct _PyInterpreterFrame *f,
                                                int exc);

static inline PyObject *
pyframe_eval_default(PyThreadState *ts, tc_iframe *f, int throwflag)
{
    return _PyEval_EvalFrameDefault(ts, (struct _PyInterpreterFrame *)f,
                                    throwflag);
}

static inline PyObject *
pyframe_func(tc_iframe *f)
{
#if TC_PY312
    return f->f_funcobj;
#else
    return (PyObject *)f->f_func;
#endif
}

static inline tc_codeunit *
pyframe_code_start(PyCodeObject *co)
{
    return (tc_codeunit *)co->co_code_adaptive;
}

/* A frame that has not run any instruction yet. */
static inline int
pyframe_is_fresh(tc_iframe *f)
{
    return f->prev_instr == pyframe_code_start(f->f_code) - 1;
}

/* sys.settrace / sys.setprofile / sys.monitoring active for this frame:
 * the frame must run normally so debuggers and profilers keep working. */
static inline int
pyframe_tracing_active(PyThreadState *ts, PyCodeObject *co)
{
#if TC_PY312
    if (ts->c_tracefunc != NULL || ts->c_profilefunc != NULL) {
        return 1;
    }
    /* _co_monitoring stays allocated after a tracer went away (pytest,
     * coverage, a debugger session): only active tools count. */
    _PyCoMonitoringData *mon = co->_co_monitoring;
    if (mon == NULL) {
        return 0;
    }
    for (int i = 0; i < _PY_MONITORING_UNGROUPED_EVENTS; i++) {
        if (mon->active_monitors.tools[i]) {
            return 1;
        }
    }
    return 0;
#else
    (void)co;
    return ts->cframe->use_tracing != 0;
#endif
}

static inline int
pyframe_code_get_extra(PyObject *co, Py_ssize_t idx, void **out)
{
#if TC_PY312
    return PyUnstable_Code_GetExtra(co, idx, out);
#else
    return _PyCode_GetExtra(co, idx, out);
#endif
}

static inline int
pyframe_code_set_extra(PyObject *co, Py_ssize_t idx, void *val)
{
#if TC_PY312
    return PyUnstable_Code_SetExtra(co, idx, val);
#else
    return _PyCode_SetExtra(co, idx, val);
#endif
}

static inline Py_ssize_t
pyframe_request_code_extra_index(freefunc free_fn)
{
#if TC_PY312
    return PyUnstable_Eval_RequestCodeExtraIndex(free_fn);
#else
    return _PyEval_RequestCodeExtraIndex(free_fn);
#endif
}

static inline void
pyframe_set_eval(tc_eval_fn fn)
{
    _PyInterpreterState_SetEvalFrameFunc(
        PyInterpreterState_Get(), (_PyFrameEvalFunction)fn);
}

static inline tc_eval_fn
pyframe_get_eval(void)
{
    return (tc_eval_fn)_PyInterpreterState_GetEvalFrameFunc(
        PyInterpreterState_Get());
}

/* Push a value (steals the reference) on the frame's value stack. */
static inline void
pyframe_push(tc_iframe *f, PyObject *v)
{
    f->localsplus[f->stacktop++] = v;
}

/* Make the frame continue at code unit index `pc` when handed to the default
 * evaluator: CPython resumes at prev_instr + 1 (this is how generators
 * resume).  pc must be the first unit of an instruction (an EXTENDED_ARG
 * prefix included), never a CACHE entry. */
static inline void
pyframe_set_resume(tc_iframe *f, int pc)
{
    f->prev_instr = pyframe_code_start(f->f_code) + pc - 1;
}

/* While the runtime performs an instruction of f itself (a STEP, the
 * bool() of a BRANCH), f is the thread's current frame, executing that
 * instruction, as it is while CPython runs it: zero-argument super() takes
 * __class__ and the first argument from the current frame, and
 * sys._getframe(), locals(), globals(), warnings' stacklevel and f_back
 * of the callee see it.  A frame that has not started has no `previous`
 * yet (the evaluator links it on entry).  Returns the frame to restore. */
static inline tc_iframe *
pyframe_make_current(PyThreadState *ts, tc_iframe *f, int op_pc)
{
    tc_iframe *outer = (tc_iframe *)ts->cframe->current_frame;
    f->prev_instr = pyframe_code_start(f->f_code) + op_pc;
    f->previous = outer;
    ts->cframe->current_frame = (struct _PyInterpreterFrame *)f;
    return outer;
}

static inline void
pyframe_restore_current(PyThreadState *ts, tc_iframe *outer)
{
    ts->cframe->current_frame = (struct _PyInterpreterFrame *)outer;
}

/* co_localspluskinds bits (internal pycore_code.h, same in 3.11/3.12). */
#define TC_CO_FAST_LOCAL 0x20
#define TC_CO_FAST_CELL 0x40
#define TC_CO_FAST_FREE 0x80

/* Run the frame's prologue (MAKE_CELL, COPY_FREE_VARS) ourselves: needed
 * before a fresh frame is resumed anywhere but its return instruction.
 * Returns 0 or -1 with an exception set. */
int pyframe_run_prologue(tc_iframe *f);

/* Hand the frame to CPython with an exception set, as if the instruction
 * at code unit op_pc had raised it: the traceback gets the frame's line
 * and the frame's own try/except blocks see it (generator.throw() uses the
 * same path). */
static inline PyObject *
pyframe_throw_at(PyThreadState *ts, tc_iframe *f, int op_pc)
{
    f->prev_instr = pyframe_code_start(f->f_code) + op_pc;
    return _PyEval_EvalFrameDefault(ts, (struct _PyInterpreterFrame *)f, 1);
}

/* Opcode numbering and the static properties we need, per version. */
#ifndef KW_NAMES
#define KW_NAMES (-2)
#endif
#ifndef PRECALL
#define PRECALL (-3)
#endif
#ifndef LOAD_METHOD
#define LOAD_METHOD (-4)
#endif
#ifndef RETURN_CONST
#define RETURN_CONST (-5)
#endif
#ifndef LOAD_FAST_CHECK
#define LOAD_FAST_CHECK (-6)
#endif
#ifndef CALL_INTRINSIC_1
#define CALL_INTRINSIC_1 (-7)
#endif
#ifndef END_FOR
#define END_FOR (-8)
#endif
#ifndef LOAD_FAST_AND_CLEAR
#define LOAD_FAST_AND_CLEAR (-9)
#endif
#ifndef BINARY_SUBSCR
#define BINARY_SUBSCR (-10)
#endif
#ifndef FORMAT_VALUE
#define FORMAT_VALUE (-12)
#endif
#ifndef PRINT_EXPR
#define PRINT_EXPR (-11)
#endif
#ifndef LIST_TO_TUPLE
#define LIST_TO_TUPLE (-13)
#endif

/* list -> tuple before a call with *args: an opcode on 3.11, an intrinsic
 * (pycore_intrinsics.h INTRINSIC_LIST_TO_TUPLE) on 3.12. */
#define TC_INTRINSIC_LIST_TO_TUPLE 6
#define TC_IS_LIST_TO_TUPLE(opcode, oparg)                                   \
    ((opcode) == LIST_TO_TUPLE                                               \
     || ((opcode) == CALL_INTRINSIC_1 && (oparg) == TC_INTRINSIC_LIST_TO_TUPLE))

/* Where FOR_ITER goes when its iterator is exhausted (it pops the
 * iterator first).  3.12 also skips the END_FOR the jump lands on. */
static inline int
pyframe_for_iter_exit(int oparg, int next_pc)
{
#if TC_PY312
    return next_pc + oparg + 1;
#else
    return next_pc + oparg;
#endif
}

/* LOAD_GLOBAL pushes NULL first when oparg & 1; the name index is oparg >> 1
 * on both versions.  LOAD_ATTR's name is oparg >> 1 on 3.12 (bit 0: method
 * load), oparg on 3.11 (LOAD_METHOD is separate). */
#define TC_LOAD_ATTR_METHOD_FLAG TC_PY312

#if TC_PY312
#define TC_COMPARE_OP_ARG(oparg) ((oparg) >> 4)
#define TC_LOAD_ATTR_NAME(oparg) ((oparg) >> 1)
#define TC_LOAD_ATTR_IS_METHOD(opcode, oparg) ((oparg) & 1)
#else
#define TC_COMPARE_OP_ARG(oparg) (oparg)
#define TC_LOAD_ATTR_NAME(oparg) (oparg)
#define TC_LOAD_ATTR_IS_METHOD(opcode, oparg) ((opcode) == LOAD_METHOD)
#endif

/* Jumps, normalised across versions: 3.11 has FORWARD/BACKWARD variants and
 * JUMP_IF_*_OR_POP; 3.12 has relative-forward POP_JUMP_IF_*. */
typedef enum {
    TC_JUMP_NONE,          /* not a jump */
    TC_JUMP_ALWAYS,
    TC_JUMP_POP_IF_FALSE,
    TC_JUMP_POP_IF_TRUE,
    TC_JUMP_POP_IF_NONE,
    TC_JUMP_POP_IF_NOT_NONE,
    TC_JUMP_IF_FALSE_OR_POP,
    TC_JUMP_IF_TRUE_OR_POP
} tc_jump_kind;

/* next_pc: code unit index after the instruction and its caches. */
static inline tc_jump_kind
pyframe_jump(int opcode, int oparg, int next_pc, int *target)
{
    switch (opcode) {
    case JUMP_FORWARD:
        *target = next_pc + oparg;
        return TC_JUMP_ALWAYS;
    case JUMP_BACKWARD:
    case JUMP_BACKWARD_NO_INTERRUPT:
        *target = next_pc - oparg;
        return TC_JUMP_ALWAYS;
#if TC_PY312
    case POP_JUMP_IF_FALSE:
        *target = next_pc + oparg;
        return TC_JUMP_POP_IF_FALSE;
    case POP_JUMP_IF_TRUE:
        *target = next_pc + oparg;
        return TC_JUMP_POP_IF_TRUE;
    case POP_JUMP_IF_NONE:
        *target = next_pc + oparg;
        return TC_JUMP_POP_IF_NONE;
    case POP_JUMP_IF_NOT_NONE:
        *target = next_pc + oparg;
        return TC_JUMP_POP_IF_NOT_NONE;
#else
    case POP_JUMP_FORWARD_IF_FALSE:
    case POP_JUMP_BACKWARD_IF_FALSE:
        *target = next_pc + (opcode == POP_JUMP_FORWARD_IF_FALSE ? oparg
                                                                 : -oparg);
        return TC_JUMP_POP_IF_FALSE;
    case POP_JUMP_FORWARD_IF_TRUE:
    case POP_JUMP_BACKWARD_IF_TRUE:
        *target = next_pc + (opcode == POP_JUMP_FORWARD_IF_TRUE ? oparg
                                                                : -oparg);
        return TC_JUMP_POP_IF_TRUE;
    case POP_JUMP_FORWARD_IF_NONE:
    case POP_JUMP_BACKWARD_IF_NONE:
        *target = next_pc + (opcode == POP_JUMP_FORWARD_IF_NONE ? oparg
                                                                : -oparg);
        return TC_JUMP_POP_IF_NONE;
    case POP_JUMP_FORWARD_IF_NOT_NONE:
    case POP_JUMP_BACKWARD_IF_NOT_NONE:
        *target = next_pc + (opcode == POP_JUMP_FORWARD_IF_NOT_NONE ? oparg
                                                                    : -oparg);
        return TC_JUMP_POP_IF_NOT_NONE;
    case JUMP_IF_FALSE_OR_POP:
        *target = next_pc + oparg;
        return TC_JUMP_IF_FALSE_OR_POP;
    case JUMP_IF_TRUE_OR_POP:
        *target = next_pc + oparg;
        return TC_JUMP_IF_TRUE_OR_POP;
#endif
    default:
        return TC_JUMP_NONE;
    }
}

/* Number of inline CACHE code units after each opcode; filled at init from
 * the running interpreter's dis module so no table is hard-coded. */
extern unsigned char tc_inline_caches[256];
int pyframe_init_opcode_info(void);

/* MAKE_FUNCTION's operands, by flag bit (oparg & 1 << bit). */
enum {
    TC_FN_DEFAULTS,
    TC_FN_KWDEFAULTS,
    TC_FN_ANNOTATIONS,
    TC_FN_CLOSURE,
    TC_FN_NPARTS
};

/* A function made as MAKE_FUNCTION makes it: parts[TC_FN_*] are borrowed,
 * NULL where the flag is clear.  Annotations are the compiler's flat tuple
 * of (name, value) pairs, which the function keeps as is and turns into a
 * dict when __annotations__ is first read (setting __annotations__ would
 * reject the tuple).  A new reference, or NULL with an exception. */
PyObject *pyframe_make_function(PyObject *code, PyObject *globals,
                                PyObject *const parts[TC_FN_NPARTS]);

/* BINARY_OP's operation for oparg nb (NB_ADD ... NB_INPLACE_RSHIFT) applied
 * to a and b: a new reference, or NULL with an exception. */
PyObject *tc_binary_op(int nb, PyObject *a, PyObject *b);

#endif
