/* torch_tensor.h - the torch handles of the runtime: dtype objects,
 * torch.empty_strided, data_ptr(), torch.as_strided, each one vectorcall.
 *
 * Below both tensor_alloc.h (plan buffers) and arena.h (one kept
 * allocation), which use it; neither of those includes the other's
 * implementation.
 */
#ifndef TCJIT_TORCH_TENSOR_H
#define TCJIT_TORCH_TENSOR_H

#include <Python.h>
#include "../graph/graph.h"
#include "../pyrt/pyvalue.h"

/* Imports the torch pieces (idempotent).  0, or -1 with an exception. */
int tc_alloc_init(void);

/* argv[4] for a flat uint8 tensor of nbytes on device (new references). */
int tc_alloc_bytes_argv(PyObject **argv, int64_t nbytes, PyObject *device);

/* torch.float32 for TC_F32, torch.complex64 for TC_C64 (borrowed; after
 * tc_alloc_init). */
PyObject *tc_alloc_dtype_object(tc_dtype dt);

/* torch.empty_strided(*argv[:2], dtype=argv[2], device=argv[3]). */
PyObject *tc_alloc_empty(PyObject *const *argv);

/* t.data_ptr() into *out.  0, or -1 with an exception. */
int tc_alloc_data_ptr(PyObject *t, void **out);

/* torch.as_strided(base, va[0], va[1], base.storage_offset() + va[2]): a
 * view of base (tensor_alloc.h's tc_alloc_view_argv makes va for a view
 * output).  New reference, or NULL with an exception. */
PyObject *tc_alloc_view(PyObject *base, PyObject *const *va);

/* tc_alloc_view of base.detach() (a view made through detach(): it shares
 * base's storage, autograd does not flow through it).  New reference, or
 * NULL with an exception. */
PyObject *tc_alloc_view_detached(PyObject *base, PyObject *const *va);

#endif
