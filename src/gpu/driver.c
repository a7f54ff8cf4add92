/* driver.c - libcuda.so.1 through dlopen (see driver.h). */
#include "driver.h"
#include "../runtime/diskcache.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CUdevice_attribute values (cuda.h) */
#define CU_ATTR_SM_COUNT 16
#define CU_ATTR_CC_MAJOR 75
#define CU_ATTR_CC_MINOR 76
/* CUjit_option values (cuda.h) */
#define CU_JIT_INFO_LOG_BUFFER 3
#define CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES 4
#define CU_JIT_ERROR_LOG_BUFFER 5
#define CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static tc_cu_api api;
static int loaded = 0;          /* 1 ok, -1 failed for good */
static char load_err[256];

static void *
sym(void *h, const char *a, const char *b)
{
    void *p = dlsym(h, a);
    if (p == NULL && b != NULL) {
        p = dlsym(h, b);
    }
    return p;
}

const tc_cu_api *
tc_cu_load(char *err, size_t errlen)
{
    pthread_mutex_lock(&mu);
    if (loaded == 0) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            const char *d = dlerror();
            snprintf(load_err, sizeof(load_err),
                     "tcjit gpu: cannot load libcuda.so.1 (%s)",
                     d ? d : "not found");
            loaded = -1;
            goto out;
        }
#define REQ(field, name, alt)                                              \
    do {                                                                   \
        *(void **)&api.field = sym(h, name, alt);                          \
        if (api.field == NULL) {                                           \
            snprintf(load_err, sizeof(load_err),                           \
                     "tcjit gpu: libcuda.so.1 lacks %s", name);            \
            loaded = -1;                                                   \
            goto out;                                                      \
        }                                                                  \
    } while (0)
#define OPT(field, name, alt) (*(void **)&api.field = sym(h, name, alt))
        REQ(cuInit, "cuInit", NULL);
        REQ(cuDeviceGet, "cuDeviceGet", NULL);
        REQ(cuDeviceGetAttribute, "cuDeviceGetAttribute", NULL);
        REQ(cuCtxGetCurrent, "cuCtxGetCurrent", NULL);
        REQ(cuCtxSetCurrent, "cuCtxSetCurrent", NULL);
        REQ(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL);
        REQ(cuModuleLoadDataEx, "cuModuleLoadDataEx", NULL);
        REQ(cuModuleGetFunction, "cuModuleGetFunction", NULL);
        REQ(cuLaunchKernel, "cuLaunchKernel", NULL);
        REQ(cuGetErrorName, "cuGetErrorName", NULL);
        REQ(cuGetErrorString, "cuGetErrorString", NULL);
        OPT(cuMemAlloc, "cuMemAlloc_v2", "cuMemAlloc");
        OPT(cuMemFree, "cuMemFree_v2", "cuMemFree");
        OPT(cuMemcpyHtoD, "cuMemcpyHtoD_v2", "cuMemcpyHtoD");
        OPT(cuMemcpyDtoH, "cuMemcpyDtoH_v2", "cuMemcpyDtoH");
        OPT(cuMemcpyDtoD, "cuMemcpyDtoD_v2", "cuMemcpyDtoD");
        OPT(cuCtxSynchronize, "cuCtxSynchronize", NULL);
        OPT(cuEventCreate, "cuEventCreate", NULL);
        OPT(cuEventRecord, "cuEventRecord", NULL);
        OPT(cuEventSynchronize, "cuEventSynchronize", NULL);
        OPT(cuEventElapsedTime, "cuEventElapsedTime_v2",
            "cuEventElapsedTime");
        OPT(cuEventDestroy, "cuEventDestroy_v2", "cuEventDestroy");
        OPT(cuLinkCreate, "cuLinkCreate_v2", "cuLinkCreate");
        OPT(cuLinkAddData, "cuLinkAddData_v2", "cuLinkAddData");
        OPT(cuLinkComplete, "cuLinkComplete", NULL);
        OPT(cuLinkDestroy, "cuLinkDestroy", NULL);
        OPT(cuDriverGetVersion, "cuDriverGetVersion", NULL);
#undef REQ
#undef OPT
        CUresult r = api.cuInit(0);
        if (r != 0) {
            char d[160];
            tc_cu_describe(r, d, sizeof(d));
            snprintf(load_err, sizeof(load_err), "tcjit gpu: cuInit: %s", d);
            loaded = -1;
            goto out;
        }
        loaded = 1;
    }
out:
    pthread_mutex_unlock(&mu);
    if (loaded < 0) {
        snprintf(err, errlen, "%s", load_err);
        return NULL;
    }
    return &api;
}

void
tc_cu_describe(CUresult r, char *buf, size_t n)
{
    const char *name = NULL, *str = NULL;
    if (loaded > 0 || api.cuGetErrorName != NULL) {
        api.cuGetErrorName(r, &name);
        api.cuGetErrorString(r, &str);
    }
    snprintf(buf, n, "%s (%d): %s", name ? name : "CUDA_ERROR", r,
             str ? str : "unknown error");
}

static int
check(CUresult r, const char *what, char *err, size_t errlen)
{
    if (r == 0) {
        return 0;
    }
    char d[200];
    tc_cu_describe(r, d, sizeof(d));
    snprintf(err, errlen, "tcjit gpu: %s failed: %s", what, d);
    return -1;
}

int
tc_cu_device_info(int device, int *sm, int *sm_count, char *err,
                  size_t errlen)
{
    const tc_cu_api *a = tc_cu_load(err, errlen);
    if (a == NULL) {
        return -1;
    }
    CUdevice dev;
    int major = 0, minor = 0, n = 0;
    if (check(a->cuDeviceGet(&dev, device), "cuDeviceGet", err, errlen) < 0
        || check(a->cuDeviceGetAttribute(&major, CU_ATTR_CC_MAJOR, dev),
                 "cuDeviceGetAttribute", err, errlen) < 0
        || check(a->cuDeviceGetAttribute(&minor, CU_ATTR_CC_MINOR, dev),
                 "cuDeviceGetAttribute", err, errlen) < 0
        || check(a->cuDeviceGetAttribute(&n, CU_ATTR_SM_COUNT, dev),
                 "cuDeviceGetAttribute", err, errlen) < 0) {
        return -1;
    }
    *sm = 10 * major + minor;
    *sm_count = n;
    return 0;
}

#define TC_MAX_DEVICES 64
static CUcontext primary[TC_MAX_DEVICES];

int
tc_cu_make_current(int device, char *err, size_t errlen)
{
    const tc_cu_api *a = tc_cu_load(err, errlen);
    if (a == NULL) {
        return -1;
    }
    if (device < 0 || device >= TC_MAX_DEVICES) {
        snprintf(err, errlen, "tcjit gpu: bad device %d", device);
        return -1;
    }
    CUcontext cur = NULL;
    if (primary[device] != NULL) {
        if (a->cuCtxGetCurrent(&cur) == 0 && cur == primary[device]) {
            return 0;
        }
        return check(a->cuCtxSetCurrent(primary[device]), "cuCtxSetCurrent",
                     err, errlen);
    }
    pthread_mutex_lock(&mu);
    CUdevice dev;
    CUcontext ctx = NULL;
    int rc = check(a->cuDeviceGet(&dev, device), "cuDeviceGet", err, errlen);
    if (rc == 0) {
        rc = check(a->cuDevicePrimaryCtxRetain(&ctx, dev),
                   "cuDevicePrimaryCtxRetain", err, errlen);
    }
    if (rc == 0) {
        primary[device] = ctx;
    }
    pthread_mutex_unlock(&mu);
    if (rc < 0) {
        return -1;
    }
    return check(a->cuCtxSetCurrent(ctx), "cuCtxSetCurrent", err, errlen);
}

/* ---- module cache --------------------------------------------------------- */

typedef struct modent {
    uint64_t hash;
    int device;
    char *text;
    CUmodule mod;
    struct modent *next;
} modent;

static modent *modules;

static uint64_t
fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    }
    return h;
}

/* ptx from its first line that is not a comment: the header names the
 * graph ("// tcjit_backward [1/5]"), and graphs with the same kernels (each
 * layer's segment of a model's backward, docs/training.md) are one module,
 * JIT-compiled once and one cache entry. */
static const char *
ptx_code(const char *ptx)
{
    while (ptx[0] == '/' && ptx[1] == '/') {
        const char *nl = strchr(ptx, '\n');
        if (nl == NULL) {
            break;
        }
        ptx = nl + 1;
    }
    return ptx;
}

/* ---- the on-disk cache: cubins linked from the PTX ------------------------ */

#define CU_JIT_INPUT_PTX 1

/* The cubin of ptx from the driver's linker (malloc'd), or NULL. */
static void *
link_cubin(const tc_cu_api *a, const char *ptx, size_t *len)
{
    void *state = NULL, *cubin = NULL, *copy = NULL;
    size_t size = 0;
    if (a->cuLinkCreate == NULL || a->cuLinkAddData == NULL
        || a->cuLinkComplete == NULL || a->cuLinkDestroy == NULL
        || a->cuLinkCreate(0, NULL, NULL, &state) != 0) {
        return NULL;
    }
    if (a->cuLinkAddData(state, CU_JIT_INPUT_PTX, (void *)ptx,
                         strlen(ptx) + 1, "tcjit.ptx", 0, NULL, NULL) == 0
        && a->cuLinkComplete(state, &cubin, &size) == 0 && size > 0
        && (copy = malloc(size)) != NULL) {
        memcpy(copy, cubin, size);   /* owned by the link state */
        *len = size;
    }
    a->cuLinkDestroy(state);
    return copy;
}

/* The module of ptx from the on-disk cache, or linked to a cubin that is
 * stored there; non-zero when the caller should load the PTX itself
 * (cache off, no linker, a failure: its JIT log then says why). */
static CUresult
disk_module(const tc_cu_api *a, const char *ptx, int device, CUmodule *m)
{
    char err[256], key[TC_KEY_CHARS + 1];
    int sm = 0, nsm = 0, version = 0;
    if (!tc_diskcache_on()
        || tc_cu_device_info(device, &sm, &nsm, err, sizeof(err)) < 0) {
        return 1;
    }
    if (a->cuDriverGetVersion != NULL) {
        (void)a->cuDriverGetVersion(&version);
    }
    tc_hash h;
    tc_hash_init(&h);
    tc_hash_str(&h, "tcjit-cubin 1");
    tc_hash_i64(&h, sm);
    tc_hash_i64(&h, version);
    tc_hash_str(&h, ptx);
    tc_hash_hex(&h, key);
    void *data = NULL;
    size_t len = 0;
    CUresult r = 1;
    if (tc_diskcache_get("cubin", key, &data, &len)) {
        r = a->cuModuleLoadDataEx(m, data, 0, NULL, NULL);
        free(data);
        tc_diskcache_count(r == 0, 1);
        tc_diskcache_log("%s cubin-%s (sm_%d)", r == 0 ? "hit" : "unloadable",
                         key, sm);
        if (r == 0) {
            return 0;
        }
    }
    else {
        tc_diskcache_count(0, 1);
        tc_diskcache_log("miss cubin-%s (sm_%d)", key, sm);
    }
    data = link_cubin(a, ptx, &len);
    if (data == NULL) {
        return 1;
    }
    (void)tc_diskcache_put("cubin", key, data, len);
    r = a->cuModuleLoadDataEx(m, data, 0, NULL, NULL);
    free(data);
    return r;
}

int
tc_cu_module(const char *ptx, int device, CUmodule *mod, char *err,
             size_t errlen)
{
    return tc_cu_module_ex(ptx, device, mod, NULL, err, errlen);
}

int
tc_cu_module_ex(const char *ptx, int device, CUmodule *mod, int *loaded,
                char *err, size_t errlen)
{
    const tc_cu_api *a = tc_cu_load(err, errlen);
    if (a == NULL) {
        return -1;
    }
    if (loaded != NULL) {
        *loaded = 0;
    }
    ptx = ptx_code(ptx);
    uint64_t h = fnv1a(ptx);
    pthread_mutex_lock(&mu);
    for (modent *m = modules; m != NULL; m = m->next) {
        if (m->hash == h && m->device == device && strcmp(m->text, ptx) == 0) {
            *mod = m->mod;
            pthread_mutex_unlock(&mu);
            return 0;
        }
    }
    pthread_mutex_unlock(&mu);
    if (tc_cu_make_current(device, err, errlen) < 0) {
        return -1;
    }
    static _Thread_local char log[8192];
    log[0] = '\0';
    int opts[2] = {CU_JIT_ERROR_LOG_BUFFER,
                   CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2] = {log, (void *)(uintptr_t)sizeof(log)};
    CUmodule m = NULL;
    CUresult r = disk_module(a, ptx, device, &m);
    if (r != 0) {
        r = a->cuModuleLoadDataEx(&m, ptx, 2, opts, vals);
    }
    if (r != 0) {
        char d[200];
        tc_cu_describe(r, d, sizeof(d));
        snprintf(err, errlen, "tcjit gpu: cuModuleLoadDataEx failed: %s%s%s",
                 d, log[0] ? "\n" : "", log);
        return -1;
    }
    modent *e = calloc(1, sizeof(*e));
    char *text = strdup(ptx);
    if (e == NULL || text == NULL) {
        free(e);
        free(text);
        snprintf(err, errlen, "tcjit gpu: out of memory");
        return -1;    /* the module leaks; never happens in practice */
    }
    e->hash = h;
    e->device = device;
    e->text = text;
    e->mod = m;
    pthread_mutex_lock(&mu);
    e->next = modules;
    modules = e;
    pthread_mutex_unlock(&mu);
    *mod = m;
    if (loaded != NULL) {
        *loaded = 1;
    }
    return 0;
}

int
tc_cu_function(CUmodule mod, const char *name, CUfunction *fn, char *err,
               size_t errlen)
{
    CUresult r = api.cuModuleGetFunction(fn, mod, name);
    if (r != 0) {
        char d[200];
        tc_cu_describe(r, d, sizeof(d));
        snprintf(err, errlen, "tcjit gpu: cuModuleGetFunction(%s) failed: %s",
                 name, d);
        return -1;
    }
    return 0;
}

int
tc_cu_launch(CUfunction fn, const char *kname, unsigned grid, unsigned block,
             CUstream stream, void **params, char *err, size_t errlen)
{
    CUresult r = api.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, stream,
                                    params, NULL);
    if (r != 0) {
        char d[200];
        tc_cu_describe(r, d, sizeof(d));
        snprintf(err, errlen, "tcjit gpu: launch of kernel %s failed: %s",
                 kname, d);
        return -1;
    }
    return 0;
}
