/* pyframe.h - the one place that knows CPython's private frame layout.
 *
 * The PEP 523 hook receives a _PyInterpreterFrame, whose definition lives in
 * CPython's internal headers and changes between minor versions.  Rather than
 * include internal headers (which drag in build-core-only pieces), we mirror
 * the layouts we support, 3.11, 3.12 and 3.13, and expose small accessors.
 * Everything else in tcjit goes through these functions; no other file may
 * use #if PY_VERSION_HEX for frame details.
 */
#ifndef TCJIT_PYFRAME_H
#define TCJIT_PYFRAME_H

#include <Python.h>
#include <frameobject.h>
#include <opcode.h>
#include <stdbool.h>

#if PY_VERSION_HEX < 0x030b0000 || PY_VERSION_HEX >= 0x030e0000
#error "tcjit supports CPython 3.11, 3.12 and 3.13"
#endif
#ifdef Py_GIL_DISABLED
/* The free-threaded build (3.13t) has another object and frame layout and
 * runs frames concurrently: nothing here is made for that. */
#error "tcjit does not support the free-threaded CPython build (3.13t)"
#endif

/* TC_PY312: 3.12 or newer; TC_PY313: 3.13 or newer. */
#if PY_VERSION_HEX >= 0x030c0000
#define TC_PY312 1
#else
#define TC_PY312 0
#endif
#if PY_VERSION_HEX >= 0x030d0000
#define TC_PY313 1
#else
#define TC_PY313 0
#endif

typedef uint16_t tc_codeunit;

#if TC_PY313
/* Still exported, but declared only in the internal headers from 3.13 on. */
PyAPI_FUNC(int) _PySet_NextEntry(PyObject *set, Py_ssize_t *pos,
                                 PyObject **key, Py_hash_t *hash);
#endif

/* x[a:b] is one BINARY_SLICE instruction from 3.12 on (container, start,
 * stop on the stack), x[a:b] = v one STORE_SLICE (v below them); 3.11
 * builds a slice and subscripts. */
#ifdef BINARY_SLICE
#define TC_HAVE_BINARY_SLICE 1
#else
#define TC_HAVE_BINARY_SLICE 0
#endif

#if TC_PY312
/* 3.13: f_code became f_executable (always the code object for the frames
 * the hook sees); prev_instr became instr_ptr, the instruction executing or
 * about to begin. */
typedef struct tc_iframe {
#if TC_PY313
    union {
        PyObject *f_executable;
        PyCodeObject *f_code;
    };
#else
    PyCodeObject *f_code;
#endif
    struct tc_iframe *previous;
    PyObject *f_funcobj;
    PyObject *f_globals;
    PyObject *f_builtins;
    PyObject *f_locals;
    PyFrameObject *frame_obj;
#if TC_PY313
    tc_codeunit *instr_ptr;
#else
    tc_codeunit *prev_instr;
#endif
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

/* Frame owners (same values in 3.11, 3.12 and 3.13). */
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
#if TC_PY313
    return f->instr_ptr == pyframe_code_start(f->f_code);
#else
    return f->prev_instr == pyframe_code_start(f->f_code) - 1;
#endif
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
    /* (3.13 keeps only the local events here: 10 of them, not 15) */
    for (size_t i = 0; i < sizeof(mon->active_monitors.tools); i++) {
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

/* A type's own dict (a new reference): from 3.12 on, the static builtin
 * types (object, dict, ...) keep it in the interpreter, and tp_dict is
 * NULL. */
static inline PyObject *
pyframe_type_dict(PyTypeObject *tp)
{
#if TC_PY312
    return PyType_GetDict(tp);
#else
    return Py_XNewRef(tp->tp_dict);
#endif
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
#if TC_PY313
    f->instr_ptr = pyframe_code_start(f->f_code) + pc;
#else
    f->prev_instr = pyframe_code_start(f->f_code) + pc - 1;
#endif
}

/* The thread's current frame: a field of the thread state from 3.13 on,
 * of its cframe before. */
#if TC_PY313
#define TC_CURRENT_FRAME(ts) ((ts)->current_frame)
#else
#define TC_CURRENT_FRAME(ts) ((ts)->cframe->current_frame)
#endif

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
    tc_iframe *outer = (tc_iframe *)TC_CURRENT_FRAME(ts);
#if TC_PY313
    f->instr_ptr = pyframe_code_start(f->f_code) + op_pc;
#else
    f->prev_instr = pyframe_code_start(f->f_code) + op_pc;
#endif
    f->previous = outer;
    TC_CURRENT_FRAME(ts) = (struct _PyInterpreterFrame *)f;
    return outer;
}

static inline void
pyframe_restore_current(PyThreadState *ts, tc_iframe *outer)
{
    TC_CURRENT_FRAME(ts) = (struct _PyInterpreterFrame *)outer;
}

/* co_localspluskinds bits (internal pycore_code.h, same in 3.11-3.13). */
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
PyObject *pyframe_throw_at(PyThreadState *ts, tc_iframe *f, int op_pc);

/* The exception table entry of co covering code unit pc (3.11-3.13 share
 * its format): the handler's code unit, with *depth, the value stack depth
 * it starts from, and *lasti, whether the offset of the raising
 * instruction is pushed below the exception; -1 if pc is in no try block,
 * with block or cleanup region. */
int pyframe_exception_handler(PyCodeObject *co, int pc, int *depth,
                              int *lasti);

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
/* new in 3.13 */
#ifndef TO_BOOL
#define TO_BOOL (-14)
#endif
#ifndef CALL_KW
#define CALL_KW (-15)
#endif
#ifndef LOAD_FAST_LOAD_FAST
#define LOAD_FAST_LOAD_FAST (-16)
#endif
#ifndef STORE_FAST_STORE_FAST
#define STORE_FAST_STORE_FAST (-17)
#endif
#ifndef STORE_FAST_LOAD_FAST
#define STORE_FAST_LOAD_FAST (-18)
#endif
#ifndef CONVERT_VALUE
#define CONVERT_VALUE (-19)
#endif
#ifndef FORMAT_SIMPLE
#define FORMAT_SIMPLE (-20)
#endif
#ifndef FORMAT_WITH_SPEC
#define FORMAT_WITH_SPEC (-21)
#endif
#ifndef SET_FUNCTION_ATTRIBUTE
#define SET_FUNCTION_ATTRIBUTE (-22)
#endif
/* 3.12+: super().name in one instruction, [super, class, self] on the
 * stack (class and self are what zero-argument super() would find);
 * the name is oparg >> 2, a method load when oparg & 1. */
#ifndef LOAD_SUPER_ATTR
#define LOAD_SUPER_ATTR (-23)
#endif
#define TC_LOAD_SUPER_ATTR_NAME(oparg) ((oparg) >> 2)
#define TC_LOAD_SUPER_ATTR_IS_METHOD(oparg) ((oparg) & 1)

/* list -> tuple before a call with *args: an opcode on 3.11, an intrinsic
 * (pycore_intrinsics.h INTRINSIC_LIST_TO_TUPLE) on 3.12. */
#define TC_INTRINSIC_LIST_TO_TUPLE 6
#define TC_IS_LIST_TO_TUPLE(opcode, oparg)                                   \
    ((opcode) == LIST_TO_TUPLE                                               \
     || ((opcode) == CALL_INTRINSIC_1 && (oparg) == TC_INTRINSIC_LIST_TO_TUPLE))

/* Where FOR_ITER goes when its iterator is exhausted (it pops the
 * iterator first).  3.12 also skips the END_FOR the jump lands on, 3.13
 * the END_FOR and the POP_TOP after it. */
static inline int
pyframe_for_iter_exit(int oparg, int next_pc)
{
#if TC_PY313
    return next_pc + oparg + 2;
#elif TC_PY312
    return next_pc + oparg + 1;
#else
    return next_pc + oparg;
#endif
}

/* 3.13 has no LOAD_CLOSURE: LOAD_FAST of a cell slot pushes the cell. */
#define TC_LOAD_FAST_OF_CELL_IS_CLOSURE TC_PY313

/* Values END_FOR pops: the item and the iterator on 3.12; 3.13 pops the
 * item and has a POP_TOP follow for the iterator. */
#define TC_END_FOR_POPS (TC_PY313 ? 1 : 2)

/* Where a call's NULL goes.  3.11/3.12: [NULL, callable, args] and
 * [method, self, args]; 3.13: [callable, NULL, args] and [method, self,
 * args] (LOAD_GLOBAL and a method LOAD_ATTR push their NULL last).  The
 * tracer keeps the 3.12 order inside one instruction and swaps at the
 * instruction's edges on 3.13. */
#define TC_NULL_AFTER_CALLABLE TC_PY313

/* The callable and self of a call from the two stack entries below its
 * arguments (`lo` deeper): *self is NULL for a plain call. */
static inline void
pyframe_call_target(PyObject *lo, PyObject *hi, PyObject **callable,
                    PyObject **self)
{
#if TC_PY313
    *callable = lo;
    *self = hi;
#else
    *callable = lo != NULL ? lo : hi;
    *self = lo != NULL ? hi : NULL;
#endif
}

/* LOAD_GLOBAL pushes NULL first when oparg & 1; the name index is oparg >> 1
 * on both versions.  LOAD_ATTR's name is oparg >> 1 on 3.12 (bit 0: method
 * load), oparg on 3.11 (LOAD_METHOD is separate). */
#define TC_LOAD_ATTR_METHOD_FLAG TC_PY312

/* COMPARE_OP: 3.13 keeps the comparison in oparg >> 5 and sets bit 4 when
 * the result feeds a jump (the result is then made a bool). */
#if TC_PY313
#define TC_COMPARE_OP_ARG(oparg) ((oparg) >> 5)
#define TC_COMPARE_OP_TO_BOOL(oparg) ((oparg) & 16)
#else
#define TC_COMPARE_OP_TO_BOOL(oparg) 0
#endif
#if TC_PY313
#define TC_LOAD_ATTR_NAME(oparg) ((oparg) >> 1)
#define TC_LOAD_ATTR_IS_METHOD(opcode, oparg) ((oparg) & 1)
#elif TC_PY312
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

/* Decode the instruction at code unit *pc (an EXTENDED_ARG prefix
 * included): *pc moves past the prefixes to the instruction, and come back
 * *opcode, *oparg and, returned, the pc after the instruction and its
 * caches.  Instructions that 3.13 split up come back as the one 3.12
 * instruction they replace, so the tracer and the runtime know a single
 * form:
 *   CONVERT_VALUE c       -> FORMAT_VALUE c       (str/repr/ascii; the
 *   FORMAT_SIMPLE         -> FORMAT_VALUE 0        result is a str, which
 *   FORMAT_WITH_SPEC      -> FORMAT_VALUE spec     formats as itself)
 *   MAKE_FUNCTION + SET_FUNCTION_ATTRIBUTE f...  -> MAKE_FUNCTION (f | ...)
 *     (the attributes are below the code object in the order
 *     MAKE_FUNCTION's flags had them, as 3.12 pushed them). */
static inline int
pyframe_decode(const tc_codeunit *code, int ncode, int *at, int *opcode,
               int *oparg)
{
    int pc = *at;
    int op = code[pc] & 0xff, arg = code[pc] >> 8;
    while (op == EXTENDED_ARG && pc + 1 < ncode) {
        pc++;
        op = code[pc] & 0xff;
        arg = (arg << 8) | (code[pc] >> 8);
    }
    int next = pc + 1 + tc_inline_caches[op];
#if TC_PY313
    switch (op) {
    case CONVERT_VALUE:
        op = FORMAT_VALUE;
        break;
    case FORMAT_SIMPLE:
        op = FORMAT_VALUE;
        arg = 0;
        break;
    case FORMAT_WITH_SPEC:
        op = FORMAT_VALUE;
        arg = FVS_HAVE_SPEC;
        break;
    case MAKE_FUNCTION:
        while (next < ncode
               && (code[next] & 0xff) == SET_FUNCTION_ATTRIBUTE) {
            arg |= code[next] >> 8;
            next += 1 + tc_inline_caches[SET_FUNCTION_ATTRIBUTE];
        }
        break;
    }
#endif
    *at = pc;
    *opcode = op;
    *oparg = arg;
    return next;
}

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
