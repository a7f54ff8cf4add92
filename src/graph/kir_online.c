/* kir_online.c - softmax's max pass and sum pass as one pass
 * (tc_kernel_online_softmax, kir.h).
 *
 * softmax, log_softmax, cross-entropy and logsumexp reduce a row twice:
 * m = max(x), then s = sum(exp(x - c)) with c = m or (cross-entropy,
 * logsumexp) c = where(|m| == inf, 0, m).  A row too long for registers is
 * then read from memory twice.  A SOFTMAX accumulator (kir.h) computes m
 * and sum(exp(x - m)) in the first pass; this rewrite gives the MAX
 * accumulator that kind, drops the sum's phase and computes the sum's
 * result from the two components:
 *
 *   c = m:                          |m| == inf ? NaN : s
 *   c = where(|m| == inf, 0, m):    |m| == inf ? max(m, 0) : s
 *
 * which are the two-pass results where m is infinite: c = m gives exp(inf
 * - inf) = NaN terms (m = +inf: the point that is +inf; m = -inf: every
 * point); the guarded form sums exp(x) there, 0 when every x is -inf
 * (max(-inf, 0) = 0) and +inf when one is +inf.  A row with a NaN has m
 * = s = NaN, as both two-pass forms give NaN.  Rows of no points are
 * left alone (the rewrite needs red_numel > 0: m = -inf there, yet the
 * two-pass sum is 0).
 *
 * The sum's phase must do nothing else (no store, no other accumulator),
 * else removing it saves no pass; its x must be the max's x (body value
 * numbers, so a kernel that writes its input is never rewritten).
 */
#include <math.h>
#include <stdlib.h>

#include "kir.h"

/* kernels rewritten (compile workers run in parallel: atomic) */
static long online_kernels;

long
tc_kernel_online_count(int reset)
{
    return reset ? __atomic_exchange_n(&online_kernels, 0, __ATOMIC_RELAXED)
                 : __atomic_load_n(&online_kernels, __ATOMIC_RELAXED);
}

typedef struct {
    int acc_max;     /* the MAX accumulator (becomes SOFTMAX) */
    int acc_sum;     /* the SUM accumulator (removed) */
    int res_max;     /* ACC_RESULT(acc_max, 0) that c is made from */
    int guarded;     /* c = where(|m| == inf, 0, m) */
    int phase;       /* the sum's phase (removed) */
} online_match;

static int
is_const_f(const tc_kernel *k, int i, double v)
{
    const tc_kinst *in = &k->insts[i];
    return in->op == KOP_CONST && in->arg < TC_KCONST_PARAM
           && in->dtype == TC_F32 && in->imm.f == v;
}

/* |m| == inf, with m = ACC_RESULT r (either operand order) */
static int
is_abs_inf(const tc_kernel *k, int i, int r)
{
    const tc_kinst *eq = &k->insts[i];
    if (eq->op != KOP_EQ) {
        return 0;
    }
    int x = eq->a, y = eq->b;
    if (is_const_f(k, x, INFINITY)) {
        x = eq->b;
        y = eq->a;
    }
    const tc_kinst *ab = &k->insts[x];
    return is_const_f(k, y, INFINITY) && ab->op == KOP_ABS && ab->a == r;
}

/* c as a max result: sets m->res_max and m->guarded, or returns 0. */
static int
match_shift(const tc_kernel *k, int c, online_match *m)
{
    const tc_kinst *in = &k->insts[c];
    m->guarded = 0;
    if (in->op == KOP_WHERE && is_const_f(k, in->b, 0.0)
        && is_abs_inf(k, in->a, in->c)) {
        m->guarded = 1;
        in = &k->insts[in->c];
        c = in - k->insts;
    }
    if (in->op != KOP_ACC_RESULT || in->imm.i != 0) {
        return 0;
    }
    const tc_kinst *acc = &k->insts[in->a];
    if (acc->imm.i != TC_ACC_MAX || acc->dtype != TC_F32) {
        return 0;
    }
    m->res_max = c;
    m->acc_max = in->a;
    return 1;
}

/* The only ACC_UPDATE of accumulator acc, or -1. */
static int
only_update(const tc_kernel *k, int acc)
{
    int u = -1;
    for (int i = 0; i < k->ninsts; i++) {
        const tc_kinst *in = &k->insts[i];
        if (in->op == KOP_ACC_UPDATE && in->a == acc) {
            if (u >= 0) {
                return -1;
            }
            u = i;
        }
    }
    return u;
}

/* Does body q do anything but the update u (a store, another update)? */
static int
body_does_more(const tc_kernel *k, int q, int u)
{
    for (int i = k->phases[q].begin; i < k->phases[q].end; i++) {
        tc_kop op = k->insts[i].op;
        if (i != u && (op == KOP_STORE || op == KOP_ACC_UPDATE)) {
            return 1;
        }
    }
    return 0;
}

/* Is SUM accumulator s the sum of exp(x - c) of an online_match? */
static int
match_sum(const tc_kernel *k, const int *region, const int *vn, int s,
          online_match *m)
{
    const tc_kinst *acc = &k->insts[s];
    int q = region[s] / 2;
    if (acc->imm.i != TC_ACC_SUM || acc->dtype != TC_F32 || q < 1) {
        return 0;
    }
    int u = only_update(k, s);
    if (u < 0 || region[u] != 2 * q + 1 || body_does_more(k, q, u)) {
        return 0;
    }
    const tc_kinst *ex = &k->insts[k->insts[u].b];
    if (ex->op != KOP_EXP || ex->dtype != TC_F32) {
        return 0;
    }
    const tc_kinst *d = &k->insts[ex->a];
    if (d->op != KOP_SUB || region[d->a] != 2 * q + 1
        || !match_shift(k, d->b, m)) {
        return 0;
    }
    int um = only_update(k, m->acc_max);
    if (um < 0 || vn[k->insts[um].b] != vn[d->a]) {
        return 0;
    }
    m->acc_sum = s;
    m->phase = q;
    return 1;
}

/* Appends the sum's result (see the top of the file); returns its id. */
static int
put_sum_result(tc_kbuf *t, const online_match *m, const int *map)
{
    int r = map[m->res_max];
    int s = tc_kbuf_put(t, KOP_ACC_RESULT, TC_F32, map[m->acc_max], -1, -1);
    int inf = tc_kbuf_put(t, KOP_CONST, TC_F32, -1, -1, -1);
    int ab = tc_kbuf_put(t, KOP_ABS, TC_F32, r, -1, -1);
    int isinf = tc_kbuf_put(t, KOP_EQ, TC_BOOL, ab, inf, -1);
    int cst = tc_kbuf_put(t, KOP_CONST, TC_F32, -1, -1, -1);
    int alt = m->guarded ? tc_kbuf_put(t, KOP_MAX, TC_F32, r, cst, -1) : cst;
    int res = tc_kbuf_put(t, KOP_WHERE, TC_F32, isinf, alt, s);
    if (t->failed) {
        return -1;
    }
    t->v[s].imm.i = 1;
    t->v[inf].imm.f = INFINITY;
    t->v[cst].imm.f = m->guarded ? 0.0 : NAN;
    return res;
}

/* The rewrite as a tc_kernel_rewrite pass: the sum's body and
 * accumulator vanish (nothing appended, no value), its result becomes
 * put_sum_result, the max's accumulator changes kind. */
typedef struct {
    const tc_kernel *k;
    const int *region;
    const online_match *m;
} online_ctx;

static int
online_wanted(const tc_kinst *in, void *ctx)
{
    const online_ctx *c = ctx;
    int i = (int)(in - c->k->insts);
    return c->region[i] == 2 * c->m->phase + 1 || i == c->m->acc_sum
           || i == c->m->acc_max
           || (in->op == KOP_ACC_RESULT && in->a == c->m->acc_sum);
}

static int
online_expand(tc_kbuf *t, const tc_kinst *in, const int *map, void *ctx)
{
    const online_ctx *c = ctx;
    int i = (int)(in - c->k->insts);
    if (in->op == KOP_ACC_RESULT) {
        return put_sum_result(t, c->m, map);
    }
    if (i != c->m->acc_max) {
        return -1;
    }
    int r = tc_kbuf_put(t, KOP_ACC, in->dtype, -1, -1, -1);
    if (!t->failed) {
        t->v[r].imm.i = TC_ACC_SOFTMAX;
    }
    return r;
}

/* k rewritten, then the sum's phase (now an empty body) dropped. */
static int
apply(tc_kernel *k, const int *region, const online_match *m)
{
    online_ctx c = {k, region, m};
    if (tc_kernel_rewrite(k, online_wanted, online_expand, &c) < 0) {
        return -1;
    }
    for (int p = m->phase; p + 1 < k->nphases; p++) {
        k->phases[p] = k->phases[p + 1];
    }
    k->nphases--;
    return 0;
}

/* One rewrite (apply != 0) or only the search: 1 found (and done), 0
 * none found, -1 out of memory. */
static int
online_once(tc_kernel *k, int do_apply)
{
    int n = k->ninsts;
    int *region = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    int *vn = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (region == NULL || vn == NULL) {
        free(region);
        free(vn);
        return -1;
    }
    tc_kernel_regions(k, region);
    tc_kernel_body_value_numbers(k, region, vn);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        online_match m;
        if (k->insts[i].op == KOP_ACC && match_sum(k, region, vn, i, &m)) {
            rc = do_apply && apply(k, region, &m) < 0 ? -1 : 1;
        }
    }
    free(region);
    free(vn);
    return rc;
}

static int
eligible(const tc_kernel *k)
{
    return k->nphases >= 2 && k->red_numel > 0
           && !tc_kernel_writes_its_input(k);
}

int
tc_kernel_online_softmax(tc_kernel *k)
{
    if (!eligible(k)) {
        return 0;
    }
    int removed = 0;
    for (;;) {
        int rc = online_once(k, 1);
        if (rc <= 0) {
            return rc < 0 ? -1 : removed;
        }
        removed++;
    }
}

int
tc_kernel_online_applies(const tc_kernel *k)
{
    /* the search only reads k (the cast is for online_once's shared
     * signature) */
    return eligible(k) && online_once((tc_kernel *)k, 0) == 1;
}

void
tc_kernel_online_note(void)
{
    __atomic_add_fetch(&online_kernels, 1, __ATOMIC_RELAXED);
}
