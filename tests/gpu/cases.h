/* cases.h - kernel plans shared by tests/gpu/test_ptx.c (ptxas checks, no
 * GPU) and tests/gpu/harness.c (runs on the GPU, compares with the KIR
 * reference interpreter kir_ref.c).  Plans come from the real graph layer
 * (tc_graph_* + tc_schedule) and from hand-built KIR for shapes the
 * scheduler does not produce on small inputs (64-bit indexing). */
#ifndef TCJIT_TEST_GPU_CASES_H
#define TCJIT_TEST_GPU_CASES_H

#include "graph.h"
#include "kir.h"
#include "schedule.h"

typedef struct {
    const char *name;
    tc_plan *(*build)(char *err, size_t errlen);
    int run_on_device;     /* 0: PTX-only (e.g. > 4 GB of buffers) */
} tc_gpu_case;

extern const tc_gpu_case tc_gpu_cases[];
extern const int tc_gpu_ncases;

/* The 16M-element f32 chain ((sin(x) + cos(y)).relu() * 2 + 1) used for
 * the bandwidth figure. */
tc_plan *tc_gpu_case_chain(int64_t n, char *err, size_t errlen);

/* sin, cos, exp, log, tanh of one float32 input of n elements (five
 * outputs): harness.c checks them bit for bit against f32math_ref.c. */
tc_plan *tc_gpu_case_f32_unary5(int64_t n, char *err, size_t errlen);

/* sin and cos of one float64 input of n elements (two outputs):
 * test_ptx.c checks their decomposition against long double libm over
 * every exponent, harness.c the device against libm. */
tc_plan *tc_gpu_case_f64_trig(int64_t n, char *err, size_t errlen);

/* y = sin(x) (is_cos: cos) of n doubles against long double libm (glibc
 * reduces those exactly): finite x within TC_TRIG64_TOL (the goal is
 * 1e-12; torch's float64 atol is 1e-7), inf / nan give nan.  Prints the
 * max error and the first failures under the name what; returns the
 * number of failures. */
#define TC_TRIG64_TOL 1e-13
int64_t tc_trig64_check(const char *what, const double *x, const double *y,
                        int64_t n, int is_cos);

/* f32math_ref.c: CPU mirror of the PTX float32 transcendentals
 * (tc_ptx_f32_unary); tc_f32m_check(0) prints sampled ulp errors vs double
 * libm and returns the number of failing functions. */
float tc_ref_sincosf(float x, int is_cos);
float tc_ref_expf(float x);
float tc_ref_logf(float x);
float tc_ref_tanhf(float x);
int tc_f32m_check(int exhaustive);

/* kir_ref.c: runs plan on the CPU over host buffers bufs[nbuffers]
 * (inputs filled, others allocated with the buffer's span).  Sequential,
 * float32 in float, libm transcendentals.  Returns 0 or -1. */
int tc_kir_ref_run(const tc_plan *p, void **bufs, char *err, size_t errlen);

/* Elements a buffer layout spans. */
int64_t tc_test_span(const tc_layout *l);

#endif
