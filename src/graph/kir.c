/* kir.c - kernel IR builder and pseudo-source printer.
 *
 * Constants are stored already converted to their dtype (an f32 constant
 * holds the float-rounded value, an int8 constant the wrapped value), so
 * code generators can emit them verbatim and lowerings can compare them.
 */
#include "kir.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- builder --------------------------------------------------------- */

static int
kop_arity(tc_kop op)
{
    if (op == KOP_CONST || op == KOP_LOAD) {
        return 0;
    }
    if (op == KOP_STORE || op == KOP_CAST || op == KOP_BITCAST ||
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
    for (int i = 0; i < kb->k->ninsts; i++) {
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
    for (int i = kb->k->ninsts - 1; i >= 0; i--) {
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
    if (dt == TC_F32) {
        c.imm.f = (double)(float)v;
    } else if (dt == TC_F64) {
        c.imm.f = v;
    } else if (dt == TC_BOOL) {
        c.imm.i = v != 0;
    } else if (isfinite(v) && fabs(v) < 9.2e18) {
        c.imm.i = wrap_int(dt, (int64_t)v);
    } else {
        return -1; /* C leaves this conversion undefined */
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
    if (dt == TC_F32) {
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
    for (int i = kb->k->ninsts - 1; i > v; i--) {
        const tc_kinst *p = &kb->k->insts[i];
        if (p->op == KOP_CAST && p->a == v && p->dtype == to) {
            return i;
        }
    }
    return kb_emit(kb, KOP_CAST, to, v, -1, -1);
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

typedef struct {
    char *s;
    size_t len, cap;
    int failed;
} kbuf;

static void
kp(kbuf *b, const char *fmt, ...)
{
    if (b->failed) {
        return;
    }
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? room : 0, fmt,
                          ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->s && (size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 512;
        while (cap < b->len + (size_t)n + 1) {
            cap *= 2;
        }
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

static const char *const ctype_names[TC_NDTYPES] = {
    "bool", "uint8_t", "int8_t", "int16_t", "int32_t", "int64_t", "float",
    "double"};

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
    for (int d = 0; d < k->ndim; d++) {
        if (a->strides[d] == 0) {
            continue;
        }
        kp(b, "%s", any ? " + " : "");
        if (a->strides[d] == 1) {
            kp(b, "i%d", d);
        } else {
            kp(b, "i%d*%lld", d, (long long)a->strides[d]);
        }
        any = 1;
    }
    if (!any) {
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
        kp(b, "%s%s%s *%s", s ? ", " : "", k->args[s].is_output ? "" : "const ",
           ctype(k->args[s].dtype), name);
    }
    kp(b, ") {");
    if (k->desc) {
        kp(b, "   // %s", k->desc);
    }
    kp(b, "\n");
}

static void
kp_body(kbuf *b, const tc_kernel *k, int indent)
{
    char name[16];
    for (int i = 0; i < k->ninsts; i++) {
        const tc_kinst *in = &k->insts[i];
        kp(b, "%*s", indent, "");
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

char *
tc_kernel_format(const tc_kernel *k)
{
    kbuf b = {0};
    kp_signature(&b, k);
    for (int d = 0; d < k->ndim; d++) {
        kp(&b, "%*sfor (int64_t i%d = 0; i%d < %lld; i%d++)%s\n", 2 * (d + 1),
           "", d, d, (long long)k->sizes[d], d, d == k->ndim - 1 ? " {" : "");
    }
    kp_body(&b, k, 2 * (k->ndim + 1));
    if (k->ndim > 0) {
        kp(&b, "%*s}\n", 2 * k->ndim, "");
    }
    kp(&b, "}\n");
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
