/* Stop strings over a stream of generated text (stop_text.h). */
#include "runtime/stop_text.h"

#include <string.h>

const char *vlmc_stop_text_check(const char *const *strings, size_t count) {
  if (count > VLMC_STOP_MAX_STRINGS) return "at most 16 stop strings";
  for (size_t i = 0; i < count; ++i) {
    if (!strings[i] || !strings[i][0]) return "a stop string is empty";
    if (strlen(strings[i]) > VLMC_STOP_MAX_BYTES) return "a stop string is longer than 256 bytes";
  }
  return NULL;
}

void vlmc_stop_text_init(vlmc_stop_text_t *s, const char *const *strings, size_t count) {
  memset(s, 0, sizeof *s);
  s->strings = strings;
  s->count = count;
  vlmc_strbuf_init(&s->held);
}

void vlmc_stop_text_deinit(vlmc_stop_text_t *s) { vlmc_strbuf_deinit(&s->held); }

/* Where the earliest complete stop string starts in text[0 .. len) (len when none); *which
 * gets its index. */
static size_t first_stop(const vlmc_stop_text_t *s, const char *text, size_t len, size_t *which) {
  size_t best = len;
  for (size_t i = 0; i < s->count; ++i) {
    size_t n = strlen(s->strings[i]);
    for (size_t at = 0; at + n <= len && at < best; ++at)
      if (!memcmp(text + at, s->strings[i], n)) {
        best = at;
        *which = i;
        break;
      }
  }
  return best;
}

/* The length of the longest tail of text[0 .. len) that is a proper prefix of a stop string:
 * what must be held back. */
static size_t open_tail(const vlmc_stop_text_t *s, const char *text, size_t len) {
  size_t keep = 0;
  for (size_t i = 0; i < s->count; ++i) {
    size_t n = strlen(s->strings[i]);
    for (size_t t = n - 1 < len ? n - 1 : len; t > keep; --t)
      if (!memcmp(text + len - t, s->strings[i], t)) {
        keep = t;
        break;
      }
  }
  return keep;
}

bool vlmc_stop_text_push(vlmc_stop_text_t *s, const char *text, size_t len, vlmc_strbuf_t *out) {
  if (s->stopped) return true;
  if (!s->count) {
    vlmc_strbuf_append(out, text, len);
    return false;
  }
  vlmc_strbuf_append(&s->held, text, len);
  if (!s->held.len) return false;
  const char *h = s->held.data;
  size_t which = 0, at = first_stop(s, h, s->held.len, &which);
  if (at < s->held.len) {
    vlmc_strbuf_append(out, h, at);
    vlmc_strbuf_clear(&s->held);
    s->stopped = true;
    s->which = which;
    return true;
  }
  size_t keep = open_tail(s, h, s->held.len), release = s->held.len - keep;
  vlmc_strbuf_append(out, h, release);
  memmove(s->held.data, h + release, keep);
  s->held.len = keep;
  s->held.data[keep] = '\0';
  return false;
}

void vlmc_stop_text_finish(vlmc_stop_text_t *s, vlmc_strbuf_t *out) {
  if (!s->stopped && s->held.len) vlmc_strbuf_append(out, s->held.data, s->held.len);
  vlmc_strbuf_clear(&s->held);
}
