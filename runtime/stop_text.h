/* Stop strings over a stream of generated text (vlmc-run --stop, OpenAI's "stop"): the text
 * goes out as it forms, except a tail that could still become a stop string, which is held
 * back until the next piece shows it does not; once a stop string is complete, the text
 * before it is released and nothing after it. So a reader never sees any part of a stop
 * string, however the tokens split it. */
#ifndef VLMC_RUNTIME_STOP_TEXT_H
#define VLMC_RUNTIME_STOP_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "support/strbuf.h"

enum { VLMC_STOP_MAX_STRINGS = 16, VLMC_STOP_MAX_BYTES = 256 };

typedef struct {
  const char *const *strings; /* borrowed; non-empty, at most VLMC_STOP_MAX_BYTES each */
  size_t count;
  vlmc_strbuf_t held;         /* text not yet released */
  bool stopped;
  size_t which;               /* the stop string found, when stopped */
} vlmc_stop_text_t;

/* NULL-terminated message when the strings are not acceptable (empty, too many, too long). */
const char *vlmc_stop_text_check(const char *const *strings, size_t count);
void vlmc_stop_text_init(vlmc_stop_text_t *s, const char *const *strings, size_t count);
void vlmc_stop_text_deinit(vlmc_stop_text_t *s);

/* Adds `len` bytes of generated text; appends to `out` what may be released now. Returns true
 * when a stop string is complete (then `out` ends just before it and later pushes add
 * nothing). */
bool vlmc_stop_text_push(vlmc_stop_text_t *s, const char *text, size_t len, vlmc_strbuf_t *out);
/* The end of the answer: what was held back goes out (it never became a stop string). */
void vlmc_stop_text_finish(vlmc_stop_text_t *s, vlmc_strbuf_t *out);

#endif
