/* kir_ref.c - a sequential KIR interpreter: the reference the device
 * harness compares GPU results with (see cases.h). */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef union {
    double f;
    int64_t i;
} val;

static int
isf(tc_dtype dt)
{
    return dt == TC_F32 || dt == TC_F64;
}

static int64_t
wrap(tc_dtype dt, int64_t x)
{
    switch (dt) {
    case TC_BOOL:
        return x != 0;
    case TC_U8:
        return (uint8_t)x;
    case TC_I8:
        return (int8_t)x;
    case TC_I16:
        return (int16_t)x;
    case TC_I32:
        return (int32_t)x;
    default:
        return x;
    }
}

static double
rnd(tc_dtype dt, double x)
{
    return dt == TC_F32 ? (double)(float)x : x;
}

static size_t
esz(tc_dtype dt)
{
    static const size_t s[TC_NDTYPES] = {1, 1, 1, 2, 4, 8, 4, 8};
    return s[dt];
}

static val
ld(tc_dtype dt, const char *p)
{
    val v;
    switch (dt) {
    case TC_BOOL: case TC_U8: v.i = *(const uint8_t *)p; break;
    case TC_I8: v.i = *(const int8_t *)p; break;
    case TC_I16: v.i = *(const int16_t *)p; break;
    case TC_I32: v.i = *(const int32_t *)p; break;
    case TC_I64: v.i = *(const int64_t *)p; break;
    case TC_F32: v.f = *(const float *)p; break;
    default: v.f = *(const double *)p; break;
    }
    return v;
}

static void
st(tc_dtype dt, char *p, val v)
{
    switch (dt) {
    case TC_BOOL: case TC_U8: *(uint8_t *)p = (uint8_t)v.i; break;
    case TC_I8: *(int8_t *)p = (int8_t)v.i; break;
    case TC_I16: *(int16_t *)p = (int16_t)v.i; break;
    case TC_I32: *(int32_t *)p = (int32_t)v.i; break;
    case TC_I64: *(int64_t *)p = v.i; break;
    case TC_F32: *(float *)p = (float)v.f; break;
    default: *(double *)p = v.f; break;
    }
}

static val
cast(val a, tc_dtype from, tc_dtype to)
{
    val r;
    if (to == TC_BOOL) {
        r.i = isf(from) ? a.f != 0 : a.i != 0;
    }
    else if (isf(to)) {
        r.f = rnd(to, isf(from) ? a.f : (double)a.i);
    }
    else if (isf(from)) {
        r.i = to == TC_I64 ? (int64_t)a.f : wrap(to, (int32_t)a.f);
    }
    else {
        r.i = wrap(to, a.i);
    }
    return r;
}

static double
mm(int mx, double a, double b)
{
    if (a != a) {
        return a;
    }
    if (b != b) {
        return b;
    }
    return mx ? (a > b ? a : b) : (a < b ? a : b);
}

typedef struct {
    const tc_plan *p;
    const tc_kernel *k;
    void **bufs;
    val *v;
    val *acc_i;
    int64_t off[64];   /* per arg element offset at the current point */
    int64_t r;
} ctx;

static void
acc_step(tc_acc_kind kind, tc_dtype dt, val *av, val *ai, val x, int64_t xi)
{
    int fl = isf(dt);
    switch (kind) {
    case TC_ACC_SUM:
        /* float sums accumulate in double (rounded once at ACC_RESULT):
         * a reference for the GPU's tree-shaped sums, not a copy of one
         * particular float32 summation order */
        if (fl) av->f = av->f + x.f; else av->i = wrap(dt, (int64_t)((uint64_t)av->i + (uint64_t)x.i));
        return;
    case TC_ACC_PROD:
        if (fl) av->f = rnd(dt, av->f * x.f); else av->i = wrap(dt, (int64_t)((uint64_t)av->i * (uint64_t)x.i));
        return;
    case TC_ACC_MAX: case TC_ACC_MIN: {
        int mx = kind == TC_ACC_MAX;
        if (dt == TC_BOOL) av->i = mx ? (av->i | x.i) : (av->i & x.i);
        else if (fl) av->f = mm(mx, av->f, x.f);
        else av->i = mx ? (av->i > x.i ? av->i : x.i) : (av->i < x.i ? av->i : x.i);
        return;
    }
    case TC_ACC_ANY: av->i |= x.i; return;
    case TC_ACC_ALL: av->i &= x.i; return;
    default: {
        int mx = kind == TC_ACC_ARGMAX;
        int take;
        if (ai->i < 0) take = 1;
        else if (fl) {
            int an = av->f != av->f, bn = x.f != x.f;
            take = (bn && !an) || (!an && !bn && (mx ? x.f > av->f : x.f < av->f));
        }
        else take = mx ? x.i > av->i : x.i < av->i;
        if (take) { *av = x; ai->i = xi; }
        return;
    }
    }
}

static int
run_inst(ctx *c, int i)
{
    const tc_kernel *k = c->k;
    const tc_kinst *in = &k->insts[i];
    val a = in->a >= 0 ? c->v[in->a] : (val){0};
    val b = in->b >= 0 ? c->v[in->b] : (val){0};
    val cc = in->c >= 0 ? c->v[in->c] : (val){0};
    tc_dtype dt = in->dtype;
    tc_dtype adt = in->a >= 0 ? k->insts[in->a].dtype : dt;
    int fl = isf(dt);
    val r = {0};
    switch (in->op) {
    case KOP_CONST:
        if (fl) r.f = rnd(dt, in->imm.f); else r.i = wrap(dt, in->imm.i);
        break;
    case KOP_LOAD: {
        const tc_karg *ag = &k->args[in->arg];
        r = ld(ag->dtype, (char *)c->bufs[ag->buffer] + c->off[in->arg] * (int64_t)esz(ag->dtype));
        r = cast(r, ag->dtype, dt);
        break;
    }
    case KOP_STORE: {
        const tc_karg *ag = &k->args[in->arg];
        st(ag->dtype, (char *)c->bufs[ag->buffer] + c->off[in->arg] * (int64_t)esz(ag->dtype), cast(a, adt, ag->dtype));
        return 0;
    }
    case KOP_CAST: r = cast(a, adt, dt); break;
    case KOP_BITCAST:
        if (esz(dt) == 4) {
            if (dt == TC_F32) { int32_t x = (int32_t)a.i; float f; memcpy(&f, &x, 4); r.f = f; }
            else { float f = (float)a.f; int32_t x; memcpy(&x, &f, 4); r.i = x; }
        } else {
            if (dt == TC_F64) memcpy(&r.f, &a.i, 8); else memcpy(&r.i, &a.f, 8);
        }
        break;
    case KOP_NEG: if (fl) r.f = -a.f; else r.i = wrap(dt, (int64_t)(0 - (uint64_t)a.i)); break;
    case KOP_ABS: if (fl) r.f = fabs(a.f); else r.i = wrap(dt, a.i < 0 ? (int64_t)(0 - (uint64_t)a.i) : a.i); break;
    case KOP_SQRT: r.f = rnd(dt, dt == TC_F32 ? sqrtf((float)a.f) : sqrt(a.f)); break;
    case KOP_EXP: r.f = dt == TC_F32 ? expf((float)a.f) : exp(a.f); break;
    case KOP_LOG: r.f = dt == TC_F32 ? logf((float)a.f) : log(a.f); break;
    case KOP_SIN: r.f = dt == TC_F32 ? sinf((float)a.f) : sin(a.f); break;
    case KOP_COS: r.f = dt == TC_F32 ? cosf((float)a.f) : cos(a.f); break;
    case KOP_TANH: r.f = dt == TC_F32 ? tanhf((float)a.f) : tanh(a.f); break;
    case KOP_FLOOR: if (fl) r.f = floor(a.f); else r = a; break;
    case KOP_RINT: if (fl) r.f = nearbyint(a.f); else r = a; break;
    case KOP_NOT: r.i = dt == TC_BOOL ? !a.i : wrap(dt, ~a.i); break;
    case KOP_ADD: case KOP_SUB: case KOP_MUL: case KOP_DIV: case KOP_POW:
        if (fl) {
            double x = in->op == KOP_ADD ? a.f + b.f : in->op == KOP_SUB ? a.f - b.f
                     : in->op == KOP_MUL ? a.f * b.f : in->op == KOP_DIV ? a.f / b.f
                     : dt == TC_F32 ? powf((float)a.f, (float)b.f) : pow(a.f, b.f);
            r.f = rnd(dt, x);
        } else if (dt == TC_BOOL) {
            r.i = in->op == KOP_ADD ? (a.i | b.i) : in->op == KOP_SUB ? (a.i ^ b.i) : (a.i & b.i);
        } else if (in->op == KOP_DIV) {
            if (b.i == 0) r.i = a.i;
            else if (b.i == -1) r.i = wrap(dt, (int64_t)(0 - (uint64_t)a.i));
            else r.i = wrap(dt, a.i / b.i);
        } else {
            uint64_t x = (uint64_t)a.i, y = (uint64_t)b.i;
            r.i = wrap(dt, (int64_t)(in->op == KOP_ADD ? x + y : in->op == KOP_SUB ? x - y : x * y));
        }
        break;
    case KOP_MAX: case KOP_MIN: {
        int mx = in->op == KOP_MAX;
        if (fl) r.f = mm(mx, a.f, b.f);
        else r.i = mx ? (a.i > b.i ? a.i : b.i) : (a.i < b.i ? a.i : b.i);
        break;
    }
    case KOP_LT: r.i = isf(adt) ? a.f < b.f : a.i < b.i; break;
    case KOP_LE: r.i = isf(adt) ? a.f <= b.f : a.i <= b.i; break;
    case KOP_EQ: r.i = isf(adt) ? a.f == b.f : a.i == b.i; break;
    case KOP_NE: r.i = isf(adt) ? a.f != b.f : a.i != b.i; break;
    case KOP_AND: r.i = a.i & b.i; break;
    case KOP_OR: r.i = a.i | b.i; break;
    case KOP_XOR: r.i = a.i ^ b.i; break;
    case KOP_SHL: r.i = wrap(dt, (int64_t)((uint64_t)a.i << (b.i & 63))); break;
    case KOP_SHR: r.i = a.i >> (b.i & 63); break;
    case KOP_WHERE: r = a.i ? b : cc; break;
    case KOP_ACC: {
        tc_acc_kind kind = (tc_acc_kind)in->imm.i;
        int hi = kind == TC_ACC_MIN || kind == TC_ACC_ARGMIN;
        c->acc_i[i].i = -1;
        if (kind == TC_ACC_PROD || kind == TC_ACC_ALL) {
            if (fl) r.f = 1; else r.i = 1;
        } else if (kind == TC_ACC_SUM || kind == TC_ACC_ANY) {
            r.i = 0; r.f = 0;
        } else if (fl) {
            r.f = hi ? INFINITY : -INFINITY;
        } else {
            static const int64_t lo_[TC_NDTYPES] = {0, 0, -128, -32768, INT32_MIN, INT64_MIN, 0, 0};
            static const int64_t hi_[TC_NDTYPES] = {1, 255, 127, 32767, INT32_MAX, INT64_MAX, 0, 0};
            r.i = hi ? hi_[dt] : lo_[dt];
        }
        break;
    }
    case KOP_ACC_UPDATE: {
        const tc_kinst *acc = &k->insts[in->a];
        acc_step((tc_acc_kind)acc->imm.i, acc->dtype, &c->v[in->a], &c->acc_i[in->a], b, c->r);
        return 0;
    }
    case KOP_ACC_RESULT:
        if (in->imm.i == 1) {
            r = cast(c->acc_i[in->a], TC_I64, dt);
        } else {
            val v = c->v[in->a];
            tc_dtype adt2 = k->insts[in->a].dtype;
            if (isf(adt2)) {
                v.f = rnd(adt2, v.f);
            }
            r = cast(v, adt2, dt);
        }
        break;
    default:
        return -1;
    }
    c->v[i] = r;
    return 0;
}

/* offsets of every arg at outer linear index o and reduction index r */
static void
point(ctx *c, int64_t o, int64_t r, int with_red)
{
    const tc_kernel *k = c->k;
    int64_t co[TC_MAX_DIMS] = {0};
    for (int d = k->ndim - 1; d >= 0; d--) {
        co[d] = o % k->sizes[d];
        o /= k->sizes[d];
    }
    if (with_red) {
        for (int d = k->ndim + k->nred - 1; d >= k->ndim; d--) {
            co[d] = r % k->sizes[d];
            r /= k->sizes[d];
        }
    }
    int nd = k->ndim + (with_red ? k->nred : 0);
    for (int a = 0; a < k->nargs; a++) {
        int64_t off = k->args[a].offset;
        for (int d = 0; d < nd; d++) {
            off += co[d] * k->args[a].strides[d];
        }
        c->off[a] = off;
    }
}

int
tc_kir_ref_run(const tc_plan *p, void **bufs, char *err, size_t errlen)
{
    for (int ki = 0; ki < p->nkernels; ki++) {
        const tc_kernel *k = &p->kernels[ki];
        ctx c = {p, k, bufs, calloc((size_t)k->ninsts + 1, sizeof(val)),
                 calloc((size_t)k->ninsts + 1, sizeof(val)), {0}, 0};
        if (k->nargs > 64) {
            snprintf(err, errlen, "too many args");
            return -1;
        }
        for (int64_t o = 0; o < k->numel; o++) {
            if (k->nphases == 0) {
                point(&c, o, 0, 0);
                for (int i = 0; i < k->ninsts; i++) {
                    if (run_inst(&c, i) < 0) {
                        snprintf(err, errlen, "ref: op %d", k->insts[i].op);
                        return -1;
                    }
                }
                continue;
            }
            for (int ph = 0; ph <= k->nphases; ph++) {
                int b = ph == 0 ? 0 : k->phases[ph - 1].end;
                int e = ph == k->nphases ? k->ninsts : k->phases[ph].begin;
                point(&c, o, 0, 0);
                for (int i = b; i < e; i++) {
                    if (run_inst(&c, i) < 0) {
                        snprintf(err, errlen, "ref: op %d", k->insts[i].op);
                        return -1;
                    }
                }
                if (ph == k->nphases) {
                    break;
                }
                for (int64_t r = 0; r < k->red_numel; r++) {
                    c.r = r;
                    point(&c, o, r, 1);
                    for (int i = k->phases[ph].begin; i < k->phases[ph].end; i++) {
                        if (run_inst(&c, i) < 0) {
                            snprintf(err, errlen, "ref: op %d", k->insts[i].op);
                            return -1;
                        }
                    }
                }
            }
        }
        free(c.v);
        free(c.acc_i);
    }
    return 0;
}
