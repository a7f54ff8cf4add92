/* threadpool.c - persistent pthread pool (see threadpool.h).
 *
 * One job runs at a time.  A job is published under the pool mutex with a
 * new generation number; workers wake, grab chunks from an atomic counter
 * until none are left, and the last one to finish signals the caller, which
 * has been grabbing chunks too.  Between jobs workers sleep on a condition
 * variable, so an idle pool costs nothing -- after spinning for TC_SPIN_NS
 * first: a sleep/wake round trip costs tens of microseconds here, more than
 * a whole 1M-element reduction, and kernels of one graph come back to back
 * (OpenMP, which eager torch uses, spins the same way).  The caller spins
 * as long for the workers to finish before it sleeps.
 */
#define _GNU_SOURCE 1 /* dl_iterate_phdr, RTLD_NOLOAD */
#include "threadpool.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define TC_SPIN_NS 100000

static int64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void
cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

typedef struct {
    tc_task_fn fn;
    void *ctx;
    int64_t n, chunk;
    atomic_llong next;          /* next chunk start */
    atomic_int active;          /* participants still working */
} job_t;

static struct {
    pthread_mutex_t mu;         /* guards everything but the job counters */
    pthread_cond_t wake;        /* workers: a job or a stop request */
    pthread_cond_t done;        /* caller: all participants finished */
    pthread_mutex_t busy;       /* held by the one running parallel_for */
    pthread_t *workers;
    int nworkers;               /* started workers */
    int want;                   /* configured threads, 0 = default */
    int stop;                   /* also read without mu (atomics) */
    int park;                   /* spinning workers should sleep now */
    unsigned long generation;   /* written under mu, read atomically */
    unsigned long start_generation; /* generation when workers started */
    job_t job;
} pool = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
    .busy = PTHREAD_MUTEX_INITIALIZER,
};

static int
default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int
tc_threadpool_get_threads(void)
{
    pthread_mutex_lock(&pool.mu);
    int n = pool.want > 0 ? pool.want : default_threads();
    pthread_mutex_unlock(&pool.mu);
    return n;
}

/* Grab chunks until the job is exhausted. */
static void
run_chunks(job_t *job)
{
    for (;;) {
        int64_t b = atomic_fetch_add(&job->next, job->chunk);
        if (b >= job->n) {
            break;
        }
        int64_t e = b + job->chunk < job->n ? b + job->chunk : job->n;
        job->fn(job->ctx, b, e);
    }
}

static void
finish_participant(void)
{
    if (atomic_fetch_sub(&pool.job.active, 1) == 1) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_signal(&pool.done);
        pthread_mutex_unlock(&pool.mu);
    }
}

/* Spins until a job newer than seen or a stop request shows up, for at
 * most TC_SPIN_NS.  Returns 1 if one did. */
static int
spin_for_job(unsigned long seen)
{
    int64_t end = now_ns() + TC_SPIN_NS;
    for (int i = 0;; i++) {
        if (__atomic_load_n(&pool.generation, __ATOMIC_ACQUIRE) != seen
            || __atomic_load_n(&pool.stop, __ATOMIC_ACQUIRE)) {
            return 1;
        }
        if (__atomic_load_n(&pool.park, __ATOMIC_RELAXED)) {
            return 0;
        }
        cpu_relax();
        if ((i & 63) == 63 && now_ns() > end) {
            return 0;
        }
    }
}

static void *
worker_main(void *unused)
{
    (void)unused;
    /* Not pool.generation: a job may have been published before this
     * thread got to run, and it must take part in that one too. */
    pthread_mutex_lock(&pool.mu);
    unsigned long seen = pool.start_generation;
    for (;;) {
        if (!pool.stop && pool.generation == seen) {
            pthread_mutex_unlock(&pool.mu);
            spin_for_job(seen);
            pthread_mutex_lock(&pool.mu);
        }
        while (!pool.stop && pool.generation == seen) {
            pthread_cond_wait(&pool.wake, &pool.mu);
        }
        if (pool.stop) {
            break;
        }
        seen = pool.generation;
        pthread_mutex_unlock(&pool.mu);
        run_chunks(&pool.job);
        finish_participant();
        pthread_mutex_lock(&pool.mu);
    }
    pthread_mutex_unlock(&pool.mu);
    return NULL;
}

/* Called with pool.busy held.  Returns the number of running workers. */
static int
ensure_started(void)
{
    if (pool.workers != NULL) {
        return pool.nworkers;
    }
    int n = (pool.want > 0 ? pool.want : default_threads()) - 1;
    if (n <= 0) {
        return 0;
    }
    pool.workers = calloc((size_t)n, sizeof(pthread_t));
    if (pool.workers == NULL) {
        return 0;
    }
    pool.stop = 0;
    pthread_mutex_lock(&pool.mu);
    pool.start_generation = pool.generation;
    pthread_mutex_unlock(&pool.mu);
    /* Workers block all signals: Python wants them on the main thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int started = 0;
    for (; started < n; started++) {
        if (pthread_create(&pool.workers[started], NULL, worker_main,
                           NULL) != 0) {
            break;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pool.nworkers = started;
    return started;
}

/* Called with pool.busy held. */
static void
stop_workers(void)
{
    if (pool.workers == NULL) {
        return;
    }
    pthread_mutex_lock(&pool.mu);
    __atomic_store_n(&pool.stop, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < pool.nworkers; i++) {
        pthread_join(pool.workers[i], NULL);
    }
    free(pool.workers);
    pool.workers = NULL;
    pool.nworkers = 0;
    pool.stop = 0;
}

/* ---- torch's OpenMP team --------------------------------------------------
 *
 * Eager torch runs its CPU ops (GEMMs above all) on an OpenMP team whose
 * workers spin for a while after each parallel region before they sleep.
 * A kernel of ours right after an extern step then had our workers
 * competing with those spinning threads for the cores: a GPT-2 block on 2
 * cores took ~25 ms where it took 23 ms with OMP_WAIT_POLICY=passive.  So
 * when the process has libgomp loaded (torch's own copy, opened RTLD_LOCAL
 * with libtorch, hence found by walking the loaded objects), parallel
 * kernels run on that team instead: the same threads, already awake, and
 * no second set of spinners.  Our pool remains for processes without it
 * (the C tests) and when TCJIT_OWN_THREADPOOL=1 is set. */

typedef void (*gomp_parallel_fn)(void (*fn)(void *), void *data,
                                 unsigned nthreads, unsigned flags);
static gomp_parallel_fn gomp_parallel;
static pthread_once_t gomp_once = PTHREAD_ONCE_INIT;

static int
find_gomp(struct dl_phdr_info *info, size_t size, void *unused)
{
    (void)size;
    (void)unused;
    const char *name = info->dlpi_name;
    if (name == NULL || strstr(name, "libgomp") == NULL) {
        return 0;
    }
    void *h = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
    if (h == NULL) {
        return 0;
    }
    /* the handle stays open: the library was loaded before and stays */
    gomp_parallel = (gomp_parallel_fn)dlsym(h, "GOMP_parallel");
    return gomp_parallel != NULL;
}

static void
resolve_gomp(void)
{
    const char *own = getenv("TCJIT_OWN_THREADPOOL");
    if (own == NULL || strcmp(own, "1") != 0) {
        dl_iterate_phdr(find_gomp, NULL);
    }
}

static void
resolve_gomp_none(void)
{
}

static void
gomp_body(void *job)
{
    run_chunks(job);
}

/* Chunks of about a quarter of a thread's share balance the load without
 * much overhead. */
static int64_t
chunk_for(int64_t n, int64_t grain, int nthreads)
{
    int64_t chunk = (n + 4 * (int64_t)nthreads - 1) / (4 * (int64_t)nthreads);
    return chunk < grain ? grain : chunk;
}

void
tc_threadpool_parallel_for(int64_t n, int64_t grain, tc_task_fn fn,
                           void *ctx)
{
    if (n <= 0) {
        return;
    }
    if (grain < 1) {
        grain = 1;
    }
    pthread_once(&gomp_once, resolve_gomp);
    if (gomp_parallel != NULL && n > grain) {
        int nt = tc_threadpool_get_threads();
        if (nt <= 1) {
            fn(ctx, 0, n);
            return;
        }
        job_t job = {.fn = fn, .ctx = ctx, .n = n,
                     .chunk = chunk_for(n, grain, nt)};
        atomic_store(&job.next, 0);
        gomp_parallel(gomp_body, &job, (unsigned)nt, 0);
        return;
    }
    /* A busy pool means a nested or concurrent call: run it here. */
    if (n <= grain || pthread_mutex_trylock(&pool.busy) != 0) {
        fn(ctx, 0, n);
        return;
    }
    int nw = ensure_started();
    if (nw == 0) {
        pthread_mutex_unlock(&pool.busy);
        fn(ctx, 0, n);
        return;
    }
    int64_t chunk = chunk_for(n, grain, nw + 1);
    pthread_mutex_lock(&pool.mu);
    pool.job.fn = fn;
    pool.job.ctx = ctx;
    pool.job.n = n;
    pool.job.chunk = chunk;
    atomic_store(&pool.job.next, 0);
    atomic_store(&pool.job.active, nw + 1);
    __atomic_store_n(&pool.park, 0, __ATOMIC_RELAXED);
    /* release: a spinning worker that sees it sees the job too */
    __atomic_store_n(&pool.generation, pool.generation + 1,
                     __ATOMIC_RELEASE);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);

    run_chunks(&pool.job);
    finish_participant();
    int64_t end = now_ns() + TC_SPIN_NS;
    for (int i = 0; atomic_load(&pool.job.active) > 0; i++) {
        cpu_relax();
        if ((i & 63) == 63 && now_ns() > end) {
            break;
        }
    }
    pthread_mutex_lock(&pool.mu);
    while (atomic_load(&pool.job.active) > 0) {
        pthread_cond_wait(&pool.done, &pool.mu);
    }
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.busy);
}

void
tc_threadpool_park(void)
{
    __atomic_store_n(&pool.park, 1, __ATOMIC_RELAXED);
}

void
tc_threadpool_set_threads(int n)
{
    pthread_mutex_lock(&pool.busy);
    stop_workers();
    pthread_mutex_lock(&pool.mu);
    pool.want = n > 0 ? n : 0;
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.busy);
}

void
tc_threadpool_shutdown(void)
{
    pthread_mutex_lock(&pool.busy);
    stop_workers();
    pthread_mutex_unlock(&pool.busy);
}

/* A forked child has no workers: forget them so they restart lazily.
 * libgomp's team does not survive a fork either (a region in the child
 * of a parent that had one hangs), so the child uses our own pool. */
static void
after_fork_child(void)
{
    gomp_parallel = NULL;
    pthread_once(&gomp_once, resolve_gomp_none);
    pthread_mutex_init(&pool.mu, NULL);
    pthread_mutex_init(&pool.busy, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    free(pool.workers);
    pool.workers = NULL;
    pool.nworkers = 0;
    pool.stop = 0;
}

__attribute__((constructor)) static void
register_fork_handler(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
}
