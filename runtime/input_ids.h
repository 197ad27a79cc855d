/* Explicit token ids as the user gives them: a JSON list of non-negative integers
 * ("[151644, 872, 198]"), read from vlmc-run's --input-ids file or from one line of its chat
 * input. One parser, so that both places accept the same lists and refuse the same ones with
 * the same messages. Whether an id is inside the model's vocabulary is the session's check
 * (it knows the vocabulary); this one only bounds ids to what a token id can be. */
#ifndef VLMC_RUNTIME_INPUT_IDS_H
#define VLMC_RUNTIME_INPUT_IDS_H

#include <stddef.h>
#include <stdint.h>

#include "support/status.h"

/* The largest id accepted: the tokenizer's ids are int32. */
#define VLMC_TOKEN_ID_MAX INT32_MAX

/* Parses `len` bytes of `text` (need not be NUL-terminated) into a malloc'd array of *out_n
 * ids (free it); `name` names the text in messages ("ids.json", "stdin:3"). Refused, by name
 * and element index: text that is not JSON, anything but a list, an empty list, and elements
 * that are not integers in [0, VLMC_TOKEN_ID_MAX] ("stdin:3: [2]: 1.5 is not an integer").
 * Linear in the length of the text. On error *out is NULL and *out_n 0. */
vlmc_status_t vlmc_parse_token_ids(const char *name, const char *text, size_t len, int64_t **out,
                                   size_t *out_n);

#endif
