/* textbuf.c - the growable printf buffer (textbuf.h). */
#include "textbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
tc_textbuf_vprintf(tc_textbuf *b, const char *fmt, va_list ap)
{
    if (b->failed) {
        return;
    }
    for (;;) {
        /* a second vsnprintf after growing needs its own copy of ap */
        va_list aq;
        va_copy(aq, ap);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->s != NULL ? b->s + b->len : NULL,
                          b->s != NULL ? room : 0, fmt, aq);
        va_end(aq);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->s != NULL && (size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + (size_t)n + 1) {
            cap *= 2;
        }
        char *s = realloc(b->s, cap);
        if (s == NULL) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

void
tc_textbuf_printf(tc_textbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tc_textbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

char *
tc_textbuf_finish(tc_textbuf *b)
{
    char *s = b->s;
    int failed = b->failed;
    memset(b, 0, sizeof(*b));
    if (failed) {
        free(s);
        return NULL;
    }
    return s != NULL ? s : strdup("");
}

void
tc_textbuf_free(tc_textbuf *b)
{
    free(b->s);
    memset(b, 0, sizeof(*b));
}
