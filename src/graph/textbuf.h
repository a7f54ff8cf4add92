/* textbuf.h - the growable printf buffer of every printer and emitter
 * (KIR and graph printers, the PTX emitter, plan descriptions).
 *
 * Plain C, no Python, so every stage above src/graph can use it.  A
 * failed allocation (or a vsnprintf error) sets `failed`; later appends
 * are no-ops, so callers check once at the end instead of after every
 * line.
 */
#ifndef TCJIT_TEXTBUF_H
#define TCJIT_TEXTBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct {
    char *s;            /* NUL-terminated once anything was appended */
    size_t len, cap;
    int failed;
} tc_textbuf;           /* zero-initialized = empty */

void tc_textbuf_vprintf(tc_textbuf *b, const char *fmt, va_list ap);
void tc_textbuf_printf(tc_textbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The text (malloc'd, "" when nothing was appended), or NULL after a
 * failure; b is left empty either way. */
char *tc_textbuf_finish(tc_textbuf *b);

/* Drops the text. */
void tc_textbuf_free(tc_textbuf *b);

#endif
