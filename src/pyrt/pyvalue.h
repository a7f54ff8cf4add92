/* pyvalue.h - small Python value helpers shared by the stages above.
 *
 * Plain CPython API, no tcjit types: every function returns a new
 * reference (or NULL with an exception) and borrows its arguments.
 */
#ifndef TCJIT_PYVALUE_H
#define TCJIT_PYVALUE_H

#include <Python.h>
#include <stdint.h>

/* A tuple of Python ints (sizes, strides).  New reference or NULL. */
PyObject *tc_int_tuple(int n, const int64_t *v);

/* torch.<name> (a function of the torch module).  New reference or NULL;
 * callers that keep it cache it themselves. */
PyObject *tc_torch_attr(const char *name);

#endif
