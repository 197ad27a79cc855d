/* The chat template of Qwen2-VL / Qwen2.5-VL and of Qwen3-VL (and the text templates of Qwen2-,
 * Qwen2.5- and Qwen3-Instruct, which text-only checkpoints carry: text messages only, no image
 * slots):
 * recognising it in a checkpoint, rendering messages to prompt text, and tokenizing that text
 * with each <|image_pad|> expanded to the image's merged-token count (spec §5.1, §2.5).
 *
 * vlmc does not run Jinja. It recognises the official template by structure: the template is
 * lexed with the whitespace rules transformers uses (trim_blocks, lstrip_blocks, "-" markers),
 * every tag is normalised (spacing, quote style, x['a'] == x.a, '...' + ... output split into
 * literal text and expressions) and the result is compared with the official template's.
 * Whitespace-only variants therefore pass; anything else is refused by name, never guessed:
 *   "chat_template.jinja: template not recognised as the Qwen2-VL template, the closest known
 *    one (uses 'documents', which it does not)". The rendering is then C code with the
 *    template's meaning. */
#ifndef VLMC_FRONTEND_CHAT_TEMPLATE_H
#define VLMC_FRONTEND_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frontend/tokenizer.h"
#include "support/arena.h"
#include "support/status.h"
#include "support/strbuf.h"

typedef enum {
  VLMC_CHAT_TEMPLATE_QWEN2_VL, /* the official Qwen2-VL template, also Qwen2.5-VL's */
  /* Qwen2-Instruct's text template (a text-only Qwen2's): for text messages the same prompt
   * text as Qwen2-VL's (the default system turn, <|im_start|>role ... <|im_end|>); it has no
   * image or video slots, so a message with one is refused when rendered. */
  VLMC_CHAT_TEMPLATE_QWEN2_TEXT,
  /* Qwen2.5-Instruct's (a text-only Qwen2.5's): a tools branch, which vlmc never takes (it
   * passes no tools), and the default system turn "You are Qwen, created by Alibaba Cloud. You
   * are a helpful assistant."; text messages only. */
  VLMC_CHAT_TEMPLATE_QWEN2_5_TEXT,
  /* Qwen3's (a text-only Qwen3's): no default system turn; an assistant turn after the last
   * user query keeps its reasoning as <think>...</think>, earlier ones drop it; the generation
   * prompt adds an empty think block when thinking is switched off. Text messages only. */
  VLMC_CHAT_TEMPLATE_QWEN3_TEXT,
  /* Qwen3-VL-Instruct's: no default system turn; a first system message prints its text (a
   * string or its text parts), later ones print nothing; user turns carry the image and video
   * slots (numbered with add_vision_id, as Qwen2-VL's), assistant turns their text only; a tools
   * branch and tool turns, which vlmc never uses. An image or video in any turn but a user's
   * (which the template would drop, leaving the processor an image without a slot) is refused. */
  VLMC_CHAT_TEMPLATE_QWEN3_VL,
} vlmc_chat_template_kind_t;

typedef struct {
  vlmc_chat_template_kind_t kind;
} vlmc_chat_template_t;

/* The official template's exact text (what tests/fixtures/chat_templates/qwen2_vl.jinja holds). */
const char *vlmc_chat_template_qwen2_vl_text(void);

/* Extracts the template text from a file's contents: `.json` files (chat_template.json,
 * tokenizer_config.json) hold it under "chat_template" (a string, or a list of
 * {"name","template"} from which "default" is taken); any other file is the template itself.
 * *out_text is malloc'd and NUL-terminated. */
vlmc_status_t vlmc_chat_template_text_from_file(const char *source_name, const char *contents,
                                                size_t len, char **out_text);

/* Recognises `text` (read from `source_name`, which starts every message) as one of the known
 * templates; any other is refused with its difference from the known one it is closest to
 * (the longest shared start). */
vlmc_status_t vlmc_chat_template_recognize(const char *source_name, const char *text, size_t len,
                                           vlmc_chat_template_t *out_template);

/* ---- messages ---- */

typedef enum {
  VLMC_CHAT_PART_TEXT,
  VLMC_CHAT_PART_IMAGE,
  VLMC_CHAT_PART_VIDEO,
} vlmc_chat_part_kind_t;

typedef struct {
  vlmc_chat_part_kind_t kind;
  const char *text; /* VLMC_CHAT_PART_TEXT only */
  size_t text_len;
} vlmc_chat_part_t;

typedef struct {
  const char *role;
  /* Content is either one string (parts == NULL) or a list of parts. */
  const char *text;
  size_t text_len;
  const vlmc_chat_part_t *parts;
  size_t part_count;
} vlmc_chat_message_t;

struct cJSON;

/* Reads HuggingFace-style messages, a JSON array of {"role": "...", "content": "..." or
 * [{"type": "image"}, {"type": "text", "text": "..."}, ...]}. Items are classified as the
 * template does: image if type is "image" or the item has an "image" or "image_url" key,
 * else video if type is "video" or it has a "video" key, else text if it has a "text" key,
 * else nothing is rendered for it. Everything lives in `arena`. Errors name `source_name` and
 * the JSON path ("chat_cases.json: [2].messages[0].content[1].text: expected a string"). */
vlmc_status_t vlmc_chat_messages_from_json(const char *source_name, const char *path,
                                           const struct cJSON *messages, vlmc_arena_t *arena,
                                           vlmc_chat_message_t **out_messages,
                                           size_t *out_count);

typedef struct {
  bool add_generation_prompt; /* append "<|im_start|>assistant\n" */
  bool add_vision_id;         /* prefix "Picture N: " / "Video N: " (counted per conversation) */
  /* Qwen3's enable_thinking: false appends "<think>\n\n</think>\n\n" to the generation
   * prompt; left true (the template's "undefined"), nothing is added. */
  bool disable_thinking;
} vlmc_chat_render_options_t;

/* Appends the prompt text the template renders for `messages` to `out`. */
vlmc_status_t vlmc_chat_template_render(const vlmc_chat_template_t *chat_template,
                                        const vlmc_chat_message_t *messages, size_t count,
                                        const vlmc_chat_render_options_t *options,
                                        vlmc_strbuf_t *out);

/* ---- prompt tokenization with pad expansion ---- */

typedef struct {
  int64_t t, h, w; /* image_grid_thw / video_grid_thw: patches before merging */
} vlmc_chat_grid_t;

/* mm_token_type_ids as the 5.x processor returns them. */
enum { VLMC_CHAT_TOKEN_TEXT = 0, VLMC_CHAT_TOKEN_IMAGE = 1, VLMC_CHAT_TOKEN_VIDEO = 2 };

typedef struct {
  int32_t *ids;
  uint8_t *token_types; /* VLMC_CHAT_TOKEN_* per position */
  size_t len;
} vlmc_chat_prompt_t;

void vlmc_chat_prompt_deinit(vlmc_chat_prompt_t *prompt);

/* Tokenizes rendered prompt text and replaces the k-th <|image_pad|> with
 * t*h*w / merge_size^2 copies for image_grids[k] (likewise <|video_pad|> with video_grids).
 * The number of pads in the text must equal the number of grids. */
vlmc_status_t vlmc_chat_prompt_tokenize(const vlmc_tokenizer_t *tokenizer, const char *text,
                                        size_t len, const vlmc_chat_grid_t *image_grids,
                                        size_t image_count, const vlmc_chat_grid_t *video_grids,
                                        size_t video_count, int64_t merge_size,
                                        vlmc_chat_prompt_t *out_prompt);

#endif
