/* diskcache.h - the on-disk cache of compiled code, shared by processes
 * (issue 15; docs/cache.md).
 *
 * Backends key what they compile by a stable hash (tc_hash) of what
 * determines the code -- kernel IR, dtypes, layouts, target, compiler
 * flags, tcjit build -- never of pointers, and store the result (a CPU
 * shared object, PTX or a cubin) under that key.  One entry is one file,
 * <dir>/<kind>-<key>: a header (magic, format version, key, payload
 * length, payload checksum) and the payload.  Writes go to a temporary
 * file renamed into place, so concurrent processes see a whole entry or
 * none; a read checks the header and the checksum, and an entry that
 * fails is deleted, reported once (a warning) and counted as a miss.  The
 * directory is bounded (tc_diskcache_set_max_bytes): after a write the
 * least recently used entries (by mtime, refreshed on every hit) go.
 *
 * No Python here: backends call it without the GIL.  What the `cache` log
 * channel and warnings should say is queued (tc_diskcache_drain), and the
 * caller holding the GIL reports it.
 */
#ifndef TCJIT_DISKCACHE_H
#define TCJIT_DISKCACHE_H

#include <stddef.h>
#include <stdint.h>

/* A 128-bit hash (two 64-bit lanes over 8-byte words, murmur-style
 * mixing) for keys and checksums: stable across processes and builds of
 * the same machine word order. */
typedef struct {
    uint64_t a, b, len;
    unsigned char buf[8];
    int nbuf;
} tc_hash;

#define TC_KEY_CHARS 32   /* hex digits of a key */

void tc_hash_init(tc_hash *h);
void tc_hash_add(tc_hash *h, const void *p, size_t n);
void tc_hash_i64(tc_hash *h, int64_t v);
void tc_hash_str(tc_hash *h, const char *s);  /* length-prefixed; NULL ok */
/* The digest as TC_KEY_CHARS hex digits plus a NUL. */
void tc_hash_hex(const tc_hash *h, char *out);

/* Settings (module.c, from tcjit.config): dir NULL turns the cache off. */
void tc_diskcache_set_dir(const char *dir);
void tc_diskcache_set_enabled(int on);
void tc_diskcache_set_max_bytes(int64_t n);
int tc_diskcache_on(void);

/* Entry kind (file name prefix, e.g. "cpu", "ptx", "cubin") and key.
 * get: 1 and a malloc'd payload in *data, *len on a hit; 0 on a miss
 * (absent, unreadable or invalid).  put: 0, or -1 when it could not be
 * written (the cache is best effort: the caller goes on). */
int tc_diskcache_get(const char *kind, const char *key, void **data,
                     size_t *len);
int tc_diskcache_put(const char *kind, const char *key, const void *data,
                     size_t len);

/* Counters of tcjit.counters(): kernels found in / missing from the
 * cache (a backend counts every kernel of an entry), entries written,
 * invalid entries dropped, entries evicted. */
typedef struct {
    long hits, misses, writes, corrupt, evicted;
} tc_diskcache_stats;

void tc_diskcache_count(int hit, long kernels);
void tc_diskcache_get_stats(tc_diskcache_stats *out);
void tc_diskcache_reset_stats(void);

/* Queued messages, oldest first: sink(warning, text, ctx) for each, then
 * the queue is empty.  warning != 0: a corrupted entry (say it once as a
 * warning); else a line for the `cache` log channel. */
void tc_diskcache_log(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
void tc_diskcache_drain(void (*sink)(int warning, const char *text,
                                     void *ctx),
                        void *ctx);

/* Loads a shared object held in memory (a CPU entry's payload) with
 * dlopen, through a temporary file (unlinked once loaded).  The handle, or NULL with a message
 * in err. */
void *tc_dl_open_bytes(const void *data, size_t len, char *err,
                       size_t errlen);

/* Reads a whole file: malloc'd bytes, or NULL. */
void *tc_read_file(const char *path, size_t *len);

#endif
