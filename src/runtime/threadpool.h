/* threadpool.h - a persistent pthread pool for splitting kernels.
 *
 * libgccjit cannot emit OpenMP, so the runtime splits a kernel's outermost
 * loop dimension itself.  Workers are started lazily on the first parallel
 * call (importing tcjit must not spawn threads) and then sleep on a condition
 * variable between calls.  The calling thread always takes part, so a pool
 * of N threads runs N - 1 workers.
 */
#ifndef TCJIT_THREADPOOL_H
#define TCJIT_THREADPOOL_H

#include <stdint.h>

/* Runs fn(ctx, begin, end) over disjoint chunks covering [0, n).  Chunks are
 * at least grain long (except the last).  Falls back to a serial call when
 * the pool is busy (nested or concurrent callers) or has one thread. */
typedef void (*tc_task_fn)(void *ctx, int64_t begin, int64_t end);
void tc_threadpool_parallel_for(int64_t n, int64_t grain, tc_task_fn fn,
                                void *ctx);

/* Number of threads (caller included).  n <= 0 restores the default, the
 * online CPU count.  Running workers are stopped; new ones start lazily. */
void tc_threadpool_set_threads(int n);
int tc_threadpool_get_threads(void);

/* Spinning workers go to sleep now instead of at the end of their spin:
 * called before torch itself computes (an extern step), whose OpenMP
 * threads need the cores.  The next parallel_for wakes them as usual. */
void tc_threadpool_park(void);

/* Stops and joins the workers (tests, interpreter shutdown). */
void tc_threadpool_shutdown(void);

#endif
