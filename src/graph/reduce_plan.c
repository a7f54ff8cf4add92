/* reduce_plan.c - accumulator semantics and the reduction schedule
 * (reduce_plan.h): the one place either is decided; the CPU and PTX
 * emitters render the result.
 */
#include <math.h>
#include <string.h>

#include "reduce_plan.h"

/* ---- accumulator semantics ---------------------------------------------- */

const tc_acc_sem tc_acc_sems[TC_ACC_NKINDS] = {
    [TC_ACC_SUM] = {TC_ACC_ID_ZERO, KOP_ADD, KOP_OR, 0, 0},
    [TC_ACC_PROD] = {TC_ACC_ID_ONE, KOP_MUL, KOP_AND, 0, 0},
    [TC_ACC_MAX] = {TC_ACC_ID_LOWEST, KOP_MAX, KOP_OR, 0, 0},
    [TC_ACC_MIN] = {TC_ACC_ID_HIGHEST, KOP_MIN, KOP_AND, 0, 0},
    [TC_ACC_ARGMAX] = {TC_ACC_ID_LOWEST, KOP_MAX, KOP_OR, 1, 1},
    [TC_ACC_ARGMIN] = {TC_ACC_ID_HIGHEST, KOP_MIN, KOP_AND, 1, 0},
    [TC_ACC_ANY] = {TC_ACC_ID_ZERO, KOP_OR, KOP_OR, 0, 0},
    [TC_ACC_ALL] = {TC_ACC_ID_ONE, KOP_AND, KOP_AND, 0, 0},
    [TC_ACC_SOFTMAX] = {TC_ACC_ID_LOWEST, KOP_MAX, KOP_OR, 0, 0, 1},
};

int
tc_acc_components(tc_acc_kind kind)
{
    return tc_acc_sems[kind].has_index || tc_acc_sems[kind].online ? 2 : 1;
}

tc_dtype
tc_acc_component_dtype(tc_acc_kind kind, tc_dtype dt, int c)
{
    return c == 0 || tc_acc_sems[kind].online ? dt : TC_I64;
}

tc_kop
tc_acc_value_op(tc_acc_kind kind, tc_dtype dt)
{
    const tc_acc_sem *s = &tc_acc_sems[kind];
    return dt == TC_BOOL ? s->bool_op : s->value_op;
}

void
tc_acc_identity(tc_acc_kind kind, tc_dtype dt, double *f, int64_t *i)
{
    tc_acc_identity_kind id = tc_acc_sems[kind].identity;
    int hi = id == TC_ACC_ID_HIGHEST;
    *f = id == TC_ACC_ID_ONE;
    *i = id == TC_ACC_ID_ONE;
    if (id != TC_ACC_ID_LOWEST && !hi) {
        return;
    }
    *f = hi ? INFINITY : -INFINITY;
    switch (dt) {
    case TC_BOOL:
        *i = hi;
        break;
    case TC_U8:
        *i = hi ? UINT8_MAX : 0;
        break;
    case TC_I8:
        *i = hi ? INT8_MAX : INT8_MIN;
        break;
    case TC_I16:
        *i = hi ? INT16_MAX : INT16_MIN;
        break;
    case TC_I32:
        *i = hi ? INT32_MAX : INT32_MIN;
        break;
    default:
        *i = hi ? INT64_MAX : INT64_MIN;
        break;
    }
}

int
tc_acc_cascaded(tc_acc_kind kind, tc_dtype dt)
{
    return kind == TC_ACC_SUM && (dt == TC_F32 || dt == TC_F64);
}

/* ---- the schedule -------------------------------------------------------- */

static int64_t
cdiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static int64_t
min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Threads per row on a cross_thread target: a single row gets the
 * largest block (it is the whole device); rows that stay persistent with
 * twice block_rows threads but not with block_rows get that; else
 * enough warps for the row, at most block_rows, and when the rows are
 * many (rows_busy), enough for row_points points each: a block's
 * combine waits for all its threads, so smaller blocks keep more rows in
 * flight. */
static int
row_threads(const tc_kernel *k, const tc_red_target *t)
{
    if (k->numel == 1) {
        return t->block_one_row;
    }
    int64_t per = (int64_t)t->block_rows * t->persist_points;
    if (k->red_numel > per && k->red_numel <= 2 * per) {
        return 2 * t->block_rows;
    }
    int64_t n = k->red_numel;
    if (t->row_points > 0 && k->numel >= t->rows_busy) {
        n = cdiv(n, t->row_points);
    }
    int64_t b = cdiv(n, t->warp) * t->warp;
    return b < t->warp ? t->warp : b > t->block_rows ? t->block_rows : (int)b;
}

/* Points per thread of a persistent row, or 0 for a looped one: at most
 * persist_points per thread (persist_points_big with block_one_row
 * threads, where a thread gets fewer registers), and the unrolled bodies
 * within persist_budget instructions. */
static int
persist_points(const tc_kernel *k, const tc_red_target *t, int threads)
{
    if (k->red_numel <= 0 || t->persist_points <= 0) {
        return 0;
    }
    int64_t npts = cdiv(k->red_numel, threads);
    for (int64_t p2 = 1; t->persist_pow2; p2 *= 2) {
        if (p2 >= npts) {
            npts = p2;
            break;
        }
    }
    int64_t body = 0;
    for (int p = 0; p < k->nphases; p++) {
        body += k->phases[p].end - k->phases[p].begin;
    }
    int cap = threads >= t->block_one_row ? t->persist_points_big
                                          : t->persist_points;
    if (npts > cap || npts * body > t->persist_budget) {
        return 0;
    }
    return (int)npts;
}

/* Does the kernel store anything before phase 0's accumulators are
 * complete (its first pre region or body)? */
static int
stores_before_combine(const tc_kernel *k)
{
    for (int i = 0; i < k->phases[0].end; i++) {
        if (k->insts[i].op == KOP_STORE) {
            return 1;
        }
    }
    return 0;
}

static int
has_online_acc(const tc_kernel *k)
{
    for (int i = 0; i < k->ninsts; i++) {
        const tc_kinst *in = &k->insts[i];
        if (in->op == KOP_ACC && tc_acc_sems[in->imm.i].online) {
            return 1;
        }
    }
    return 0;
}

/* Chunks per row (reduce_plan.h "Split rows"): rows few and long enough;
 * each chunk at least split_chunk points (the last range may be shorter),
 * at most split_max_chunks of them (and split_fill / rows).  0: none. */
static int64_t
split_rows(const tc_kernel *k, int64_t red_outer, const tc_red_target *t,
           int64_t *chunk_rows)
{
    *chunk_rows = 0;
    if (k->numel < 1 || k->numel > t->split_max_rows
        || k->red_numel < t->split_min_points) {
        return 1;
    }
    if ((!t->split_any_kernel || t->cross_thread)
        && (k->nphases != 1 || stores_before_combine(k))) {
        return 1;
    }
    if (has_online_acc(k)) {
        return 1;
    }
    int64_t cap = t->split_max_chunks;
    if (t->split_fill > 0) {
        cap = min64(cap, cdiv(t->split_fill, k->numel));
    }
    int64_t n;
    if (t->split_outer_dim) {
        int64_t inner = k->red_numel / red_outer;
        int64_t rows = cdiv(t->split_chunk, inner);
        if (cdiv(red_outer, rows) > cap) {
            rows = cdiv(red_outer, cap);
        }
        n = cdiv(red_outer, rows);
        *chunk_rows = rows;
    }
    else {
        n = min64(k->red_numel / t->split_chunk, cap);
    }
    if (n < t->split_min_chunks) {
        *chunk_rows = 0;
        return 1;
    }
    return n;
}

/* Accumulator sets of phase p: one vector's worth of independent chains
 * for light bodies (more over long rows, where the chain is the limit),
 * fewer for heavy ones (register pressure; the body's own work hides the
 * latency); one set for a phase without accumulators, for rows too short
 * to fill them (sets_min_points), and at most one per persistent point. */
static int
phase_sets(const tc_kernel *k, const tc_red_target *t, int p, int persist)
{
    int pre = p == 0 ? 0 : k->phases[p - 1].end, nacc = 0;
    for (int i = pre; i < k->phases[p].begin; i++) {
        nacc += k->insts[i].op == KOP_ACC;
    }
    if (nacc == 0) {
        return 1;
    }
    int body = k->phases[p].end - k->phases[p].begin;
    int64_t row = k->nred > 0 ? k->sizes[k->ndim + k->nred - 1] : 0;
    int s = body > t->heavy_body ? t->sets_heavy
            : row >= t->long_row ? t->sets_long
                                 : t->sets;
    if (t->sets_min_points > 0
        && k->red_numel < (int64_t)t->sets_min_points * s) {
        s = 1;
    }
    if (persist > 0 && persist < s) {
        s = persist;
    }
    return s;
}

/* Cascade levels above nl partial sums so that no level adds more than
 * about fan values per partial sum: n points. */
static int
cascade_levels(int64_t n, int nl, int fan)
{
    if (fan <= 1) {
        return 0;
    }
    int64_t per_set = cdiv(n, nl), span = fan;
    int k = 0;
    while (span < per_set && k < TC_RED_MAX_LEVELS) {
        span *= fan;
        k++;
    }
    return k;
}

static int
phase_cascaded(const tc_kernel *k, int p)
{
    int pre = p == 0 ? 0 : k->phases[p - 1].end;
    for (int i = pre; i < k->phases[p].begin; i++) {
        const tc_kinst *in = &k->insts[i];
        if (in->op == KOP_ACC
            && tc_acc_cascaded((tc_acc_kind)in->imm.i, in->dtype)) {
            return 1;
        }
    }
    return 0;
}

int
tc_red_schedule(const tc_kernel *k, int64_t red_outer,
                const tc_red_target *t, tc_red_plan *p)
{
    memset(p, 0, sizeof(*p));
    if (k->nphases < 1 || k->nphases > TC_KIR_MAX_PHASES || k->nred < 0
        || k->ndim < 0 || k->ndim + k->nred > TC_MAX_DIMS) {
        return -1;
    }
    for (int ph = 0; ph < k->nphases; ph++) {
        int pre = ph == 0 ? 0 : k->phases[ph - 1].end;
        const tc_kphase *kp = &k->phases[ph];
        if (kp->begin < pre || kp->end < kp->begin || kp->end > k->ninsts) {
            return -1;
        }
    }
    if (red_outer <= 0) {
        red_outer = k->nred > 0 ? k->sizes[k->ndim] : 1;
    }
    if (red_outer <= 0) {
        red_outer = 1;
    }
    p->nsplit = split_rows(k, red_outer, t, &p->chunk_rows);
    p->threads = 1;
    if (t->cross_thread) {
        if (p->nsplit > 1) {
            p->threads = t->block_rows;
            int64_t fb = cdiv(p->nsplit, t->warp) * t->warp;
            p->final_threads = (int)min64(fb, t->block_rows);
        }
        else {
            p->threads = row_threads(k, t);
            p->persist = persist_points(k, t, p->threads);
        }
    }
    if (p->nsplit <= 1) {
        p->passes[p->npasses++] = (tc_red_pass){TC_RED_PASS_ROWS, 0};
    }
    else {
        int nsplit_phases = t->cross_thread ? 1 : k->nphases;
        for (int ph = 0; ph < nsplit_phases; ph++) {
            p->passes[p->npasses++] = (tc_red_pass){TC_RED_PASS_PARTIAL, ph};
            if (!t->cross_thread) {
                p->passes[p->npasses++] =
                    (tc_red_pass){TC_RED_PASS_COMBINE, ph};
            }
        }
        p->passes[p->npasses++] = (tc_red_pass){TC_RED_PASS_FINAL, 0};
    }
    int64_t chunk_points = p->chunk_rows * (k->red_numel / red_outer);
    for (int ph = 0; ph < k->nphases; ph++) {
        p->sets[ph] = phase_sets(k, t, ph, p->persist);
        if (phase_cascaded(k, ph)) {
            p->levels[ph] = cascade_levels(k->red_numel, p->sets[ph],
                                           t->fsum_fan);
            p->levels_chunk[ph] = cascade_levels(chunk_points, p->sets[ph],
                                                 t->fsum_fan);
        }
    }
    return 0;
}

int64_t
tc_red_scratch_layout(const tc_kernel *k, const tc_red_plan *p, int64_t *slot)
{
    int64_t per = k->numel * p->nsplit, total = 0;
    for (int i = 0; i < k->ninsts; i++) {
        const tc_kinst *in = &k->insts[i];
        if (in->op != KOP_ACC) {
            continue;
        }
        if (slot != NULL) {
            slot[i] = total;
        }
        total += per * tc_acc_components((tc_acc_kind)in->imm.i);
    }
    return total;
}

int
tc_red_wants_online(const tc_kernel *k, const tc_red_target *t,
                    const tc_red_plan *p)
{
    if (k->nphases < 2 || t->online == 0 || p->nsplit > 1) {
        return 0;
    }
    return t->online == 2 || p->persist == 0;
}
