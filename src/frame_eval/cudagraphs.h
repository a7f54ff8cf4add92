/* cudagraphs.h - reduce-overhead: a compiled entry replayed as a CUDA
 * graph (cudagraphs.c; the recorder is python/tcjit/_modes_cudagraphs.py). */
#ifndef TCJIT_CUDAGRAPHS_H
#define TCJIT_CUDAGRAPHS_H

#include "cache.h"

/* After e was compiled for a compile whose "cudagraphs" option is on:
 * desc is its graph's description (what custom backends get), device -1
 * for the CPU, dynamic whether its kernels are size-generic, training
 * whether e->backend_fn is an autograd node.  The recorder decides (one
 * perf_hints log line when it cannot capture); when it can, e's code
 * moves into a runner and e->backend_fn becomes the recorder.  0, or -1
 * with an exception. */
int tc_cudagraphs_apply(tc_entry *e, PyCodeObject *co, PyObject *desc,
                        int device, int dynamic, int training);

#endif
