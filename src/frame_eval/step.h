/* step.h - performing one instruction (STEP) or one jump (BRANCH) at a
 * segment exit, on the concrete values of the frame. */
#ifndef TCJIT_STEP_H
#define TCJIT_STEP_H

#include "../pyrt/pyframe.h"
#include "../tracer/tracer.h"

/* Returns 0, or -1 with an exception set (operands consumed). */
int tc_step(tc_iframe *f, const tc_exit *x);

/* Picks the next code unit.  Returns 0, or -1 if bool() raised. */
int tc_branch(tc_iframe *f, const tc_exit *x, int *next_pc);

#endif
