/* nn_module.h - what tcjit knows about torch.nn.Module objects, in C.
 *
 * The tracer inlines module calls and reads parameters, buffers and
 * submodules as guarded sources; the guards then read those attributes on
 * every call.  nn.Module answers such reads from a Python __getattr__ (after
 * normal lookup failed, with an AttributeError built and dropped on the
 * way), about 1 us each; tc_nn_getattr searches the same dicts in C.
 */
#ifndef TCJIT_NN_MODULE_H
#define TCJIT_NN_MODULE_H

#include <Python.h>

int tc_nn_module_init(void);

/* isinstance(obj, torch.nn.Module) */
int tc_is_nn_module(PyObject *obj);

/* getattr(m, name) with nn.Module's lookup order: the type (descriptors,
 * methods), the instance __dict__, then _parameters, _buffers, _modules.
 * New reference, or NULL with an exception (AttributeError when absent). */
PyObject *tc_nn_getattr(PyObject *m, PyObject *name);

/* hasattr(m, name) for a module whose class keeps nn.Module's
 * __getattr__ and __getattribute__: an absent name is answered from the
 * dicts, without the AttributeError nn.Module builds (the guards ask this
 * on every call: HF's hasattr(module, "num_key_value_groups")).  Any other
 * object, or a name its class defines, goes through hasattr itself.  1, 0,
 * or -1 with an exception. */
int tc_nn_hasattr(PyObject *m, PyObject *name);

/* Would m(...) run hooks (its own or global forward/backward hooks)?  1, 0,
 * or -1 with an exception.  Without hooks Module.__call__ is exactly
 * m.forward(...), which is what the tracer inlines. */
int tc_nn_has_hooks(PyObject *m);

#endif
