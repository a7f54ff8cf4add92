/* tunetable.c - max-autotune's table on disk (tunetable.h). */
#include "tunetable.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

tc_tune_stats tc_tune_counters;

char *
tc_cache_dir(void)
{
    const char *d = getenv("TCJIT_CACHE_DIR");
    if (d != NULL && d[0] != '\0') {
        return strdup(d);
    }
    const char *home = getenv("HOME");
    if (home == NULL || home[0] == '\0') {
        return NULL;
    }
    size_t n = strlen(home) + sizeof("/.cache/tcjit");
    char *r = malloc(n);
    if (r != NULL) {
        snprintf(r, n, "%s/.cache/tcjit", home);
    }
    return r;
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
