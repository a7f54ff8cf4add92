/* kcache.c - CPU kernels in the on-disk cache (../runtime/diskcache.h).
 *
 * One gccjit context (the kernels of one kind of a plan, gccjit_emit.c)
 * is one cache entry: the shared object gcc links, stored as the entry's
 * payload and loaded from memory with dlopen.  Its key hashes everything
 * the machine code depends on and nothing else:
 *   - the build of tcjit (the emitter's code and flags are compiled in:
 *     any rebuild gets fresh keys) and libgccjit's version;
 *   - the target: the -march cpu.c chose, the context kind (its options);
 *   - per kernel compiled in the context: its index (functions are named
 *     tc_k<i>), whether it is size-generic, and its KIR -- loop sizes,
 *     arguments (buffer slot, dtype, strides, offset, output or not),
 *     instructions with their constants, reduction phases.
 * Tensors' data never enters a kernel: parameters are graph inputs read
 * through args[], so changed parameter values hit the same entry and
 * compute with the new values.  Python scalars the tracer specialized are
 * KOP_CONST immediates, hence part of the key.  No pointer is hashed.
 */
#define _GNU_SOURCE
#include "jit_internal.h"
#include "../runtime/diskcache.h"

#include <dlfcn.h>
#include <libgccjit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0"
#endif

static void
hash_kernel(tc_hash *h, const tc_kernel *k)
{
    int nd = k->ndim + k->nred;
    tc_hash_i64(h, k->ndim);
    tc_hash_i64(h, k->nred);
    for (int d = 0; d < nd; d++) {
        tc_hash_i64(h, k->sizes[d]);
    }
    tc_hash_i64(h, k->numel);
    tc_hash_i64(h, k->red_numel);
    tc_hash_i64(h, k->nargs);
    for (int a = 0; a < k->nargs; a++) {
        const tc_karg *g = &k->args[a];
        tc_hash_i64(h, g->buffer);
        tc_hash_i64(h, g->dtype);
        tc_hash_i64(h, g->is_output);
        tc_hash_i64(h, g->offset);
        for (int d = 0; d < nd; d++) {
            tc_hash_i64(h, g->strides[d]);
        }
    }
    tc_hash_i64(h, k->ninsts);
    for (int i = 0; i < k->ninsts; i++) {
        const tc_kinst *in = &k->insts[i];
        int64_t f[6] = {in->op, in->dtype, in->a, in->b, in->c, in->arg};
        tc_hash_add(h, f, sizeof(f));
        tc_hash_i64(h, in->imm.i);   /* the bits, for float constants too */
    }
    tc_hash_i64(h, k->nphases);
    for (int p = 0; p < k->nphases && p < TC_KIR_MAX_PHASES; p++) {
        tc_hash_i64(h, k->phases[p].begin);
        tc_hash_i64(h, k->phases[p].end);
    }
}

void
tc_kcache_key(const tc_plan *plan, const tc_jit_code *code, const int *idx,
              int n, int kind, char *key)
{
    tc_hash h;
    tc_hash_init(&h);
    tc_hash_str(&h, "tcjit-cpu-kernels " PACKAGE_VERSION " " __DATE__
                    " " __TIME__);
    tc_hash_i64(&h, gcc_jit_version_major());
    tc_hash_i64(&h, gcc_jit_version_minor());
    tc_hash_i64(&h, gcc_jit_version_patchlevel());
    tc_hash_str(&h, tc_cpu_march());
    tc_hash_i64(&h, kind);
    tc_hash_i64(&h, n);
    for (int j = 0; j < n; j++) {
        int i = idx[j];
        tc_hash_i64(&h, i);
        tc_hash_i64(&h, code->dims != NULL && code->dims[i] != NULL);
        hash_kernel(&h, &plan->kernels[i]);
    }
    tc_hash_hex(&h, key);
}

void *
tc_kcache_load(const char *key, char *err, size_t errlen)
{
    void *data = NULL;
    size_t len = 0;
    if (!tc_diskcache_get("cpu", key, &data, &len)) {
        return NULL;
    }
    void *lib = tc_dl_open_bytes(data, len, err, errlen);
    free(data);
    if (lib == NULL) {
        tc_diskcache_log("cpu-%s: cannot load (%s), recompiling", key, err);
    }
    return lib;
}

void *
tc_kcache_install(const char *key, const char *path, char *err,
                  size_t errlen)
{
    size_t len = 0;
    void *data = tc_read_file(path, &len);
    if (data == NULL) {
        snprintf(err, errlen, "compiled kernels missing (%s)", path);
        return NULL;
    }
    if (key != NULL && tc_diskcache_put("cpu", key, data, len) < 0) {
        tc_diskcache_log("cpu-%s: not written (cache directory not "
                         "writable?)", key);
    }
    void *lib = tc_dl_open_bytes(data, len, err, errlen);
    free(data);
    return lib;
}

void *
tc_kcache_sym(void *lib, const char *name)
{
    return dlsym(lib, name);
}

void
tc_kcache_close(void *lib)
{
    if (lib != NULL) {
        dlclose(lib);
    }
}
