/* driver.h - the CUDA driver API through dlopen("libcuda.so.1").
 *
 * tcjit must build, import and run CPU code on machines without CUDA, so
 * nothing links against libcuda: the library is opened on first use and
 * the few entry points tcjit needs are resolved by name (the versioned
 * _v2 symbols where the driver has them).  The types are declared here
 * (ABI-compatible with cuda.h) so no CUDA header is needed to build.
 *
 * No Python here either: errors are messages in a caller's buffer, so the
 * standalone device harness (tests/gpu/harness.c) uses this file as is and
 * the runtime (gpu_runtime.c) turns the messages into RuntimeError.
 */
#ifndef TCJIT_GPU_DRIVER_H
#define TCJIT_GPU_DRIVER_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;                   /* CUDA_SUCCESS == 0 */
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef unsigned long long CUdeviceptr;

typedef struct {
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*cuCtxGetCurrent)(CUcontext *);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned,
                                   int *, void **);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned,
                               unsigned, unsigned, unsigned, unsigned,
                               CUstream, void **, void **);
    CUresult (*cuGetErrorName)(CUresult, const char **);
    CUresult (*cuGetErrorString)(CUresult, const char **);
    /* used by the device harness (tests/gpu); may be NULL elsewhere */
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*cuMemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuEventCreate)(CUevent *, unsigned);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventSynchronize)(CUevent);
    CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*cuEventDestroy)(CUevent);
    /* PTX -> cubin for the on-disk cache (driver.c); may be NULL */
    CUresult (*cuLinkCreate)(unsigned, int *, void **, void **);
    CUresult (*cuLinkAddData)(void *, int, void *, size_t, const char *,
                              unsigned, int *, void **);
    CUresult (*cuLinkComplete)(void *, void **, size_t *);
    CUresult (*cuLinkDestroy)(void *);
    CUresult (*cuDriverGetVersion)(int *);
} tc_cu_api;

/* dlopen + cuInit(0) once (thread-safe).  Returns the table, or NULL with
 * a message in err ("libcuda.so.1 not found: ..."). */
const tc_cu_api *tc_cu_load(char *err, size_t errlen);

/* "CUDA_ERROR_INVALID_PTX: a PTX JIT compilation failed" style text. */
void tc_cu_describe(CUresult r, char *buf, size_t n);

/* Compute capability as 10 * major + minor and the SM count. */
int tc_cu_device_info(int device, int *sm, int *sm_count, char *err,
                      size_t errlen);

/* Make the primary context of device current on this thread (torch uses
 * the primary context; retained once per device and never released).
 * Cheap when it already is current: one cuCtxGetCurrent. */
int tc_cu_make_current(int device, char *err, size_t errlen);

/* The module of ptx for device, loaded once and cached for the process
 * by (hash of the text, device); the text is compared in full on a hash
 * hit.  JIT errors come back with the JIT's error log.  With the on-disk
 * cache on (../runtime/diskcache.h), the cubin the driver links from the
 * PTX is stored, keyed by the text, the device's sm and the driver
 * version, and a later process loads it without the PTX JIT. */
int tc_cu_module(const char *ptx, int device, CUmodule *mod, char *err,
                 size_t errlen);
/* The same; *loaded (when not NULL) says whether this call loaded it
 * (0: it came from the cache). */
int tc_cu_module_ex(const char *ptx, int device, CUmodule *mod, int *loaded,
                    char *err, size_t errlen);

int tc_cu_function(CUmodule mod, const char *name, CUfunction *fn,
                   char *err, size_t errlen);

/* cuLaunchKernel(fn, grid, block, smem 0, stream, params); errors name
 * the kernel and the CUresult. */
int tc_cu_launch(CUfunction fn, const char *kname, unsigned grid,
                 unsigned block, CUstream stream, void **params, char *err,
                 size_t errlen);

#endif
