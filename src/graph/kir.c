/* kir.c - kernel IR builder and pseudo-source printer.
 *
 * Constants are stored already converted to their dtype (an f32 constant
 * holds the float-rounded value, an int8 constant the wrapped value), so
 * code generators can emit them verbatim and lowerings can compare them.
 */
#include "kir.h"
#include "textbuf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- builder --------------------------------------------------------- */

static int
kop_arity(tc_kop op)
{
    if (op == KOP_CONST || op == KOP_LOAD || op == KOP_ACC ||
        op == KOP_INDEX) {
        return 0;
    }
    if (op == KOP_ACC_UPDATE) {
        return 2;
    }
    if (op == KOP_STORE || op == KOP_CAST || op == KOP_BITCAST ||
        op == KOP_ACC_RESULT ||
        (op >= KOP_NEG && op <= KOP_NOT)) {
        return 1;
    }
    if (op == KOP_WHERE) {
        return 3;
    }
    return 2;
}

static int
kb_reserve(tc_kbuilder *kb)
{
    tc_kernel *k = kb->k;
    if (k->ninsts < kb->cap && k->insts) {
        return 0;
    }
    int cap = kb->cap > k->ninsts ? kb->cap : k->ninsts;
    cap = cap ? cap * 2 : 32;
    tc_kinst *insts = realloc(k->insts, sizeof(tc_kinst) * cap);
    if (!insts) {
        return -1;
    }
    k->insts = insts;
    kb->cap = cap;
    return 0;
}

/* Append an instruction; -1 if an operand it needs is -1 (so failures
 * propagate through nested calls) or on allocation failure. */
int
kb_emit(tc_kbuilder *kb, tc_kop op, tc_dtype dt, int a, int b, int c)
{
    int ops[3] = {a, b, c};
    int n = kop_arity(op);
    for (int i = 0; i < n; i++) {
        if (ops[i] < 0 || ops[i] >= kb->k->ninsts) {
            return -1;
        }
    }
    if (kb_reserve(kb) < 0) {
        return -1;
    }
    tc_kinst *in = &kb->k->insts[kb->k->ninsts];
    memset(in, 0, sizeof(*in));
    in->op = op;
    in->dtype = dt;
    in->a = n > 0 ? a : -1;
    in->b = n > 1 ? b : -1;
    in->c = n > 2 ? c : -1;
    in->arg = -1;
    return kb->k->ninsts++;
}

int
kb_load(tc_kbuilder *kb, int arg, tc_dtype dt)
{
    for (int i = kb->region_start; i < kb->k->ninsts; i++) {
        const tc_kinst *p = &kb->k->insts[i];
        if (p->op == KOP_LOAD && p->arg == arg && p->dtype == dt) {
            return i;
        }
    }
    int v = kb_emit(kb, KOP_LOAD, dt, -1, -1, -1);
    if (v >= 0) {
        kb->k->insts[v].arg = arg;
    }
    return v;
}

int
kb_index(tc_kbuilder *kb, int arg)
{
    for (int i = kb->region_start; i < kb->k->ninsts; i++) {
        const tc_kinst *p = &kb->k->insts[i];
        if (p->op == KOP_INDEX && p->arg == arg) {
            return i;
        }
    }
    int v = kb_emit(kb, KOP_INDEX, TC_I64, -1, -1, -1);
    if (v >= 0) {
        kb->k->insts[v].arg = arg;
    }
    return v;
}

int
kb_store(tc_kbuilder *kb, int arg, int v)
{
    if (v < 0 || v >= kb->k->ninsts) {
        return -1;
    }
    int s = kb_emit(kb, KOP_STORE, kb->k->insts[v].dtype, v, -1, -1);
    if (s >= 0) {
        kb->k->insts[s].arg = arg;
    }
    return s;
}

static int64_t
wrap_int(tc_dtype dt, int64_t v)
{
    switch (dt) {
    case TC_BOOL:
        return v != 0;
    case TC_U8:
        return (uint8_t)v;
    case TC_I8:
        return (int8_t)v;
    case TC_I16:
        return (int16_t)v;
    case TC_I32:
        return (int32_t)v;
    default:
        return v;
    }
}

static int
find_const(const tc_kbuilder *kb, const tc_kinst *want)
{
    for (int i = kb->k->ninsts - 1; i >= kb->region_start; i--) {
        const tc_kinst *p = &kb->k->insts[i];
        if (p->op == KOP_CONST && p->dtype == want->dtype &&
            memcmp(&p->imm, &want->imm, sizeof(p->imm)) == 0) {
            return i;
        }
    }
    return -1;
}

static int
emit_const(tc_kbuilder *kb, const tc_kinst *c)
{
    int v = find_const(kb, c);
    if (v >= 0) {
        return v;
    }
    v = kb_emit(kb, KOP_CONST, c->dtype, -1, -1, -1);
    if (v >= 0) {
        kb->k->insts[v].imm = c->imm;
    }
    return v;
}

int
kb_const_f(tc_kbuilder *kb, tc_dtype dt, double v)
{
    tc_kinst c;
    memset(&c, 0, sizeof(c));
    c.op = KOP_CONST;
    c.dtype = dt;
    if (tc_dtype_is_reduced_float(dt)) {
        return -1; /* no arithmetic in these dtypes: see kb_cast */
    } else if (dt == TC_F32) {
        c.imm.f = (double)(float)v;
    } else if (dt == TC_F64) {
        c.imm.f = v;
    } else if (dt == TC_BOOL) {
        c.imm.i = v != 0;
    } else if (fabs(v) < (dt == TC_I64 ? 0x1p63 : 0x1p31)) {
        /* smaller ints go through int32 and wrap, as eager's do */
        c.imm.i = wrap_int(dt, (int64_t)v);
    } else {
        /* NaN or out of range: C leaves it undefined, and eager's answer
         * differs by device (x86 gives INT_MIN, CUDA saturates); the
         * backend's cast computes it */
        return -1;
    }
    return emit_const(kb, &c);
}

int
kb_const_i(tc_kbuilder *kb, tc_dtype dt, int64_t v)
{
    tc_kinst c;
    memset(&c, 0, sizeof(c));
    c.op = KOP_CONST;
    c.dtype = dt;
    if (tc_dtype_is_reduced_float(dt)) {
        return -1;
    } else if (dt == TC_F32) {
        c.imm.f = (double)(float)v;
    } else if (dt == TC_F64) {
        c.imm.f = (double)v;
    } else {
        c.imm.i = wrap_int(dt, v);
    }
    return emit_const(kb, &c);
}

/* Fold casts of constants; reuse an existing cast of the same value. */
int
kb_cast(tc_kbuilder *kb, int v, tc_dtype to)
{
    if (v < 0 || v >= kb->k->ninsts) {
        return -1;
    }
    const tc_kinst src = kb->k->insts[v];
    if (src.dtype == to) {
        return v;
    }
    /* Reduced floats convert only to and from float32 in KIR, so code
     * generators implement just those two roundings; every other
     * conversion goes through float32, as c10 converts them too. */
    if ((tc_dtype_is_reduced_float(src.dtype) || tc_dtype_is_reduced_float(to))
        && src.dtype != TC_F32 && to != TC_F32) {
        return kb_cast(kb, kb_cast(kb, v, TC_F32), to);
    }
    /* Rounding a float32 that was widened from `to` gives the value back
     * (NaN payloads included, which the rounding would canonicalize). */
    if (src.op == KOP_CAST && tc_dtype_is_reduced_float(to)
        && kb->k->insts[src.a].dtype == to) {
        return src.a;
    }
    if (src.op == KOP_CONST) {
        int r;
        if (src.dtype == TC_F32 || src.dtype == TC_F64) {
            r = kb_const_f(kb, to, src.imm.f);
        } else {
            r = kb_const_i(kb, to, src.imm.i);
        }
        if (r >= 0) {
            return r;
        }
    }
    for (int i = kb->k->ninsts - 1; i > v && i >= kb->region_start; i--) {
        const tc_kinst *p = &kb->k->insts[i];
        if (p->op == KOP_CAST && p->a == v && p->dtype == to) {
            return i;
        }
    }
    return kb_emit(kb, KOP_CAST, to, v, -1, -1);
}

int
kb_acc(tc_kbuilder *kb, tc_acc_kind kind, tc_dtype dt)
{
    int v = kb_emit(kb, KOP_ACC, dt, -1, -1, -1);
    if (v >= 0) {
        kb->k->insts[v].imm.i = kind;
    }
    return v;
}

int
kb_acc_update(tc_kbuilder *kb, int acc, int v)
{
    if (acc < 0 || acc >= kb->k->ninsts || kb->k->insts[acc].op != KOP_ACC) {
        return -1;
    }
    return kb_emit(kb, KOP_ACC_UPDATE, kb->k->insts[acc].dtype, acc, v, -1);
}

int
kb_acc_result(tc_kbuilder *kb, int acc, int component)
{
    if (acc < 0 || acc >= kb->k->ninsts || kb->k->insts[acc].op != KOP_ACC) {
        return -1;
    }
    const tc_kinst *in = &kb->k->insts[acc];
    /* component 1: ARGMAX / ARGMIN's index, SOFTMAX's sum (kir.h) */
    tc_dtype dt = component == 0 || in->imm.i == TC_ACC_SOFTMAX ? in->dtype
                                                                : TC_I64;
    int v = kb_emit(kb, KOP_ACC_RESULT, dt, acc, -1, -1);
    if (v >= 0) {
        kb->k->insts[v].imm.i = component;
    }
    return v;
}

void
tc_kernel_clear(tc_kernel *k)
{
    if (!k) {
        return;
    }
    free(k->args);
    free(k->insts);
    free(k->desc);
    memset(k, 0, sizeof(*k));
}

/* ---- printer --------------------------------------------------------- */

/* short names for the shared text buffer (textbuf.h) */
typedef tc_textbuf kbuf;
#define kp tc_textbuf_printf

static const char *const ctype_names[TC_NDTYPES] = {
    "bool", "uint8_t", "int8_t", "int16_t", "int32_t", "int64_t", "float",
    "double", "_Float16", "__bf16"};

static const char *
ctype(tc_dtype dt)
{
    return (int)dt >= 0 && dt < TC_NDTYPES ? ctype_names[dt] : "?";
}

static void
arg_name(const tc_kernel *k, int slot, char *buf, size_t n)
{
    int idx = 0;
    for (int s = 0; s < slot; s++) {
        idx += k->args[s].is_output == k->args[slot].is_output;
    }
    snprintf(buf, n, "%s%d", k->args[slot].is_output ? "out" : "in", idx);
}

static void
kp_index(kbuf *b, const tc_kernel *k, const tc_karg *a)
{
    int any = 0;
    for (int d = 0; d < k->ndim + k->nred; d++) {
        char c = d < k->ndim ? 'i' : 'r';
        int di = d < k->ndim ? d : d - k->ndim;
        if (a->strides[d] == 0) {
            continue;
        }
        kp(b, "%s", any ? " + " : "");
        if (a->strides[d] == 1) {
            kp(b, "%c%d", c, di);
        } else {
            kp(b, "%c%d*%lld", c, di, (long long)a->strides[d]);
        }
        any = 1;
    }
    if (a->offset) {
        kp(b, "%s%lld", any ? " + " : "", (long long)a->offset);
    } else if (!any) {
        kp(b, "0");
    }
}

/* Shortest text that reads back as the same float ("0.1", "2.0"). */
static void
format_float(char *buf, size_t n, float v)
{
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, n, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) {
            break;
        }
    }
    if (!strpbrk(buf, ".e")) {
        strncat(buf, ".0", n - strlen(buf) - 1);
    }
}

static void
kp_const(kbuf *b, const tc_kinst *in)
{
    char num[40];
    if (in->dtype == TC_F32 || in->dtype == TC_F64) {
        if (isnan(in->imm.f)) {
            kp(b, "NAN");
        } else if (isinf(in->imm.f)) {
            kp(b, in->imm.f < 0 ? "-INFINITY" : "INFINITY");
        } else if (in->dtype == TC_F32) {
            format_float(num, sizeof(num), (float)in->imm.f);
            kp(b, "%sf", num);
        } else {
            tc_format_double(num, sizeof(num), in->imm.f);
            kp(b, "%s", num);
        }
    } else if (in->dtype == TC_BOOL) {
        kp(b, in->imm.i ? "true" : "false");
    } else {
        kp(b, "%lld", (long long)in->imm.i);
    }
}

static const char *
kop_infix(tc_kop op)
{
    switch (op) {
    case KOP_ADD: return "+";
    case KOP_SUB: return "-";
    case KOP_MUL: return "*";
    case KOP_DIV: return "/";
    case KOP_LT: return "<";
    case KOP_LE: return "<=";
    case KOP_EQ: return "==";
    case KOP_NE: return "!=";
    case KOP_AND: return "&";
    case KOP_OR: return "|";
    case KOP_XOR: return "^";
    case KOP_SHL: return "<<";
    case KOP_SHR: return ">>";
    default: return NULL;
    }
}

static const char *
kop_func(tc_kop op)
{
    switch (op) {
    case KOP_ABS: return "abs";
    case KOP_SQRT: return "sqrt";
    case KOP_EXP: return "exp";
    case KOP_LOG: return "log";
    case KOP_SIN: return "sin";
    case KOP_COS: return "cos";
    case KOP_TANH: return "tanh";
    case KOP_ERF: return "erf";
    case KOP_FLOOR: return "floor";
    case KOP_RINT: return "rint";
    case KOP_POW: return "pow";
    case KOP_MAX: return "max";
    case KOP_MIN: return "min";
    default: return NULL;
    }
}

static void
kp_expr(kbuf *b, const tc_kernel *k, const tc_kinst *in)
{
    char name[16];
    const char *s;
    switch (in->op) {
    case KOP_CONST:
        kp_const(b, in);
        return;
    case KOP_LOAD:
        arg_name(k, in->arg, name, sizeof(name));
        kp(b, "%s[", name);
        kp_index(b, k, &k->args[in->arg]);
        kp(b, "]");
        return;
    case KOP_INDEX:
        kp(b, "(int64_t)(");
        kp_index(b, k, &k->args[in->arg]);
        kp(b, ")");
        return;
    case KOP_CAST:
        if (in->dtype == TC_BOOL) {
            kp(b, "(v%d != 0)", in->a);
        } else {
            kp(b, "(%s)v%d", ctype(in->dtype), in->a);
        }
        return;
    case KOP_BITCAST:
        kp(b, "bitcast<%s>(v%d)", ctype(in->dtype), in->a);
        return;
    case KOP_NEG:
        kp(b, "-v%d", in->a);
        return;
    case KOP_NOT:
        kp(b, "%sv%d", in->dtype == TC_BOOL ? "!" : "~", in->a);
        return;
    case KOP_WHERE:
        kp(b, "v%d ? v%d : v%d", in->a, in->b, in->c);
        return;
    default:
        break;
    }
    if ((s = kop_infix(in->op))) {
        kp(b, "v%d %s v%d", in->a, s, in->b);
    } else if ((s = kop_func(in->op))) {
        kp(b, in->b >= 0 ? "%s(v%d, v%d)" : "%s(v%d)", s, in->a, in->b);
    } else {
        kp(b, "op%d(v%d)", (int)in->op, in->a);
    }
}

static void
kp_signature(kbuf *b, const tc_kernel *k)
{
    char name[16];
    kp(b, "void %s(", k->name);
    for (int s = 0; s < k->nargs; s++) {
        arg_name(k, s, name, sizeof(name));
        if (k->args[s].buffer == TC_KARG_INDEX) {
            kp(b, "%sindex %s", s ? ", " : "", name);   /* no memory */
            continue;
        }
        kp(b, "%s%s%s *%s", s ? ", " : "", k->args[s].is_output ? "" : "const ",
           ctype(k->args[s].dtype), name);
    }
    kp(b, ") {");
    if (k->desc) {
        kp(b, "   // %s", k->desc);
    }
    kp(b, "\n");
}

static const char *const acc_names[TC_ACC_NKINDS] = {
    "sum", "prod", "max", "min", "argmax", "argmin", "any", "all",
    "softmax"};

static const char *
acc_name(int64_t kind)
{
    return kind >= 0 && kind < TC_ACC_NKINDS ? acc_names[kind] : "?";
}

/* Accumulator instructions as C-like statements. */
static void
kp_acc(kbuf *b, const tc_kernel *k, int i)
{
    const tc_kinst *in = &k->insts[i];
    if (in->op == KOP_ACC) {
        kp(b, "acc_%s<%s> v%d;\n", acc_name(in->imm.i), ctype(in->dtype), i);
        return;
    }
    const tc_kinst *acc = &k->insts[in->a];
    if (in->op == KOP_ACC_RESULT) {
        const char *comp = acc->imm.i == TC_ACC_SOFTMAX
                               ? (in->imm.i ? "sum" : "max")
                               : (in->imm.i ? "index" : "value");
        kp(b, "%s v%d = v%d.%s;\n", ctype(in->dtype), i, in->a, comp);
        return;
    }
    switch (acc->imm.i) {
    case TC_ACC_SUM:
        kp(b, "v%d += v%d;\n", in->a, in->b);
        break;
    case TC_ACC_PROD:
        kp(b, "v%d *= v%d;\n", in->a, in->b);
        break;
    case TC_ACC_ANY:
        kp(b, "v%d |= v%d;\n", in->a, in->b);
        break;
    case TC_ACC_ALL:
        kp(b, "v%d &= v%d;\n", in->a, in->b);
        break;
    case TC_ACC_ARGMAX:
    case TC_ACC_ARGMIN:
        kp(b, "v%d.update(v%d, r);\n", in->a, in->b);
        break;
    case TC_ACC_SOFTMAX:
        kp(b, "v%d.update(v%d);\n", in->a, in->b);
        break;
    default:
        kp(b, "v%d = %s(v%d, v%d);\n", in->a, acc_name(acc->imm.i), in->a,
           in->b);
    }
}

static void
kp_range(kbuf *b, const tc_kernel *k, int from, int to, int indent)
{
    char name[16];
    for (int i = from; i < to; i++) {
        const tc_kinst *in = &k->insts[i];
        kp(b, "%*s", indent, "");
        if (in->op >= KOP_ACC && in->op <= KOP_ACC_RESULT) {
            kp_acc(b, k, i);
            continue;
        }
        if (in->op == KOP_STORE) {
            arg_name(k, in->arg, name, sizeof(name));
            kp(b, "%s[", name);
            kp_index(b, k, &k->args[in->arg]);
            kp(b, "] = v%d;\n", in->a);
            continue;
        }
        kp(b, "%s v%d = ", ctype(in->dtype), i);
        kp_expr(b, k, in);
        kp(b, ";\n");
    }
}

static void
kp_reduction(kbuf *b, const tc_kernel *k)
{
    for (int d = 0; d < k->ndim; d++) {
        kp(b, "%*sfor (int64_t i%d = 0; i%d < %lld; i%d++)%s\n", 2 * (d + 1),
           "", d, d, (long long)k->sizes[d], d, d == k->ndim - 1 ? " {" : "");
    }
    int ind = 2 * (k->ndim + 1), prev = 0;
    for (int p = 0; p < k->nphases; p++) {
        kp_range(b, k, prev, k->phases[p].begin, ind);
        kp(b, "%*s// phase %d: r = ", ind, "", p);
        for (int j = 0; j < k->nred; j++) {
            kp(b, "%sr%d", j ? "*" : "", j);
        }
        kp(b, "%s (%lld points)\n", k->nred ? "" : "0", (long long)k->red_numel);
        for (int j = 0; j < k->nred; j++) {
            kp(b, "%*sfor (int64_t r%d = 0; r%d < %lld; r%d++)%s\n",
               ind + 2 * j, "", j, j, (long long)k->sizes[k->ndim + j], j,
               j == k->nred - 1 ? " {" : "");
        }
        if (k->nred == 0) {
            kp(b, "%*s{\n", ind, "");
        }
        int bi = ind + 2 * (k->nred ? k->nred : 1);
        kp_range(b, k, k->phases[p].begin, k->phases[p].end, bi);
        kp(b, "%*s}\n", bi - 2, "");
        prev = k->phases[p].end;
    }
    kp_range(b, k, prev, k->ninsts, ind);
    if (k->ndim > 0) {
        kp(b, "%*s}\n", 2 * k->ndim, "");
    }
}

char *
tc_kernel_format(const tc_kernel *k)
{
    kbuf b = {0};
    kp_signature(&b, k);
    if (k->nphases > 0) {
        kp_reduction(&b, k);
        kp(&b, "}\n");
        return tc_textbuf_finish(&b);
    }
    for (int d = 0; d < k->ndim; d++) {
        kp(&b, "%*sfor (int64_t i%d = 0; i%d < %lld; i%d++)%s\n", 2 * (d + 1),
           "", d, d, (long long)k->sizes[d], d, d == k->ndim - 1 ? " {" : "");
    }
    kp_range(&b, k, 0, k->ninsts, 2 * (k->ndim + 1));
    if (k->ndim > 0) {
        kp(&b, "%*s}\n", 2 * k->ndim, "");
    }
    kp(&b, "}\n");
    return tc_textbuf_finish(&b);
}

int
tc_kbuf_put(tc_kbuf *t, tc_kop op, tc_dtype dt, int a, int b, int c)
{
    if (t->failed) {
        return 0;
    }
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 64;
        tc_kinst *v = realloc(t->v, sizeof(tc_kinst) * (size_t)cap);
        if (v == NULL) {
            t->failed = 1;
            return 0;
        }
        t->v = v;
        t->cap = cap;
    }
    tc_kinst *in = &t->v[t->n];
    memset(in, 0, sizeof(*in));
    in->op = op;
    in->dtype = dt;
    in->a = a;
    in->b = b;
    in->c = c;
    in->arg = -1;
    return t->n++;
}

int
tc_kernel_rewrite(tc_kernel *k, tc_kwanted_fn wanted, tc_kexpand_fn expand,
                  void *ctx)
{
    int any = 0;
    for (int i = 0; i < k->ninsts; i++) {
        any |= wanted(&k->insts[i], ctx);
    }
    if (!any) {
        return 0;
    }
    int *map = malloc(sizeof(int) * (size_t)k->ninsts);
    int *start = malloc(sizeof(int) * (size_t)(k->ninsts + 1));
    tc_kbuf t = {0};
    for (int i = 0; map && start && i < k->ninsts && !t.failed; i++) {
        const tc_kinst *in = &k->insts[i];
        start[i] = t.n;   /* reduction phase boundaries move with insts */
        int r = wanted(in, ctx) ? expand(&t, in, map, ctx) : TC_KEEP;
        if (r == TC_KEEP) {
            r = tc_kbuf_put(&t, in->op, in->dtype, -1, -1, -1);
            if (t.failed) {
                break;
            }
            t.v[r] = *in;
            t.v[r].a = in->a >= 0 ? map[in->a] : -1;
            t.v[r].b = in->b >= 0 ? map[in->b] : -1;
            t.v[r].c = in->c >= 0 ? map[in->c] : -1;
        }
        map[i] = r;
    }
    free(map);
    if (map == NULL || start == NULL || t.failed) {
        free(t.v);
        free(start);
        return -1;
    }
    start[k->ninsts] = t.n;
    for (int p = 0; p < k->nphases; p++) {
        k->phases[p].begin = start[k->phases[p].begin];
        k->phases[p].end = start[k->phases[p].end];
    }
    free(start);
    free(k->insts);
    k->insts = t.v;
    k->ninsts = t.n;
    return 0;
}

/* ---- independent parts of a pointwise kernel ----------------------------- */

static int
uf_find(int *up, int i)
{
    while (up[i] != i) {
        up[i] = up[up[i]];
        i = up[i];
    }
    return i;
}

static void
uf_union(int *up, int i, int j)
{
    i = uf_find(up, i);
    j = uf_find(up, j);
    if (i != j) {
        up[i > j ? i : j] = i < j ? i : j;
    }
}

/* Is argument a a scalar input: stride 0 in every loop dim, a buffer no
 * argument of k writes? */
static int
scalar_input(const tc_kernel *k, int a)
{
    const tc_karg *ka = &k->args[a];
    for (int d = 0; d < k->ndim; d++) {
        if (ka->strides[d] != 0) {
            return 0;
        }
    }
    for (int b = 0; b < k->nargs; b++) {
        if (k->args[b].is_output && k->args[b].buffer == ka->buffer) {
            return 0;
        }
    }
    return 1;
}

void
tc_kernel_leaf_values(const tc_kernel *k, tc_kleaf_fn leaf, void *ctx,
                      char *flag)
{
    for (int i = 0; i < k->ninsts; i++) {
        const tc_kinst *in = &k->insts[i];
        int f;
        switch (in->op) {
        case KOP_CONST:
        case KOP_LOAD:
        case KOP_INDEX:
            f = leaf(k, i, ctx);
            break;
        case KOP_STORE:
        case KOP_ACC:
        case KOP_ACC_UPDATE:
        case KOP_ACC_RESULT:
            f = 0;
            break;
        default:
            f = (in->a < 0 || flag[in->a]) && (in->b < 0 || flag[in->b])
                && (in->c < 0 || flag[in->c]);
        }
        flag[i] = (char)f;
    }
}

/* Leaves of the parts' shared values: constants, positions, scalar
 * inputs. */
static int
shared_leaf(const tc_kernel *k, int i, void *ctx)
{
    (void)ctx;
    return k->insts[i].op != KOP_LOAD || scalar_input(k, k->insts[i].arg);
}

int
tc_kernel_parts(const tc_kernel *k, int *part)
{
    int n = k->ninsts;
    int *up = malloc(sizeof(int) * (size_t)(n + 1));
    int *first = malloc(sizeof(int) * (size_t)(k->nargs + 1));
    char *shared = calloc((size_t)n + 1, 1);
    int nparts = -1;
    if (up == NULL || first == NULL || shared == NULL) {
        goto done;
    }
    for (int a = 0; a < k->nargs; a++) {
        first[a] = -1;      /* its first access (not a shared load) */
    }
    tc_kernel_leaf_values(k, shared_leaf, NULL, shared);
    for (int i = 0; i < n; i++) {
        const tc_kinst *in = &k->insts[i];
        up[i] = i;
        if (shared[i]) {
            continue;
        }
        int ops[3] = {in->a, in->b, in->c};
        for (int j = 0; j < 3; j++) {
            if (ops[j] >= 0 && !shared[ops[j]]) {
                uf_union(up, i, ops[j]);
            }
        }
        if (in->op != KOP_LOAD && in->op != KOP_STORE) {
            continue;
        }
        /* with the first access of every argument on the same buffer */
        if (first[in->arg] < 0) {
            first[in->arg] = i;
        }
        for (int a = 0; a < k->nargs; a++) {
            if (first[a] >= 0
                && k->args[a].buffer == k->args[in->arg].buffer) {
                uf_union(up, i, first[a]);
            }
        }
    }
    /* number the roots by first appearance */
    nparts = 0;
    for (int i = 0; i < n; i++) {
        part[i] = -1;
        if (!shared[i]) {
            int r = uf_find(up, i);
            part[i] = r == i ? nparts++ : part[r];
        }
    }
done:
    free(up);
    free(first);
    free(shared);
    return nparts;
}

/* ---- values shared between the bodies of a reduction kernel ------------- */

int
tc_kernel_writes_its_input(const tc_kernel *k)
{
    for (int a = 0; a < k->nargs; a++) {
        for (int b = 0; b < k->nargs; b++) {
            if (k->args[a].is_output && !k->args[b].is_output
                && k->args[a].buffer == k->args[b].buffer) {
                return 1;
            }
        }
    }
    return 0;
}

typedef struct {
    const tc_kernel *k;
    const int *part;
    int p;
} part_ctx;

static int
other_part(const tc_kinst *in, void *ctx)
{
    const part_ctx *c = ctx;
    int q = c->part[in - c->k->insts];
    return q >= 0 && q != c->p;
}

static int
drop_inst(tc_kbuf *t, const tc_kinst *in, const int *map, void *ctx)
{
    (void)t;
    (void)in;
    (void)map;
    (void)ctx;
    return -1;
}

int
tc_kernel_part(const tc_kernel *k, const int *part, int p, tc_kernel *out)
{
    *out = *k;
    out->insts = malloc(sizeof(tc_kinst) * (size_t)(k->ninsts + 1));
    if (out->insts == NULL) {
        return -1;
    }
    memcpy(out->insts, k->insts, sizeof(tc_kinst) * (size_t)k->ninsts);
    /* other_part reads the original's instructions: same indices */
    part_ctx c = {out, part, p};
    if (tc_kernel_rewrite(out, other_part, drop_inst, &c) < 0) {
        free(out->insts);
        out->insts = NULL;
        return -1;
    }
    return 0;
}

void
tc_kernel_regions(const tc_kernel *k, int *region)
{
    int np = k->nphases;
    for (int p = 0; p < np; p++) {
        int pre = p == 0 ? 0 : k->phases[p - 1].end;
        for (int i = pre; i < k->phases[p].begin; i++) {
            region[i] = 2 * p;
        }
        for (int i = k->phases[p].begin; i < k->phases[p].end; i++) {
            region[i] = 2 * p + 1;
        }
    }
    for (int i = np > 0 ? k->phases[np - 1].end : 0; i < k->ninsts; i++) {
        region[i] = 2 * np;
    }
}

/* Are instructions i and j (j < i) the same value at one reduction point?
 * Constants by value; body values by op, dtype and operand numbers (a
 * load by its argument); stores, accumulator ops and pre/post values are
 * only themselves. */
static int
same_value(const tc_kernel *k, const int *vn, const int *region, int i,
           int j)
{
    const tc_kinst *a = &k->insts[i], *b = &k->insts[j];
    if (a->op != b->op || a->dtype != b->dtype) {
        return 0;
    }
    if (a->op == KOP_CONST) {
        /* parameters of a size-generic kernel are equal only to
         * themselves: their values come at run time */
        if (a->arg >= TC_KCONST_PARAM || b->arg >= TC_KCONST_PARAM) {
            return a->arg == b->arg;
        }
        return memcmp(&a->imm, &b->imm, sizeof(a->imm)) == 0;
    }
    if (!(region[i] & 1) || !(region[j] & 1) || a->op == KOP_STORE
        || a->op >= KOP_ACC) {
        return 0;
    }
    if (a->op == KOP_LOAD) {
        return a->arg == b->arg;
    }
    int oa[3] = {a->a, a->b, a->c}, ob[3] = {b->a, b->b, b->c};
    for (int t = 0; t < 3; t++) {
        if ((oa[t] < 0) != (ob[t] < 0)
            || (oa[t] >= 0 && vn[oa[t]] != vn[ob[t]])) {
            return 0;
        }
    }
    return 1;
}

void
tc_kernel_body_value_numbers(const tc_kernel *k, const int *region, int *vn)
{
    for (int i = 0; i < k->ninsts; i++) {
        vn[i] = i;
        for (int j = 0; j < i; j++) {
            if (vn[j] == j && same_value(k, vn, region, i, j)) {
                vn[i] = j;
                break;
            }
        }
    }
}

/* ---- kernels with the same code ------------------------------------------ */

static int
same_inst(const tc_kinst *a, const tc_kinst *b)
{
    /* imm is a constant's value, an accumulator's kind (sum vs amin over
     * the same rows) or a result's component; kb_emit zeroes it for the
     * other ops, so it is compared for all of them */
    return a->op == b->op && a->dtype == b->dtype && a->a == b->a
           && a->b == b->b && a->c == b->c && a->arg == b->arg
           && memcmp(&a->imm, &b->imm, sizeof(a->imm)) == 0;
}

static int
same_arg(const tc_kernel *ka, const tc_karg *a, const tc_karg *b)
{
    int nd = ka->ndim + ka->nred;
    return a->dtype == b->dtype && a->is_output == b->is_output
           && a->offset == b->offset
           && (a->buffer == TC_KARG_INDEX) == (b->buffer == TC_KARG_INDEX)
           && memcmp(a->strides, b->strides, sizeof(int64_t) * nd) == 0;
}

/* Size classes a size-generic kernel compiles in (kir.h
 * tc_kernel_same_generic_code): 0, 1, larger; strides also negative. */
static int
size_class(int64_t v)
{
    return v == 0 ? 0 : v == 1 ? 1 : 2;
}

int
tc_stride_class(int64_t v)
{
    return v < 0 ? 3 : size_class(v);
}

int
tc_kconst_is_param(const tc_kinst *in)
{
    return in->op == KOP_CONST && (in->dtype == TC_F32 || in->dtype == TC_F64)
           && isfinite(in->imm.f);
}

void
tc_kernel_number_params(tc_kernel *k)
{
    int j = 0;
    for (int i = 0; i < k->ninsts; i++) {
        if (tc_kconst_is_param(&k->insts[i])) {
            k->insts[i].arg = TC_KCONST_PARAM + j++;
        }
    }
}

int64_t
tc_dims_block(const tc_kernel *k, int nd, const int64_t *sizes,
              int64_t (*strides)[TC_MAX_DIMS], int64_t *out)
{
    int64_t n = tc_dims_param_slot(nd, k->nargs, 0);
    for (int i = 0; i < k->ninsts; i++) {
        if (tc_kconst_is_param(&k->insts[i])) {
            if (out != NULL) {
                memcpy(&out[n], &k->insts[i].imm.f, sizeof(double));
            }
            n++;
        }
    }
    for (int d = 0; out != NULL && d < nd; d++) {
        out[d] = sizes[d];
        for (int a = 0; a < k->nargs; a++) {
            out[tc_dims_stride_slot(nd, a, d)] = strides[a][d];
        }
    }
    for (int a = 0; out != NULL && a < k->nargs; a++) {
        out[tc_dims_offset_slot(nd, k->nargs, a)] = k->args[a].offset;
    }
    return n;
}

static int
same_arg_generic(const tc_kernel *ka, const tc_karg *x, const tc_karg *y)
{
    int nd = ka->ndim + ka->nred;
    if (x->dtype != y->dtype || x->is_output != y->is_output
        || (x->offset != 0) != (y->offset != 0)
        || (x->buffer == TC_KARG_INDEX) != (y->buffer == TC_KARG_INDEX)) {
        return 0;
    }
    for (int d = 0; d < nd; d++) {
        if (tc_stride_class(x->strides[d])
            != tc_stride_class(y->strides[d])) {
            return 0;
        }
    }
    return 1;
}

static int
same_sizes(const tc_kernel *a, const tc_kernel *b, int generic)
{
    int nd = a->ndim + a->nred;
    if (!generic) {
        return a->numel == b->numel && a->red_numel == b->red_numel
               && memcmp(a->sizes, b->sizes, sizeof(int64_t) * nd) == 0;
    }
    if (size_class(a->numel) != size_class(b->numel)
        || size_class(a->red_numel) != size_class(b->red_numel)) {
        return 0;
    }
    for (int d = 0; d < nd; d++) {
        if (size_class(a->sizes[d]) != size_class(b->sizes[d])) {
            return 0;
        }
    }
    return 1;
}

static int
same_code(const tc_kernel *a, const tc_kernel *b, int generic)
{
    if (a->ndim != b->ndim || a->nred != b->nred || a->nphases != b->nphases
        || a->nargs != b->nargs || a->ninsts != b->ninsts
        || !same_sizes(a, b, generic)
        || memcmp(a->phases, b->phases,
                  sizeof(tc_kphase) * (size_t)a->nphases) != 0) {
        return 0;
    }
    for (int i = 0; i < a->nargs; i++) {
        if (!(generic ? same_arg_generic(a, &a->args[i], &b->args[i])
                      : same_arg(a, &a->args[i], &b->args[i]))) {
            return 0;
        }
        /* which arguments alias decides restrict, ld.global.nc, reuse */
        for (int j = 0; j < i; j++) {
            if ((a->args[i].buffer == a->args[j].buffer)
                != (b->args[i].buffer == b->args[j].buffer)) {
                return 0;
            }
        }
    }
    for (int i = 0; i < a->ninsts; i++) {
        const tc_kinst *x = &a->insts[i], *y = &b->insts[i];
        if (generic && tc_kconst_is_param(x) && tc_kconst_is_param(y)) {
            if (x->dtype != y->dtype) {
                return 0;
            }
            continue;
        }
        if (!same_inst(x, y)) {
            return 0;
        }
    }
    return 1;
}

int
tc_kernel_same_generic_code(const tc_kernel *a, const tc_kernel *b)
{
    return same_code(a, b, 1);
}

int
tc_kernel_same_code(const tc_kernel *a, const tc_kernel *b)
{
    return same_code(a, b, 0);
}
