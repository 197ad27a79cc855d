/* Typed, located access to JSON documents (cJSON), shared by the frontend's config parsers
 * and the artifact's kernel tables: one set of helpers, so that every JSON file vlmc reads
 * reports errors the same way. Every error names the file and the dotted key path ("config.json:
 * text_config.hidden_size: expected an integer, got a string"); a JSON syntax error names
 * line:col. A `null` value counts as absent everywhere: transformers writes `null` for keys it
 * does not use (text_config.image_token_id in 4.5x re-saves). */
#ifndef VLMC_SUPPORT_JSON_H
#define VLMC_SUPPORT_JSON_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "support/status.h"
#include "support/strbuf.h"

enum { VLMC_JSON_PATH_MAX = 160 };

/* A value located in a document: `node` is NULL when the key is absent (or null); `path` is
 * what messages call it; `also`, when not empty, lists the other spellings that were looked up
 * too ("hidden_size"), for the message about a missing key. */
typedef struct {
  const char *file;
  const cJSON *node;
  char path[VLMC_JSON_PATH_MAX];
  char also[VLMC_JSON_PATH_MAX];
} vlmc_json_ref_t;

/* Parses `len` bytes of `text` (need not be NUL-terminated) as one JSON document; the caller
 * owns *out_root (cJSON_Delete). Also refuses a key given twice in any object, since Python
 * would silently keep the last one and cJSON the first. */
vlmc_status_t vlmc_json_parse_document(const char *file, const char *text, size_t len,
                                       cJSON **out_root);

/* vlmc_json_parse_document for config files, whose top level must be an object: anything
 * else is refused ("FILE: expected a JSON object, got an array") and nothing is returned. */
vlmc_status_t vlmc_json_parse_object(const char *file, const char *text, size_t len,
                                     cJSON **out_root);

/* "a string", "a number", "null", ... for messages. */
const char *vlmc_json_kind(const cJSON *item);

/* Looks up `key` in `object` (which may be NULL); `object_path` is "" for the root. */
vlmc_json_ref_t vlmc_json_ref(const char *file, const cJSON *object, const char *object_path,
                              const char *key);
/* Element `index` of an array ref (absent when out of range). O(index): walk whole arrays with
 * cJSON_ArrayForEach and vlmc_json_ref_item instead, which is linear overall. */
vlmc_json_ref_t vlmc_json_ref_index(const vlmc_json_ref_t *array, int index);
/* The ref of `element`, the `index`-th element of `array`, found while iterating:
 *   int i = 0;
 *   const cJSON *e;
 *   cJSON_ArrayForEach(e, array.node) {
 *     vlmc_json_ref_t item = vlmc_json_ref_item(&array, e, i++);
 *     ...
 *   } */
vlmc_json_ref_t vlmc_json_ref_item(const vlmc_json_ref_t *array, const cJSON *element, int index);

/* "<file>: required key <path> is missing [(also looked for <also>)]". */
vlmc_status_t vlmc_json_missing(const vlmc_json_ref_t *ref);
/* "<file>: <path>: <message>", for consistency checks made by the callers. */
vlmc_status_t vlmc_json_error(const vlmc_json_ref_t *ref, vlmc_status_code_t code, const char *fmt,
                              ...) VLMC_PRINTF(3, 4);

/* Typed reads of a present value; each refuses the wrong JSON type or a value out of range.
 * The `_req` forms also refuse an absent value; the `_opt` forms leave *out untouched and set
 * *out_present (may be NULL) to false. */
vlmc_status_t vlmc_json_int_req(const vlmc_json_ref_t *ref, int64_t min, int64_t max, int64_t *out);
vlmc_status_t vlmc_json_int_opt(const vlmc_json_ref_t *ref, int64_t min, int64_t max, int64_t *out,
                                bool *out_present);
vlmc_status_t vlmc_json_double_req(const vlmc_json_ref_t *ref, double *out);
vlmc_status_t vlmc_json_double_opt(const vlmc_json_ref_t *ref, double *out, bool *out_present);
vlmc_status_t vlmc_json_bool_req(const vlmc_json_ref_t *ref, bool *out);
vlmc_status_t vlmc_json_bool_opt(const vlmc_json_ref_t *ref, bool *out, bool *out_present);
/* The string is borrowed from the document. */
vlmc_status_t vlmc_json_string_req(const vlmc_json_ref_t *ref, const char **out);
vlmc_status_t vlmc_json_string_opt(const vlmc_json_ref_t *ref, const char **out, bool *out_present);
/* A present value must be an object / an array of exactly `count` elements (count < 0: any). */
vlmc_status_t vlmc_json_expect_object(const vlmc_json_ref_t *ref);
vlmc_status_t vlmc_json_expect_array(const vlmc_json_ref_t *ref, int count);

/* Reads a JSON integer or list of integers (token ids) into ids[0..max); *out_count = 0 when
 * absent. Each id must be in [0, 2^31). */
vlmc_status_t vlmc_json_id_list_opt(const vlmc_json_ref_t *ref, int64_t *ids, int max,
                                    int *out_count);

/* Appends `text` as a JSON string literal (quoted, with \", \\ and control characters escaped),
 * for writers that lay out their JSON by hand. */
void vlmc_json_write_string(vlmc_strbuf_t *out, const char *text);

/* Reads a whole small file into a NUL-terminated buffer, or reports absence: *out_text = NULL
 * when `path` does not exist (any other failure is an error). */
vlmc_status_t vlmc_json_read_optional_file(const char *path, char **out_text, size_t *out_len);

/* Reads `path`, or `path`/`name` when `path` is a folder; *out_file (malloc'd) is the path
 * that was read, for messages. VLMC_NOT_FOUND when the folder has no `name`. */
vlmc_status_t vlmc_json_read_config_file(const char *path, const char *name, char **out_text,
                                         size_t *out_len, char **out_file);


#endif
