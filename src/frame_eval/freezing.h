/* freezing.h - parameters as compile-time constants (docs/freezing.md). */
#ifndef TCJIT_FREEZING_H
#define TCJIT_FREEZING_H

#include "cache.h"

/* With freezing on (tc_backend_option): fold what the frozen inputs of
 * g (parameters and buffers of modules that autograd does not need) make
 * constant: batch_norm in eval mode into the convolution before it, ops
 * over constants into their values.  The values become e's constants
 * (appended inputs), and each frozen tensor they were computed from gets a
 * FROZEN guard, so that a changed parameter recompiles.  A graph with
 * nothing to fold is left as it is.  0, or -1 with an exception. */
int tc_freeze(tc_entry *e, tc_graph *g, tc_iframe *f, int device);

#endif
