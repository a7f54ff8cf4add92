/* tunetable.h - max-autotune's lookup table on disk (docs/autotune.md).
 *
 * A backend that timed candidate configurations of a plan stores the
 * winner as a short text under <cache dir>/autotune/<target>-<key>, key a
 * stable hash of the plan's kernels (their KIR text, sizes included: not
 * pointers) and of what else the code depends on (compile flags).  A later
 * compile of the same kernels, in this process or another, reads it and
 * does not tune again.  One file per entry, written to a temporary name
 * and renamed: concurrent processes never see half a file.
 */
#ifndef TCJIT_TUNETABLE_H
#define TCJIT_TUNETABLE_H

#include <stdint.h>
#include "../graph/schedule.h"

/* The cache directory: $TCJIT_CACHE_DIR, else ~/.cache/tcjit (malloc'd;
 * NULL when neither can be found or out of memory).  Read on every call:
 * tests point it at a temporary directory. */
char *tc_cache_dir(void);

/* Seconds on a monotonic clock (timing candidates). */
double tc_tune_now(void);

/* 64-bit FNV-1a of s, continuing from h (start with TC_HASH_INIT). */
#define TC_HASH_INIT 0xcbf29ce484222325ULL
uint64_t tc_hash_text(uint64_t h, const char *s);

/* The key of plan's kernels for a target: the hash of target_desc (what
 * else the code depends on: flags, thread count, compute capability) and
 * of every kernel's KIR text and arguments (buffers, dtypes, strides,
 * offsets). */
uint64_t tc_tune_plan_key(const tc_plan *plan, const char *target_desc);

/* Bytes of every buffer that plan's kernels touch, for timing them on
 * scratch memory: bytes[b] (0: no kernel reads or writes buffer b), 64
 * bytes of slack included.  0, or -1 for a layout this does not measure
 * (a negative stride). */
int tc_tune_buffer_bytes(const tc_plan *plan, int64_t *bytes);

/* The stored text for (target, key) (malloc'd), or NULL: none. */
char *tc_tune_lookup(const char *target, uint64_t key);

/* Store text for (target, key).  0, or -1 when it could not be written
 * (the tuning result is then only used by this compile). */
int tc_tune_store(const char *target, uint64_t key, const char *text);

/* Counters for tcjit.counters(): plans tuned (autotune_runs), plans whose
 * configuration came from the table (autotune_hits), seconds spent
 * timing candidates (the backends add to them; tcjit.reset() clears). */
typedef struct {
    long runs, hits;
    double seconds;
} tc_tune_stats;

extern tc_tune_stats tc_tune_counters;

#endif
