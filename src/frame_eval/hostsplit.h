/* hostsplit.h - the code of a CUDA graph with a host part (graph.h
 * tc_split): the host graph's CPU code runs first, then the 0-d host values
 * that device kernels read are copied to the device, then the device
 * graph's code.  It is a backend like the others (runtime/backend.h), so a
 * cache entry runs it the same way.
 */
#ifndef TCJIT_HOSTSPLIT_H
#define TCJIT_HOSTSPLIT_H

#include "../graph/graph.h"
#include "../runtime/backend.h"

extern const tc_backend tc_hostsplit_backend;

/* A handle for tc_hostsplit_backend from the two parts' handles (either
 * may be NULL: that part has nothing to run), made by be[0] (the CPU
 * backend) and be[1] (CUDA device `device`) from s->host and s->dev.  It
 * takes the handles and s's maps (s's graphs stay the caller's); on
 * failure it frees the handles and returns NULL with an exception. */
void *tc_hostsplit_make(tc_split *s, int noutputs, const tc_backend *be[2],
                        void *code[2], int device);

#endif
