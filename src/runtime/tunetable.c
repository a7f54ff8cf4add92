/* tunetable.c - max-autotune's table on disk (tunetable.h). */
#include "tunetable.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

tc_tune_stats tc_tune_counters;

char *
tc_cache_dir(void)
{
    const char *d = getenv("TCJIT_CACHE_DIR");
    if (d != NULL && d[0] != '\0') {
        return strdup(d);
    }
    /* the root python/tcjit/_cache.py's default_dir() puts kernels/ in */
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int use_xdg = xdg != NULL && xdg[0] != '\0';
    if (!use_xdg && (home == NULL || home[0] == '\0')) {
        return NULL;
    }
    const char *base = use_xdg ? xdg : home;
    size_t n = strlen(base) + sizeof("/.cache/tcjit");
    char *r = malloc(n);
    if (r != NULL) {
        snprintf(r, n, use_xdg ? "%s/tcjit" : "%s/.cache/tcjit", base);
    }
    return r;
}

double
tc_tune_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

uint64_t
tc_hash_text(uint64_t h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return h;
}

uint64_t
tc_tune_plan_key(const tc_plan *plan, const char *target_desc)
{
    char buf[128];
    uint64_t h = tc_hash_text(TC_HASH_INIT, "autotune-v1 ");
    h = tc_hash_text(h, target_desc);
    for (int i = 0; i < plan->nkernels; i++) {
        const tc_kernel *k = &plan->kernels[i];
        char *text = tc_kernel_format(k);
        h = tc_hash_text(h, text ? text : "?");
        free(text);
        for (int a = 0; a < k->nargs; a++) {
            const tc_karg *ka = &k->args[a];
            snprintf(buf, sizeof(buf), "|%d %d %d %lld", ka->buffer,
                     (int)ka->dtype, ka->is_output, (long long)ka->offset);
            h = tc_hash_text(h, buf);
            for (int d = 0; d < k->ndim + k->nred; d++) {
                snprintf(buf, sizeof(buf), ",%lld",
                         (long long)ka->strides[d]);
                h = tc_hash_text(h, buf);
            }
        }
    }
    return h;
}

int
tc_tune_buffer_bytes(const tc_plan *plan, int64_t *bytes)
{
    memset(bytes, 0, sizeof(int64_t) * (size_t)plan->nbuffers);
    for (int i = 0; i < plan->nkernels; i++) {
        const tc_kernel *k = &plan->kernels[i];
        for (int a = 0; a < k->nargs; a++) {
            const tc_karg *ka = &k->args[a];
            if (ka->buffer < 0) {
                continue;
            }
            int64_t last = ka->offset;
            for (int d = 0; d < k->ndim + k->nred; d++) {
                if (ka->strides[d] < 0 || last < 0) {
                    return -1;
                }
                if (k->sizes[d] > 0) {
                    last += (k->sizes[d] - 1) * ka->strides[d];
                }
            }
            int64_t n = (last + 1) * (int64_t)tc_dtype_size(ka->dtype) + 64;
            if (n > bytes[ka->buffer]) {
                bytes[ka->buffer] = n;
            }
        }
    }
    return 0;
}

/* mkdir -p of dir's components.  0, or -1. */
static int
make_dirs(char *dir)
{
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') {
            continue;
        }
        *p = '\0';
        int rc = mkdir(dir, 0755);
        *p = '/';
        if (rc < 0 && errno != EEXIST) {
            return -1;
        }
    }
    return mkdir(dir, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* <cache>/autotune, malloc'd, or NULL. */
static char *
table_dir(void)
{
    char *base = tc_cache_dir();
    if (base == NULL) {
        return NULL;
    }
    size_t n = strlen(base) + sizeof("/autotune");
    char *r = malloc(n);
    if (r != NULL) {
        snprintf(r, n, "%s/autotune", base);
    }
    free(base);
    return r;
}

char *
tc_tune_lookup(const char *target, uint64_t key)
{
    char *dir = table_dir();
    if (dir == NULL) {
        return NULL;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s-%016llx", dir, target,
             (unsigned long long)key);
    free(dir);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return NULL;
    }
    char *text = calloc(1, 4096);
    size_t got = text ? fread(text, 1, 4095, f) : 0;
    fclose(f);
    if (text != NULL && got == 0) {
        free(text);
        return NULL;
    }
    return text;
}

int
tc_tune_store(const char *target, uint64_t key, const char *text)
{
    char *dir = table_dir();
    if (dir == NULL || make_dirs(dir) < 0) {
        free(dir);
        return -1;
    }
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s/%s-%016llx", dir, target,
             (unsigned long long)key);
    snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
    free(dir);
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        return -1;
    }
    int ok = fputs(text, f) >= 0;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path) < 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}
