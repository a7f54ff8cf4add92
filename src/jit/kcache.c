/* kcache.c - CPU kernels in the on-disk cache (../runtime/diskcache.h).
 *
 * One gccjit context (the kernels of one kind of a plan, gccjit_emit.c)
 * is one cache entry: the shared object gcc links, stored as the entry's
 * payload and loaded from memory with dlopen.  Its key hashes everything
 * the machine code depends on and nothing else:
 *   - the build of tcjit (its GNU build-id: the emitter, the KIR
 *     decompositions and the flags are compiled in, and any rebuild gets
 *     fresh keys) and libgccjit's version;
 *   - the target: the -march cpu.c chose, the context kind (its options),
 *     max-autotune's reduction-schedule variant (gccjit_emit.c);
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
#include <elf.h>
#include <link.h>
#include <libgccjit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0"
#endif

/* The identity of this build of tcjit: the GNU build-id note the linker
 * put into the object holding this code (a hash of everything linked:
 * emitter, decompositions, flags), else the object file's size, mtime and
 * inode.  Any rebuild changes it, so no entry made by other code is ever
 * loaded. */
typedef struct {
    const void *addr;
    tc_hash *h;
    int found;
} build_search;

static int
find_build_id(struct dl_phdr_info *info, size_t size, void *p)
{
    build_search *bs = p;
    (void)size;
    uintptr_t a = (uintptr_t)bs->addr;
    int mine = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && a >= lo && a < lo + ph->p_memsz) {
            mine = 1;
        }
    }
    if (!mine) {
        return 0;
    }
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) {
            continue;
        }
        const char *n = (const char *)(info->dlpi_addr + ph->p_vaddr);
        const char *end = n + ph->p_memsz;
        while (n + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)n;
            const char *name = n + sizeof(*nh);
            const char *desc = name + ((nh->n_namesz + 3) & ~3u);
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4
                && memcmp(name, "GNU", 4) == 0
                && desc + nh->n_descsz <= end) {
                tc_hash_add(bs->h, desc, nh->n_descsz);
                bs->found = 1;
                return 1;
            }
            n = desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
    return 1;
}

static void
hash_build(tc_hash *h)
{
    build_search bs = {(const void *)hash_build, h, 0};
    dl_iterate_phdr(find_build_id, &bs);
    if (!bs.found) {
        Dl_info info;
        struct stat st;
        if (dladdr((const void *)hash_build, &info) != 0
            && info.dli_fname != NULL && stat(info.dli_fname, &st) == 0) {
            tc_hash_i64(h, (int64_t)st.st_size);
            tc_hash_i64(h, (int64_t)st.st_mtime);
            tc_hash_i64(h, (int64_t)st.st_ino);
        }
    }
}

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
              int n, int kind, int variant, char *key)
{
    tc_hash h;
    tc_hash_init(&h);
    tc_hash_str(&h, "tcjit-cpu-kernels " PACKAGE_VERSION);
    hash_build(&h);
    tc_hash_i64(&h, gcc_jit_version_major());
    tc_hash_i64(&h, gcc_jit_version_minor());
    tc_hash_i64(&h, gcc_jit_version_patchlevel());
    tc_hash_str(&h, tc_cpu_march());
    tc_hash_i64(&h, kind);
    tc_hash_i64(&h, variant);    /* max-autotune's reduction schedule */
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
