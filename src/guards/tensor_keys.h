/* tensor_keys.h - what kind of tensor a torch.Tensor object is.
 *
 * tcjit compiles for plain dense CPU and CUDA tensors.  Everything else
 * that is a torch.Tensor to Python -- a sparse, nested, mkldnn or
 * quantized tensor, a meta tensor, a negative / conjugate view, a
 * functorch wrapper (vmap's batched tensors, grad's and functionalize's
 * wrappers), a tensor with a Python dispatch key -- shows in the tensor's
 * dispatch key set, while dtype, shape and strides may look like a plain
 * tensor's (or raise).  The tracer admits a tensor only when its key set is
 * a plain tensor's, and TENSOR_MATCH compares the key set seen at trace
 * time before it reads anything else.
 */
#ifndef TCJIT_TENSOR_KEYS_H
#define TCJIT_TENSOR_KEYS_H

#include <Python.h>
#include <stdint.h>

int tc_tensor_keys_init(void);

/* t's dispatch key set as torch._C._dispatch_keys(t).raw_repr() gives it.
 * t must be a torch.Tensor (any subclass).  0, or -1 with an exception. */
int tc_tensor_keys(PyObject *t, uint64_t *keys);

/* Whether tc_tensor_keys reads the field itself (probing found it) rather
 * than calling torch._C._dispatch_keys: the guards' fast path. */
int tc_tensor_keys_direct(void);

/* A plain tensor's rank, sizes and strides read from its TensorImpl, as
 * the key set is (found by probing at import): 1 with *sizes and *strides
 * pointing into the tensor (valid until it is resized or restrided), or 0
 * where probing failed: then ask Python (t.shape, t.stride()).  Only for
 * tensors whose key set is plain (tc_tensor_keys_plain): others may keep
 * their geometry elsewhere. */
int tc_tensor_geometry(PyObject *t, int *ndim, const int64_t **sizes,
                       const int64_t **strides);

/* Whether keys are a plain dense CPU / CUDA tensor's (an inference tensor
 * lacks the autograd keys: also plain). */
int tc_tensor_keys_plain(uint64_t keys);

/* "DispatchKeySet(CPU, ...)".  A new str, or NULL with an exception. */
PyObject *tc_tensor_keys_repr(uint64_t keys);

#endif
