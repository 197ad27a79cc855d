/* Batch requests (vlmc-run --batch FILE): one JSON object per line, each one generation on a
 * fresh conversation of the same loaded session, so that many prompts pay the artifact's load,
 * the weights' upload and a device backend's pipeline creation once:
 *   {"id": "scene-7", "prompt": "What shapes are in this image?", "images": ["a.png"],
 *    "system": "You are terse.", "max_new_tokens": 48}
 * or, instead of "prompt", the prompt as token ids (no chat template: the ids are what the model
 * sees, image pads included; for artifacts without a tokenizer, and benchmarks):
 *   {"id": 3, "input_ids": [151652, 151655, 151655, 151653, 1000], "images": ["a.png"]}
 * One of "prompt" and "input_ids" is required, not both; "system" goes only with "prompt".
 * "input_ids" is read by the parser of --input-ids (runtime/input_ids.h), with its limits and
 * messages. "id" (a string or an integer) is echoed in the answer line so that
 * a script can match answers to requests; "images" are PNG or JPEG paths shown before the text,
 * in order; "system" and "max_new_tokens" override the command line's --system and -n. Any
 * other key is refused by name: a misspelt "image" must not silently drop the picture.
 * The answer format is vlmc-run's (tools/vlmc_run.c, docs/design.md). */
#ifndef VLMC_RUNTIME_BATCH_H
#define VLMC_RUNTIME_BATCH_H

#include <cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "support/status.h"

enum {
  VLMC_BATCH_MAX_IMAGES = 64,       /* as vlmc-run's --image */
  VLMC_BATCH_MAX_ID = 256,          /* bytes of an "id" as JSON text */
  VLMC_BATCH_MAX_NEW_TOKENS = 1 << 24 /* as vlmc-run's -n */
};

typedef struct {
  cJSON *doc;         /* owns every string below */
  char id[VLMC_BATCH_MAX_ID + 1]; /* the "id" as JSON text ("\"scene-7\"", "7"); "" if absent */
  const char *prompt;  /* NULL when the request gives input_ids */
  int64_t *input_ids;  /* malloc'd, owned; NULL when the request gives a prompt */
  size_t num_input_ids;
  const char *system; /* NULL: the command line's */
  const char *images[VLMC_BATCH_MAX_IMAGES];
  size_t num_images;
  int max_new_tokens; /* 0: the command line's */
} vlmc_batch_request_t;

/* Parses `len` bytes of `text` (one line; need not be NUL-terminated) named `name` in messages
 * ("requests.jsonl:3"). Refused, by name and key: text that is not one JSON object, neither or
 * both of "prompt" and "input_ids", a non-string "prompt", an "input_ids" that --input-ids
 * would refuse, "system" beside "input_ids", an "id" that is neither a string nor an integer
 * or longer than VLMC_BATCH_MAX_ID, "images" that is not a list of at most
 * VLMC_BATCH_MAX_IMAGES non-empty strings, a "max_new_tokens" outside
 * 1..VLMC_BATCH_MAX_NEW_TOKENS, and unknown keys. On error *out is zeroed (deinit is still
 * safe). */
vlmc_status_t vlmc_batch_request_parse(const char *name, const char *text, size_t len,
                                       vlmc_batch_request_t *out);
void vlmc_batch_request_deinit(vlmc_batch_request_t *request);

#endif
