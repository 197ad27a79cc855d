/* The pre-tokenizer settings of tokenizer.json: the Qwen2 Sequence[Split, ByteLevel] and the
 * translation of its Oniguruma regex into one PCRE2 runs with the same meaning. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "frontend/tokenizer_internal.h"

/* Oniguruma's Unicode `\s` is the White_Space property (U+0009..U+000D, U+0085, Zs, Zl, Zp);
 * PCRE2 10.42's also takes U+180E, which Unicode has not called a space since 6.3. */
static const char kWhiteSpaceClassBody[] = "\\t\\n\\x{0B}\\f\\r\\x{85}\\p{Z}";

static vlmc_status_t pretok_error(const vlmc_tokenizer_t *tokenizer, vlmc_status_code_t code,
                                  const char *fmt, ...) VLMC_PRINTF(3, 4);
static vlmc_status_t pretok_error(const vlmc_tokenizer_t *tokenizer, vlmc_status_code_t code,
                                  const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlmc_status_t status = vlmc_status_makev(code, fmt, ap);
  va_end(ap);
  return vlmc_status_annotate(status, "%s: ", tokenizer->name);
}

/* Copies a character class's opening ("[", "[^", and a leading literal "]") and returns the
 * index after it. */
static size_t copy_class_opening(const char *pattern, size_t len, size_t i, vlmc_strbuf_t *out) {
  vlmc_strbuf_putc(out, '[');
  ++i;
  if (i < len && pattern[i] == '^') vlmc_strbuf_putc(out, pattern[i++]);
  if (i < len && pattern[i] == ']') vlmc_strbuf_putc(out, pattern[i++]);
  return i;
}

/* Rewrites `\s` and `\S` into explicit White_Space classes; everything else is copied. */
static vlmc_status_t translate_pattern(const vlmc_tokenizer_t *tokenizer, const char *pattern,
                                       const char *path, vlmc_strbuf_t *out) {
  size_t len = strlen(pattern), i = 0;
  bool in_class = false;
  while (i < len) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < len) {
      char escaped = pattern[i + 1];
      if (escaped == 's') {
        if (!in_class) vlmc_strbuf_putc(out, '[');
        vlmc_strbuf_puts(out, kWhiteSpaceClassBody);
        if (!in_class) vlmc_strbuf_putc(out, ']');
      } else if (escaped == 'S') {
        if (in_class)
          return pretok_error(tokenizer, VLMC_UNSUPPORTED,
                              "%s: \\S inside a character class cannot be translated for PCRE2",
                              path);
        vlmc_strbuf_printf(out, "[^%s]", kWhiteSpaceClassBody);
      } else if (escaped == 'Q') {
        const char *quote_end = strstr(pattern + i, "\\E");
        size_t stop = quote_end ? (size_t)(quote_end - pattern) + 2 : len;
        vlmc_strbuf_append(out, pattern + i, stop - i);
        i = stop;
        continue;
      } else {
        vlmc_strbuf_append(out, pattern + i, 2);
      }
      i += 2;
    } else if (c == '[' && !in_class) {
      in_class = true;
      i = copy_class_opening(pattern, len, i, out);
    } else if (c == '[' && in_class && i + 1 < len && pattern[i + 1] == ':') {
      const char *posix_end = strstr(pattern + i, ":]");
      size_t stop = posix_end ? (size_t)(posix_end - pattern) + 2 : len;
      vlmc_strbuf_append(out, pattern + i, stop - i);
      i = stop;
    } else {
      if (c == ']' && in_class) in_class = false;
      vlmc_strbuf_putc(out, c);
      ++i;
    }
  }
  return out->failed ? vlmc_status_make(VLMC_OUT_OF_MEMORY, "tokenizer regex") : NULL;
}

static vlmc_status_t compile_split_regex(vlmc_tokenizer_t *tokenizer, const char *pattern,
                                         bool literal, const char *path) {
  vlmc_strbuf_t translated;
  vlmc_strbuf_init(&translated);
  vlmc_status_t status = NULL;
  if (literal)
    vlmc_strbuf_puts(&translated, pattern);
  else
    status = translate_pattern(tokenizer, pattern, path, &translated);
  if (status) {
    vlmc_strbuf_deinit(&translated);
    return status;
  }
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  /* PCRE2 refuses UCP beside LITERAL, and a literal needs no character properties. */
  uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  tokenizer->split_regex = pcre2_compile((PCRE2_SPTR)vlmc_strbuf_cstr(&translated),
                                         translated.len, options, &error_code, &error_offset,
                                         NULL);
  vlmc_strbuf_deinit(&translated);
  if (!tokenizer->split_regex) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    return pretok_error(tokenizer, VLMC_PARSE_ERROR,
                        "%s: the regex does not compile: %s (offset %zu after translation)", path,
                        (const char *)message, (size_t)error_offset);
  }
  /* JIT is only a speed-up; the interpreter gives the same matches where it is unavailable. */
  (void)pcre2_jit_compile(tokenizer->split_regex, PCRE2_JIT_COMPLETE);
  return NULL;
}

static const char *type_of(const cJSON *object) {
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(object, "type");
  return cJSON_IsObject(object) && cJSON_IsString(type) ? type->valuestring : NULL;
}

static vlmc_status_t load_split(vlmc_tokenizer_t *tokenizer, const cJSON *split,
                                const char *path) {
  char sub[96];
  const cJSON *behavior = cJSON_GetObjectItemCaseSensitive(split, "behavior");
  if (!cJSON_IsString(behavior) || strcmp(behavior->valuestring, "Isolated") != 0)
    return pretok_error(tokenizer, VLMC_UNSUPPORTED,
                        "%s.behavior: %s%s%s is not supported (vlmc supports \"Isolated\")", path,
                        cJSON_IsString(behavior) ? "\"" : "",
                        cJSON_IsString(behavior) ? behavior->valuestring : "this value",
                        cJSON_IsString(behavior) ? "\"" : "");
  const cJSON *invert = cJSON_GetObjectItemCaseSensitive(split, "invert");
  if (invert && !cJSON_IsFalse(invert))
    return pretok_error(tokenizer, VLMC_UNSUPPORTED,
                        "%s.invert: only false is supported", path);
  const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(split, "pattern");
  const cJSON *regex = cJSON_GetObjectItemCaseSensitive(pattern, "Regex");
  const cJSON *string = cJSON_GetObjectItemCaseSensitive(pattern, "String");
  if (cJSON_IsString(regex)) {
    snprintf(sub, sizeof sub, "%s.pattern.Regex", path);
    return compile_split_regex(tokenizer, regex->valuestring, false, sub);
  }
  if (cJSON_IsString(string) && string->valuestring[0] != '\0') {
    snprintf(sub, sizeof sub, "%s.pattern.String", path);
    return compile_split_regex(tokenizer, string->valuestring, true, sub);
  }
  return pretok_error(tokenizer, VLMC_PARSE_ERROR,
                      "%s.pattern: expected {\"Regex\": \"...\"} or {\"String\": \"...\"}", path);
}

/* ByteLevel after a Split must only map bytes: its own GPT-2 regex (use_regex, true when
 * absent) and the prefix space would change the words. */
static vlmc_status_t load_byte_level(const vlmc_tokenizer_t *tokenizer, const cJSON *stage,
                                     const char *path) {
  const cJSON *use_regex = cJSON_GetObjectItemCaseSensitive(stage, "use_regex");
  if (!cJSON_IsFalse(use_regex))
    return pretok_error(tokenizer, VLMC_UNSUPPORTED,
                        "%s.use_regex: %s is not supported (expected false: the Split before it "
                        "does the splitting)",
                        path, use_regex ? "this value" : "absent (meaning true)");
  const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(stage, "add_prefix_space");
  if (prefix && !cJSON_IsFalse(prefix))
    return pretok_error(tokenizer, VLMC_UNSUPPORTED,
                        "%s.add_prefix_space: only false is supported", path);
  return NULL;
}

static vlmc_status_t expect_stage(const vlmc_tokenizer_t *tokenizer, const cJSON *stage,
                                  const char *wanted, const char *path) {
  const char *type = type_of(stage);
  if (type && strcmp(type, wanted) == 0) return NULL;
  if (!type)
    return pretok_error(tokenizer, VLMC_PARSE_ERROR,
                        "%s: expected an object with \"type\": \"%s\"", path, wanted);
  return pretok_error(tokenizer, VLMC_UNSUPPORTED,
                      "%s.type: \"%s\" is not supported here (expected \"%s\"; vlmc supports the "
                      "Qwen2 Sequence[Split, ByteLevel])",
                      path, type, wanted);
}

vlmc_status_t vlmc_tok_pre_tokenizer_load(vlmc_tokenizer_t *tokenizer, const cJSON *root) {
  const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
  const char *type = type_of(pre);
  if (!type)
    return pretok_error(tokenizer, VLMC_UNSUPPORTED,
                        "pre_tokenizer: %s (expected the Qwen2 Sequence[Split, ByteLevel])",
                        pre == NULL || cJSON_IsNull(pre) ? "missing or null"
                                                         : "not an object with a \"type\"");
  if (strcmp(type, "Sequence") != 0)
    return pretok_error(tokenizer, VLMC_UNSUPPORTED,
                        "pre_tokenizer.type: \"%s\" is not supported (vlmc supports the Qwen2 "
                        "Sequence[Split, ByteLevel])",
                        type);
  const cJSON *stages = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
  if (!cJSON_IsArray(stages) || cJSON_GetArraySize(stages) != 2)
    return pretok_error(tokenizer, VLMC_UNSUPPORTED,
                        "pre_tokenizer.pretokenizers: expected two stages, Split then ByteLevel");
  const cJSON *split = stages->child, *byte_level = split->next;
  VLMC_RETURN_IF_ERROR(
      expect_stage(tokenizer, split, "Split", "pre_tokenizer.pretokenizers[0]"));
  VLMC_RETURN_IF_ERROR(
      expect_stage(tokenizer, byte_level, "ByteLevel", "pre_tokenizer.pretokenizers[1]"));
  VLMC_RETURN_IF_ERROR(load_byte_level(tokenizer, byte_level, "pre_tokenizer.pretokenizers[1]"));
  return load_split(tokenizer, split, "pre_tokenizer.pretokenizers[0]");
}
