/* One generation request turned into model inputs: the chat prompt rendered by the
 * checkpoint's template (images first, in command-line order, then the text, as the reference
 * processor does for [image..., text] content), tokenized with each image's pads expanded,
 * the images preprocessed into pixel_values, and the M-RoPE position ids and rope delta of the
 * prompt (spec §4.4). Everything a backend needs before the first forward pass. */
#ifndef VLMC_RUNTIME_REQUEST_H
#define VLMC_RUNTIME_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "frontend/chat_template.h"
#include "frontend/preprocess.h"
#include "frontend/tokenizer.h"
#include "support/status.h"

typedef struct {
  int64_t image_token_id;
  int64_t video_token_id;
  int64_t merge_size;
} vlmc_request_model_t;

typedef struct {
  const char *system_prompt;       /* NULL: the template's default system message */
  const char *const *image_paths;  /* PNG or JPEG files */
  size_t num_images;
  const char *prompt;              /* the user's text */
  /* Or a whole conversation (messages != NULL; system_prompt and prompt unused): system,
   * user and assistant messages rendered as the template renders them, its image parts
   * taking image_paths in order (as many parts as images), the generation prompt after it. */
  const vlmc_chat_message_t *messages;
  size_t num_messages;
} vlmc_request_spec_t;

typedef struct {
  char *prompt_text;                /* the rendered template, before pad expansion */
  int64_t *input_ids;               /* [seq_len] */
  size_t seq_len;
  int64_t *positions;               /* [3][seq_len], plane-major (T, H, W) */
  int64_t rope_delta;
  vlmc_preprocess_output_t pixels;  /* empty when there are no images */
} vlmc_request_t;

vlmc_status_t vlmc_request_build(const vlmc_tokenizer_t *tokenizer,
                                 const vlmc_chat_template_t *chat_template,
                                 const vlmc_preprocess_params_t *preprocess,
                                 vlmc_request_model_t model, const vlmc_request_spec_t *spec,
                                 vlmc_request_t *out_request);
void vlmc_request_deinit(vlmc_request_t *request);

#endif
