/* diskcache.c - the on-disk cache of compiled code (see diskcache.h). */
#define _GNU_SOURCE
#include "diskcache.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- hash ---------------------------------------------------------------- */

static uint64_t
rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static uint64_t
fmix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

static void
mix_word(tc_hash *h, uint64_t w)
{
    /* MurmurHash3 x64-128's block step, one word per lane pair */
    const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
    uint64_t k1 = w * c1, k2 = w * c2;
    k1 = rotl(k1, 31) * c2;
    h->a ^= k1;
    h->a = rotl(h->a, 27) + h->b;
    h->a = h->a * 5 + 0x52dce729;
    k2 = rotl(k2, 33) * c1;
    h->b ^= k2;
    h->b = rotl(h->b, 31) + h->a;
    h->b = h->b * 5 + 0x38495ab5;
}

void
tc_hash_init(tc_hash *h)
{
    memset(h, 0, sizeof(*h));
    h->a = 0x9e3779b97f4a7c15ULL;
    h->b = 0x6a09e667f3bcc909ULL;
}

void
tc_hash_add(tc_hash *h, const void *p, size_t n)
{
    const unsigned char *s = p;
    h->len += n;
    while (n > 0) {
        size_t take = 8 - (size_t)h->nbuf;
        if (take > n) {
            take = n;
        }
        memcpy(h->buf + h->nbuf, s, take);
        h->nbuf += (int)take;
        s += take;
        n -= take;
        if (h->nbuf == 8) {
            uint64_t w;
            memcpy(&w, h->buf, 8);
            mix_word(h, w);
            h->nbuf = 0;
        }
    }
}

void
tc_hash_i64(tc_hash *h, int64_t v)
{
    tc_hash_add(h, &v, sizeof(v));
}

void
tc_hash_str(tc_hash *h, const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;
    tc_hash_i64(h, (int64_t)n);
    tc_hash_add(h, s != NULL ? s : "", n);
}

void
tc_hash_hex(const tc_hash *h, char *out)
{
    tc_hash t = *h;
    uint64_t w = 0;
    memcpy(&w, t.buf, (size_t)t.nbuf);
    /* the tail and the length, so "ab" + "" and "a" + "b\0" differ */
    mix_word(&t, w ^ ((uint64_t)t.nbuf << 56));
    uint64_t a = t.a ^ t.len, b = t.b ^ t.len;
    a += b;
    b += a;
    a = fmix(a);
    b = fmix(b);
    a += b;
    b += a;
    snprintf(out, TC_KEY_CHARS + 1, "%016llx%016llx", (unsigned long long)a,
             (unsigned long long)b);
}

/* ---- settings, counters, messages ---------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *cache_dir;
static int enabled = 1;
static int64_t max_bytes = (int64_t)1 << 30;
static tc_diskcache_stats stats;
static int64_t known_total = -1;  /* bytes in the directory as far as this
                                     process knows; -1: not scanned yet */

typedef struct msg {
    struct msg *next;
    int warning;
    char text[];
} msg;

static msg *queue_head, **queue_tail = &queue_head;

void
tc_diskcache_set_dir(const char *dir)
{
    pthread_mutex_lock(&mu);
    free(cache_dir);
    cache_dir = dir != NULL && dir[0] != '\0' ? strdup(dir) : NULL;
    known_total = -1;
    pthread_mutex_unlock(&mu);
}

void
tc_diskcache_set_enabled(int on)
{
    enabled = on;
}

void
tc_diskcache_set_max_bytes(int64_t n)
{
    pthread_mutex_lock(&mu);
    max_bytes = n;
    known_total = -1;
    pthread_mutex_unlock(&mu);
}

int
tc_diskcache_on(void)
{
    return enabled && cache_dir != NULL;
}

void
tc_diskcache_count(int hit, long kernels)
{
    pthread_mutex_lock(&mu);
    if (hit) {
        stats.hits += kernels;
    }
    else {
        stats.misses += kernels;
    }
    pthread_mutex_unlock(&mu);
}

void
tc_diskcache_get_stats(tc_diskcache_stats *out)
{
    pthread_mutex_lock(&mu);
    *out = stats;
    pthread_mutex_unlock(&mu);
}

void
tc_diskcache_reset_stats(void)
{
    pthread_mutex_lock(&mu);
    memset(&stats, 0, sizeof(stats));
    pthread_mutex_unlock(&mu);
}

static void
queue(int warning, const char *fmt, va_list ap)
{
    char text[1024];
    vsnprintf(text, sizeof(text), fmt, ap);
    size_t n = strlen(text) + 1;
    msg *m = malloc(sizeof(*m) + n);
    if (m == NULL) {
        return;   /* a lost log line */
    }
    m->next = NULL;
    m->warning = warning;
    memcpy(m->text, text, n);
    pthread_mutex_lock(&mu);
    *queue_tail = m;
    queue_tail = &m->next;
    pthread_mutex_unlock(&mu);
}

void
tc_diskcache_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    queue(0, fmt, ap);
    va_end(ap);
}

static void
warnf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
warnf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    queue(1, fmt, ap);
    va_end(ap);
}

void
tc_diskcache_drain(void (*sink)(int warning, const char *text, void *ctx),
                   void *ctx)
{
    pthread_mutex_lock(&mu);
    msg *m = queue_head;
    queue_head = NULL;
    queue_tail = &queue_head;
    pthread_mutex_unlock(&mu);
    while (m != NULL) {
        msg *next = m->next;
        sink(m->warning, m->text, ctx);
        free(m);
        m = next;
    }
}

/* ---- entries --------------------------------------------------------------- */

#define MAGIC "TCJITKC\x01"
#define FORMAT_VERSION 1u
#define HEADER_BYTES (8 + 4 + 4 + TC_KEY_CHARS + 8 + TC_KEY_CHARS)

/* <dir>/<kind>-<key>; returns -1 when the cache is off or names are
 * unusable (a key is hex digits, a kind a short word: no '/'). */
static int
entry_path(char *out, size_t n, const char *kind, const char *key)
{
    if (strchr(kind, '/') != NULL || strchr(key, '/') != NULL) {
        return -1;
    }
    pthread_mutex_lock(&mu);
    int rc = -1;
    if (enabled && cache_dir != NULL) {
        int w = snprintf(out, n, "%s/%s-%s", cache_dir, kind, key);
        rc = w > 0 && (size_t)w < n ? 0 : -1;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

void *
tc_read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }
    struct stat st;
    unsigned char *buf = NULL;
    if (fstat(fd, &st) == 0 && st.st_size >= 0) {
        size_t size = (size_t)st.st_size, got = 0;
        buf = malloc(size > 0 ? size : 1);
        while (buf != NULL && got < size) {
            ssize_t r = read(fd, buf + got, size - got);
            if (r <= 0) {
                if (r < 0 && errno == EINTR) {
                    continue;
                }
                break;
            }
            got += (size_t)r;
        }
        if (buf != NULL && got != size) {
            free(buf);
            buf = NULL;
        }
        *len = got;
    }
    close(fd);
    return buf;
}

static void
checksum(const void *data, size_t len, char *out)
{
    tc_hash h;
    tc_hash_init(&h);
    tc_hash_add(&h, data, len);
    tc_hash_hex(&h, out);
}

/* Why an entry is invalid, or NULL if it is whole. */
static const char *
check_entry(const unsigned char *buf, size_t size, const char *key)
{
    if (size < HEADER_BYTES || memcmp(buf, MAGIC, 8) != 0) {
        return "bad header";
    }
    uint32_t version, keylen;
    uint64_t len;
    memcpy(&version, buf + 8, 4);
    memcpy(&keylen, buf + 12, 4);
    memcpy(&len, buf + 16 + TC_KEY_CHARS, 8);
    if (version != FORMAT_VERSION || keylen != TC_KEY_CHARS) {
        return "other format version";
    }
    if (memcmp(buf + 16, key, TC_KEY_CHARS) != 0) {
        return "key mismatch";
    }
    if (len != size - HEADER_BYTES) {
        return "truncated";
    }
    char sum[TC_KEY_CHARS + 1];
    checksum(buf + HEADER_BYTES, (size_t)len, sum);
    if (memcmp(buf + 24 + TC_KEY_CHARS, sum, TC_KEY_CHARS) != 0) {
        return "checksum mismatch";
    }
    return NULL;
}

int
tc_diskcache_get(const char *kind, const char *key, void **data,
                 size_t *len)
{
    char path[4096];
    if (strlen(key) != TC_KEY_CHARS
        || entry_path(path, sizeof(path), kind, key) < 0) {
        return 0;
    }
    size_t size = 0;
    unsigned char *buf = tc_read_file(path, &size);
    if (buf == NULL) {
        return 0;
    }
    const char *why = check_entry(buf, size, key);
    if (why != NULL) {
        free(buf);
        /* another process may have replaced it meanwhile: whatever is
         * there now is rewritten by our compile */
        (void)unlink(path);
        pthread_mutex_lock(&mu);
        stats.corrupt++;
        pthread_mutex_unlock(&mu);
        warnf("tcjit: cache entry %s is invalid (%s): deleted, recompiling",
              path, why);
        return 0;
    }
    size_t n = size - HEADER_BYTES;
    memmove(buf, buf + HEADER_BYTES, n);
    *data = buf;
    *len = n;
    (void)utimensat(AT_FDCWD, path, NULL, 0);   /* recently used */
    return 1;
}

typedef struct {
    char *name;
    time_t mtime;
    off_t size;
} dirent_info;

static int
older_first(const void *x, const void *y)
{
    const dirent_info *a = x, *b = y;
    return (a->mtime > b->mtime) - (a->mtime < b->mtime);
}

/* Removes least recently used entries of dir if it holds more than
 * limit, down to 3/4 of it (so that not every write evicts).  Returns the
 * bytes left, or -1 when dir could not be read. */
static int64_t
evict(const char *dir, int64_t limit)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        return -1;
    }
    dirent_info *v = NULL;
    size_t n = 0, cap = 0;
    int64_t total = 0;
    struct dirent *de;
    char path[8192];
    while ((de = readdir(d)) != NULL) {
        struct stat st;
        if (de->d_name[0] == '.'
            || snprintf(path, sizeof(path), "%s/%s", dir, de->d_name)
                   >= (int)sizeof(path)
            || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            continue;   /* temporaries start with '.' */
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            dirent_info *w = realloc(v, sizeof(*v) * cap);
            if (w == NULL) {
                break;
            }
            v = w;
        }
        v[n].name = strdup(de->d_name);
        if (v[n].name == NULL) {
            break;
        }
        v[n].mtime = st.st_mtime;
        v[n].size = st.st_size;
        total += st.st_size;
        n++;
    }
    closedir(d);
    if (total > limit) {
        qsort(v, n, sizeof(*v), older_first);
        for (size_t i = 0; i < n && total > limit / 4 * 3; i++) {
            snprintf(path, sizeof(path), "%s/%s", dir, v[i].name);
            if (unlink(path) == 0) {
                total -= v[i].size;
                pthread_mutex_lock(&mu);
                stats.evicted++;
                pthread_mutex_unlock(&mu);
                tc_diskcache_log("evicted %s", v[i].name);
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        free(v[i].name);
    }
    free(v);
    return total;
}

/* mkdir -p */
static int
make_dirs(const char *dir)
{
    char p[4096];
    if (snprintf(p, sizeof(p), "%s", dir) >= (int)sizeof(p)) {
        return -1;
    }
    for (char *s = p + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                return -1;
            }
            *s = '/';
        }
    }
    return mkdir(p, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

static int
write_all(int fd, const void *p, size_t n)
{
    const char *s = p;
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

int
tc_diskcache_put(const char *kind, const char *key, const void *data,
                 size_t len)
{
    char path[4096], tmp[4096 + 64], dir[4096];
    if (strlen(key) != TC_KEY_CHARS
        || entry_path(path, sizeof(path), kind, key) < 0) {
        return -1;
    }
    snprintf(dir, sizeof(dir), "%s", path);
    *strrchr(dir, '/') = '\0';
    if (make_dirs(dir) < 0) {
        return -1;
    }
    static unsigned serial;
    pthread_mutex_lock(&mu);
    unsigned s = serial++;
    pthread_mutex_unlock(&mu);
    snprintf(tmp, sizeof(tmp), "%s/.tmp-%ld-%u-%s-%s", dir, (long)getpid(),
             s, kind, key);
    unsigned char head[HEADER_BYTES];
    uint32_t version = FORMAT_VERSION, keylen = TC_KEY_CHARS;
    uint64_t n = len;
    char sum[TC_KEY_CHARS + 1];
    checksum(data, len, sum);
    memcpy(head, MAGIC, 8);
    memcpy(head + 8, &version, 4);
    memcpy(head + 12, &keylen, 4);
    memcpy(head + 16, key, TC_KEY_CHARS);
    memcpy(head + 16 + TC_KEY_CHARS, &n, 8);
    memcpy(head + 24 + TC_KEY_CHARS, sum, TC_KEY_CHARS);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        return -1;
    }
    int rc = write_all(fd, head, sizeof(head));
    if (rc == 0) {
        rc = write_all(fd, data, len);
    }
    if (close(fd) != 0) {
        rc = -1;
    }
    /* rename is atomic: readers see the old entry, or the whole new one */
    if (rc < 0 || rename(tmp, path) != 0) {
        (void)unlink(tmp);
        return -1;
    }
    /* The directory is scanned at this process's first write and when
     * its running total passes the bound, not at every write: a scan
     * stats every entry. */
    pthread_mutex_lock(&mu);
    stats.writes++;
    int64_t limit = max_bytes;
    int scan = limit > 0 && (known_total < 0
                             || (known_total += (int64_t)(len + HEADER_BYTES))
                                    > limit);
    pthread_mutex_unlock(&mu);
    tc_diskcache_log("wrote %s-%s (%zu bytes)", kind, key, len);
    if (scan) {
        int64_t left = evict(dir, limit);
        pthread_mutex_lock(&mu);
        known_total = left;
        pthread_mutex_unlock(&mu);
    }
    return 0;
}

/* ---- shared objects from memory -------------------------------------------- */

void *
tc_dl_open_bytes(const void *data, size_t len, char *err, size_t errlen)
{
    /* A file of a name never used before in this process: dlopen returns
     * an already loaded object whose name matches (so no reused
     * /proc/self/fd/N of a memfd), and the file stays mapped after the
     * unlink below, so its inode is not reused while loaded either. */
    static unsigned long serial;
    pthread_mutex_lock(&mu);
    unsigned long s = serial++;
    pthread_mutex_unlock(&mu);
    const char *tmpdir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/tcjit-%ld-%lu-XXXXXX",
             tmpdir != NULL && tmpdir[0] != '\0' ? tmpdir : "/tmp",
             (long)getpid(), s);
    int fd = mkstemp(path);
    if (fd < 0) {
        snprintf(err, errlen, "temporary file: %s", strerror(errno));
        return NULL;
    }
    int rc = write_all(fd, data, len);
    if (close(fd) != 0) {
        rc = -1;
    }
    void *h = NULL;
    if (rc < 0) {
        snprintf(err, errlen, "temporary file: %s", strerror(errno));
    }
    else if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL) {
        const char *e = dlerror();
        snprintf(err, errlen, "dlopen: %s", e != NULL ? e : "failed");
    }
    (void)unlink(path);
    return h;
}
