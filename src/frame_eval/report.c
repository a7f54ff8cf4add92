/* report.c - process state of frame_eval and reporting (see report.h). */
#include "report.h"

tc_counters tc_stats;
tc_settings tc_config = {8, NULL, NULL};

unsigned tc_log_mask;
tc_python_hooks tc_hooks;
PyObject *tc_reported_breaks;

int
tc_logf(unsigned channel, const char *name, const char *fmt, ...)
{
    if (!tc_log_on(channel)) {
        return 0;
    }
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    PyObject *r = msg ? PyObject_CallFunction(tc_hooks.log, "sO", name, msg)
                      : NULL;
    Py_XDECREF(msg);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

int
tc_recordf(const char *event, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* built even with no recorder: "N" arguments must be released */
    PyObject *data = Py_VaBuildValue(fmt, ap);
    va_end(ap);
    if (data == NULL) {
        return -1;
    }
    PyObject *r = tc_hooks.recorder
        ? PyObject_CallFunction(tc_hooks.recorder, "sO", event, data)
        : Py_NewRef(Py_None);
    Py_DECREF(data);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

int
tc_warnf(PyCodeObject *co, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (msg == NULL) {
        return -1;
    }
    PyObject *r = tc_hooks.warn
        ? PyObject_CallFunction(tc_hooks.warn, "OOi", msg, co->co_filename,
                                co->co_firstlineno)
        : Py_NewRef(Py_None);
    Py_DECREF(msg);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

PyObject *
tc_describe_code(PyCodeObject *co)
{
    return PyUnicode_FromFormat("%U in %U:%d", co->co_name, co->co_filename,
                                co->co_firstlineno);
}
