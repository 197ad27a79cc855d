/* Typed, located JSON access (see json.h). */
#define _POSIX_C_SOURCE 200809L
#include "support/strbuf.h"
#include "support/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "support/file.h"

/* Integers are exact in a double up to 2^53; config values never come near it. */
#define MAX_EXACT_INTEGER 9007199254740992.0

const char *vlmc_json_kind(const cJSON *item) {
  if (!item) return "nothing";
  if (cJSON_IsString(item)) return "a string";
  if (cJSON_IsNumber(item)) return "a number";
  if (cJSON_IsBool(item)) return "a boolean";
  if (cJSON_IsNull(item)) return "null";
  if (cJSON_IsArray(item)) return "an array";
  if (cJSON_IsObject(item)) return "an object";
  return "an invalid value";
}

static int compare_keys(const void *a, const void *b) {
  return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* Sorting the keys of each object keeps this O(n log n) even for hostile inputs. */
static vlmc_status_t check_unique_keys(const char *file, const cJSON *item) {
  if (!cJSON_IsObject(item) && !cJSON_IsArray(item)) return NULL;
  size_t n = 0;
  for (const cJSON *child = item->child; child; child = child->next) {
    VLMC_RETURN_IF_ERROR(check_unique_keys(file, child));
    ++n;
  }
  if (!cJSON_IsObject(item) || n < 2) return NULL;
  const cJSON **children = malloc(n * sizeof *children);
  if (!children) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", file);
  size_t i = 0;
  for (const cJSON *child = item->child; child; child = child->next) children[i++] = child;
  qsort(children, n, sizeof *children, compare_keys);
  vlmc_status_t status = NULL;
  for (i = 1; i < n && !status; ++i)
    if (strcmp(children[i - 1]->string, children[i]->string) == 0)
      status = vlmc_status_make(VLMC_PARSE_ERROR, "%s: key \"%.100s\" is given twice in one object",
                                file, children[i]->string);
  free(children);
  return status;
}

vlmc_status_t vlmc_json_parse_document(const char *file, const char *text, size_t len,
                                       cJSON **out_root) {
  *out_root = NULL;
  /* cJSON gets a NUL-terminated copy so that no parse can run past the buffer. */
  char *copy = malloc(len + 1);
  if (!copy) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", file);
  memcpy(copy, text, len);
  copy[len] = '\0';
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(copy, len, &end, false);
  size_t stop = end ? (size_t)(end - copy) : 0;
  /* cJSON stops right after the value; only JSON whitespace may follow it. */
  while (root && stop < len && strchr(" \t\r\n", copy[stop]) && copy[stop] != '\0') ++stop;
  size_t line, col;
  vlmc_text_line_col(copy, stop, &line, &col);
  free(copy);
  /* cJSON's error position is approximate (within a character or so; the last byte for an
   * input that ends too early). */
  if (!root) return vlmc_status_make(VLMC_PARSE_ERROR, "%s:%zu:%zu: invalid JSON", file, line, col);
  if (stop < len) {
    cJSON_Delete(root);
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s:%zu:%zu: unexpected text after the JSON value",
                            file, line, col);
  }
  vlmc_status_t status = check_unique_keys(file, root);
  if (status) {
    cJSON_Delete(root);
    return status;
  }
  *out_root = root;
  return NULL;
}

vlmc_status_t vlmc_json_parse_object(const char *file, const char *text, size_t len,
                                     cJSON **out_root) {
  VLMC_RETURN_IF_ERROR(vlmc_json_parse_document(file, text, len, out_root));
  if (cJSON_IsObject(*out_root)) return NULL;
  vlmc_status_t status = vlmc_status_make(
      VLMC_PARSE_ERROR, "%s: expected a JSON object, got %s", file, vlmc_json_kind(*out_root));
  cJSON_Delete(*out_root);
  *out_root = NULL;
  return status;
}

/* Paths longer than the buffer (hostile keys) end in "..." rather than being cut silently. */
static void set_path(char *path, const char *fmt, ...) VLMC_PRINTF(2, 3);
static void set_path(char *path, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(path, VLMC_JSON_PATH_MAX, fmt, ap);
  va_end(ap);
  if (n >= VLMC_JSON_PATH_MAX) memcpy(path + VLMC_JSON_PATH_MAX - 4, "...", 4);
}

vlmc_json_ref_t vlmc_json_ref(const char *file, const cJSON *object, const char *object_path,
                              const char *key) {
  vlmc_json_ref_t ref = {.file = file};
  set_path(ref.path, "%s%s%s", object_path, object_path[0] ? "." : "", key);
  const cJSON *node = cJSON_IsObject(object) ? cJSON_GetObjectItemCaseSensitive(object, key) : NULL;
  ref.node = cJSON_IsNull(node) ? NULL : node;
  return ref;
}

vlmc_json_ref_t vlmc_json_ref_index(const vlmc_json_ref_t *array, int index) {
  vlmc_json_ref_t ref = {.file = array->file};
  set_path(ref.path, "%s[%d]", array->path, index);
  const cJSON *node = cJSON_IsArray(array->node) ? cJSON_GetArrayItem(array->node, index) : NULL;
  ref.node = cJSON_IsNull(node) ? NULL : node;
  return ref;
}

vlmc_json_ref_t vlmc_json_ref_item(const vlmc_json_ref_t *array, const cJSON *element, int index) {
  vlmc_json_ref_t ref = {.file = array->file};
  set_path(ref.path, "%s[%d]", array->path, index);
  ref.node = cJSON_IsNull(element) ? NULL : element;
  return ref;
}

vlmc_status_t vlmc_json_missing(const vlmc_json_ref_t *ref) {
  if (ref->also[0])
    return vlmc_status_make(VLMC_NOT_FOUND, "%s: required key %s is missing (also looked for %s)",
                            ref->file, ref->path, ref->also);
  return vlmc_status_make(VLMC_NOT_FOUND, "%s: required key %s is missing", ref->file, ref->path);
}

vlmc_status_t vlmc_json_error(const vlmc_json_ref_t *ref, vlmc_status_code_t code, const char *fmt,
                              ...) {
  va_list ap;
  va_start(ap, fmt);
  vlmc_status_t status = vlmc_status_makev(code, fmt, ap);
  va_end(ap);
  return vlmc_status_annotate(status, "%s: %s: ", ref->file, ref->path);
}

static vlmc_status_t wrong_type(const vlmc_json_ref_t *ref, const char *expected) {
  return vlmc_json_error(ref, VLMC_PARSE_ERROR, "expected %s, got %s", expected,
                         vlmc_json_kind(ref->node));
}

static vlmc_status_t read_int(const vlmc_json_ref_t *ref, int64_t min, int64_t max, int64_t *out) {
  if (!cJSON_IsNumber(ref->node)) return wrong_type(ref, "an integer");
  double value = ref->node->valuedouble;
  if (!isfinite(value) || value != floor(value) || fabs(value) > MAX_EXACT_INTEGER)
    return vlmc_json_error(ref, VLMC_PARSE_ERROR, "expected an integer, got %g", value);
  int64_t integer = (int64_t)value;
  if (integer < min)
    return vlmc_json_error(ref, VLMC_OUT_OF_RANGE, "expected an integer >= %lld, got %lld",
                           (long long)min, (long long)integer);
  if (integer > max)
    return vlmc_json_error(ref, VLMC_OUT_OF_RANGE, "expected an integer <= %lld, got %lld",
                           (long long)max, (long long)integer);
  *out = integer;
  return NULL;
}

vlmc_status_t vlmc_json_int_req(const vlmc_json_ref_t *ref, int64_t min, int64_t max,
                                int64_t *out) {
  if (!ref->node) return vlmc_json_missing(ref);
  return read_int(ref, min, max, out);
}

vlmc_status_t vlmc_json_int_opt(const vlmc_json_ref_t *ref, int64_t min, int64_t max, int64_t *out,
                                bool *out_present) {
  if (out_present) *out_present = ref->node != NULL;
  return ref->node ? read_int(ref, min, max, out) : NULL;
}

static vlmc_status_t read_double(const vlmc_json_ref_t *ref, double *out) {
  if (!cJSON_IsNumber(ref->node)) return wrong_type(ref, "a number");
  if (!isfinite(ref->node->valuedouble))
    return vlmc_json_error(ref, VLMC_OUT_OF_RANGE, "expected a finite number");
  *out = ref->node->valuedouble;
  return NULL;
}

vlmc_status_t vlmc_json_double_req(const vlmc_json_ref_t *ref, double *out) {
  if (!ref->node) return vlmc_json_missing(ref);
  return read_double(ref, out);
}

vlmc_status_t vlmc_json_double_opt(const vlmc_json_ref_t *ref, double *out, bool *out_present) {
  if (out_present) *out_present = ref->node != NULL;
  return ref->node ? read_double(ref, out) : NULL;
}

static vlmc_status_t read_bool(const vlmc_json_ref_t *ref, bool *out) {
  if (!cJSON_IsBool(ref->node)) return wrong_type(ref, "true or false");
  *out = cJSON_IsTrue(ref->node);
  return NULL;
}

vlmc_status_t vlmc_json_bool_req(const vlmc_json_ref_t *ref, bool *out) {
  if (!ref->node) return vlmc_json_missing(ref);
  return read_bool(ref, out);
}

vlmc_status_t vlmc_json_bool_opt(const vlmc_json_ref_t *ref, bool *out, bool *out_present) {
  if (out_present) *out_present = ref->node != NULL;
  return ref->node ? read_bool(ref, out) : NULL;
}

static vlmc_status_t read_string(const vlmc_json_ref_t *ref, const char **out) {
  if (!cJSON_IsString(ref->node)) return wrong_type(ref, "a string");
  *out = ref->node->valuestring;
  return NULL;
}

vlmc_status_t vlmc_json_string_req(const vlmc_json_ref_t *ref, const char **out) {
  if (!ref->node) return vlmc_json_missing(ref);
  return read_string(ref, out);
}

vlmc_status_t vlmc_json_string_opt(const vlmc_json_ref_t *ref, const char **out,
                                   bool *out_present) {
  if (out_present) *out_present = ref->node != NULL;
  return ref->node ? read_string(ref, out) : NULL;
}

vlmc_status_t vlmc_json_expect_object(const vlmc_json_ref_t *ref) {
  if (ref->node && !cJSON_IsObject(ref->node)) return wrong_type(ref, "an object");
  return NULL;
}

vlmc_status_t vlmc_json_expect_array(const vlmc_json_ref_t *ref, int count) {
  if (!ref->node) return NULL;
  if (!cJSON_IsArray(ref->node)) return wrong_type(ref, "an array");
  int size = cJSON_GetArraySize(ref->node);
  if (count >= 0 && size != count)
    return vlmc_json_error(ref, VLMC_PARSE_ERROR, "expected %d elements, got %d", count, size);
  return NULL;
}

vlmc_status_t vlmc_json_id_list_opt(const vlmc_json_ref_t *ref, int64_t *ids, int max,
                                    int *out_count) {
  *out_count = 0;
  if (!ref->node) return NULL;
  if (cJSON_IsNumber(ref->node)) {
    VLMC_RETURN_IF_ERROR(read_int(ref, 0, INT32_MAX, &ids[0]));
    *out_count = 1;
    return NULL;
  }
  if (!cJSON_IsArray(ref->node)) return wrong_type(ref, "an integer or a list of integers");
  int size = cJSON_GetArraySize(ref->node);
  if (size == 0 || size > max)
    return vlmc_json_error(ref, VLMC_OUT_OF_RANGE, "expected 1 to %d ids, got %d", max, size);
  int i = 0;
  const cJSON *node;
  cJSON_ArrayForEach(node, ref->node) {
    vlmc_json_ref_t element = vlmc_json_ref_item(ref, node, i);
    if (!element.node) return wrong_type(&element, "an integer");
    VLMC_RETURN_IF_ERROR(read_int(&element, 0, INT32_MAX, &ids[i]));
    ++i;
  }
  *out_count = size;
  return NULL;
}

void vlmc_json_write_string(vlmc_strbuf_t *out, const char *text) {
  vlmc_strbuf_putc(out, '"');
  for (const unsigned char *p = (const unsigned char *)text; *p; ++p) {
    if (*p == '"' || *p == '\\') {
      vlmc_strbuf_putc(out, '\\');
      vlmc_strbuf_putc(out, (char)*p);
    } else if (*p < 0x20) {
      vlmc_strbuf_printf(out, "\\u%04x", *p);
    } else {
      vlmc_strbuf_putc(out, (char)*p);
    }
  }
  vlmc_strbuf_putc(out, '"');
}

vlmc_status_t vlmc_json_read_optional_file(const char *path, char **out_text, size_t *out_len) {
  *out_text = NULL;
  *out_len = 0;
  struct stat st;
  if (stat(path, &st) != 0 && errno == ENOENT) return NULL;
  return vlmc_file_read_all(path, out_text, out_len);
}

vlmc_status_t vlmc_json_read_config_file(const char *path, const char *name, char **out_text,
                                         size_t *out_len, char **out_file) {
  *out_text = NULL;
  *out_file = NULL;
  struct stat st;
  bool folder = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
  char *file = folder ? vlmc_path_join(path, name) : strdup(path);
  if (!file) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", path);
  vlmc_status_t status = vlmc_json_read_optional_file(file, out_text, out_len);
  if (!status && !*out_text) status = vlmc_status_make(VLMC_NOT_FOUND, "%s: no such file", file);
  if (status) {
    free(file);
    return status;
  }
  *out_file = file;
  return NULL;
}
