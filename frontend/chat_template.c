/* The Qwen2-VL chat template's meaning in C (spec §5.1): messages -> prompt text, and the
 * processor's expansion of each vision pad token into one pad per merged patch (§2.5). The
 * template text itself is only recognised (frontend/chat_template_match.c). */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/chat_template.h"
#include "support/checked_math.h"

static const char kDefaultSystem[] = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
static const char kImageSlot[] = "<|vision_start|><|image_pad|><|vision_end|>";
static const char kVideoSlot[] = "<|vision_start|><|video_pad|><|vision_end|>";

/* ---- locating the template text in a file ---- */

static bool ends_with(const char *text, const char *suffix) {
  size_t n = strlen(text), m = strlen(suffix);
  return n >= m && strcmp(text + n - m, suffix) == 0;
}

static vlmc_status_t dup_text(const char *text, size_t len, char **out_text) {
  char *copy = malloc(len + 1);
  if (!copy) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "chat template text");
  memcpy(copy, text, len);
  copy[len] = '\0';
  *out_text = copy;
  return NULL;
}

/* tokenizer_config.json may hold several named templates; the chat one is "default". */
static const char *default_from_list(const cJSON *list) {
  for (const cJSON *item = list->child; item; item = item->next) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(item, "template");
    if (cJSON_IsString(name) && strcmp(name->valuestring, "default") == 0 && cJSON_IsString(text))
      return text->valuestring;
  }
  return NULL;
}

static vlmc_status_t template_from_json(const char *source_name, const cJSON *root,
                                        char **out_text) {
  const cJSON *item = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "chat_template")
                                           : NULL;
  if (!item)
    return vlmc_status_make(VLMC_NOT_FOUND, "%s: chat_template: missing", source_name);
  if (cJSON_IsString(item)) return dup_text(item->valuestring, strlen(item->valuestring), out_text);
  if (cJSON_IsArray(item)) {
    const char *text = default_from_list(item);
    if (text) return dup_text(text, strlen(text), out_text);
    return vlmc_status_make(VLMC_NOT_FOUND,
                            "%s: chat_template: no {\"name\": \"default\", \"template\": ...} "
                            "entry in the list",
                            source_name);
  }
  return vlmc_status_make(VLMC_PARSE_ERROR,
                          "%s: chat_template: expected a string or a list of {\"name\", "
                          "\"template\"}",
                          source_name);
}

vlmc_status_t vlmc_chat_template_text_from_file(const char *source_name, const char *contents,
                                                size_t len, char **out_text) {
  *out_text = NULL;
  if (!ends_with(source_name, ".json")) return dup_text(contents, len, out_text);
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(contents, len, &end, false);
  if (!root) {
    size_t offset = end && end >= contents && end <= contents + len ? (size_t)(end - contents) : 0;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < offset; ++i) {
      col = contents[i] == '\n' ? 1 : col + 1;
      if (contents[i] == '\n') ++line;
    }
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: invalid JSON at line %zu, column %zu",
                            source_name, line, col);
  }
  vlmc_status_t status = template_from_json(source_name, root, out_text);
  cJSON_Delete(root);
  return status;
}

/* ---- messages from JSON ---- */

static bool has_key(const cJSON *object, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(object, key) != NULL;
}

static bool type_is(const cJSON *item, const char *type) {
  const cJSON *value = cJSON_GetObjectItemCaseSensitive(item, "type");
  return cJSON_IsString(value) && strcmp(value->valuestring, type) == 0;
}

/* Classifies an item as the template's if/elif chain does; false for an item it skips. */
static vlmc_status_t parse_part(const char *source, const char *path, size_t index,
                                const cJSON *item, vlmc_arena_t *arena, vlmc_chat_part_t *out_part,
                                bool *out_rendered) {
  *out_rendered = true;
  if (!cJSON_IsObject(item))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: %s[%zu]: expected an object", source, path,
                            index);
  memset(out_part, 0, sizeof *out_part);
  if (type_is(item, "image") || has_key(item, "image") || has_key(item, "image_url")) {
    out_part->kind = VLMC_CHAT_PART_IMAGE;
  } else if (type_is(item, "video") || has_key(item, "video")) {
    out_part->kind = VLMC_CHAT_PART_VIDEO;
  } else if (has_key(item, "text")) {
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(item, "text");
    if (!cJSON_IsString(text))
      return vlmc_status_make(VLMC_PARSE_ERROR, "%s: %s[%zu].text: expected a string", source,
                              path, index);
    out_part->kind = VLMC_CHAT_PART_TEXT;
    out_part->text_len = strlen(text->valuestring);
    out_part->text = vlmc_arena_strndup(arena, text->valuestring, out_part->text_len);
    if (!out_part->text) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "chat messages");
  } else {
    *out_rendered = false;
  }
  return NULL;
}

static vlmc_status_t parse_parts(const char *source, const char *path, const cJSON *content,
                                 vlmc_arena_t *arena, vlmc_chat_message_t *message) {
  size_t count = (size_t)cJSON_GetArraySize(content), used = 0, index = 0;
  vlmc_chat_part_t *parts = VLMC_ARENA_NEW_ARRAY(arena, vlmc_chat_part_t, count ? count : 1);
  if (!parts) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "chat messages");
  for (const cJSON *item = content->child; item; item = item->next, ++index) {
    bool rendered;
    VLMC_RETURN_IF_ERROR(parse_part(source, path, index, item, arena, &parts[used], &rendered));
    if (rendered) ++used;
  }
  message->parts = parts;
  message->part_count = used;
  return NULL;
}

static vlmc_status_t parse_message(const char *source, const char *path, size_t index,
                                   const cJSON *item, vlmc_arena_t *arena,
                                   vlmc_chat_message_t *out_message) {
  memset(out_message, 0, sizeof *out_message);
  const cJSON *role = cJSON_GetObjectItemCaseSensitive(item, "role");
  if (!cJSON_IsString(role))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: %s[%zu].role: expected a string", source, path,
                            index);
  out_message->role = vlmc_arena_strdup(arena, role->valuestring);
  const cJSON *content = cJSON_GetObjectItemCaseSensitive(item, "content");
  if (cJSON_IsString(content)) {
    out_message->text_len = strlen(content->valuestring);
    out_message->text = vlmc_arena_strndup(arena, content->valuestring, out_message->text_len);
    if (!out_message->role || !out_message->text)
      return vlmc_status_make(VLMC_OUT_OF_MEMORY, "chat messages");
    return NULL;
  }
  if (!cJSON_IsArray(content))
    return vlmc_status_make(VLMC_PARSE_ERROR,
                            "%s: %s[%zu].content: expected a string or a list of items", source,
                            path, index);
  char content_path[256];
  snprintf(content_path, sizeof content_path, "%s[%zu].content", path, index);
  return parse_parts(source, content_path, content, arena, out_message);
}

vlmc_status_t vlmc_chat_messages_from_json(const char *source_name, const char *path,
                                           const cJSON *messages, vlmc_arena_t *arena,
                                           vlmc_chat_message_t **out_messages,
                                           size_t *out_count) {
  *out_messages = NULL;
  *out_count = 0;
  if (!cJSON_IsArray(messages))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: %s: expected a list of messages", source_name,
                            path);
  size_t count = (size_t)cJSON_GetArraySize(messages), index = 0;
  vlmc_chat_message_t *list = VLMC_ARENA_NEW_ARRAY(arena, vlmc_chat_message_t, count ? count : 1);
  if (!list) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "chat messages");
  for (const cJSON *item = messages->child; item; item = item->next, ++index) {
    if (!cJSON_IsObject(item))
      return vlmc_status_make(VLMC_PARSE_ERROR,
                              "%s: %s[%zu]: expected an object with \"role\" and \"content\"",
                              source_name, path, index);
    VLMC_RETURN_IF_ERROR(parse_message(source_name, path, index, item, arena, &list[index]));
  }
  *out_messages = list;
  *out_count = count;
  return NULL;
}

/* ---- rendering ---- */

typedef struct {
  int images;
  int videos;
} vision_counts_t;

static void render_part(const vlmc_chat_part_t *part, const vlmc_chat_render_options_t *options,
                        vision_counts_t *counts, vlmc_strbuf_t *out) {
  switch (part->kind) {
    case VLMC_CHAT_PART_IMAGE:
      ++counts->images;
      if (options->add_vision_id) vlmc_strbuf_printf(out, "Picture %d: ", counts->images);
      vlmc_strbuf_puts(out, kImageSlot);
      break;
    case VLMC_CHAT_PART_VIDEO:
      ++counts->videos;
      if (options->add_vision_id) vlmc_strbuf_printf(out, "Video %d: ", counts->videos);
      vlmc_strbuf_puts(out, kVideoSlot);
      break;
    case VLMC_CHAT_PART_TEXT:
      vlmc_strbuf_append(out, part->text, part->text_len);
      break;
  }
}

/* <|im_start|>role, the message's string or its parts with their vision slots, <|im_end|>. */
static void vision_turn(const vlmc_chat_message_t *m, const vlmc_chat_render_options_t *options,
                        vision_counts_t *counts, vlmc_strbuf_t *out) {
  vlmc_strbuf_printf(out, "<|im_start|>%s\n", m->role);
  if (!m->parts) vlmc_strbuf_append(out, m->text, m->text_len);
  for (size_t k = 0; m->parts && k < m->part_count; ++k) render_part(&m->parts[k], options, counts, out);
  vlmc_strbuf_puts(out, "<|im_end|>\n");
}

/* "an image" or "a video", for messages that refuse one. */
static const char *vision_part_name(const vlmc_chat_part_t *part) {
  return part->kind == VLMC_CHAT_PART_IMAGE ? "an image" : "a video";
}

/* ---- the text templates ---- */

static bool is_text_kind(vlmc_chat_template_kind_t kind) {
  return kind == VLMC_CHAT_TEMPLATE_QWEN2_TEXT || kind == VLMC_CHAT_TEMPLATE_QWEN2_5_TEXT ||
         kind == VLMC_CHAT_TEMPLATE_QWEN3_TEXT;
}

/* What vlmc passes a template: no tools, so a tool turn is refused; and an image or video only
 * where the template prints its slot. A text template prints message['content'] as it is (a
 * list of parts would come out as its Python repr; for text parts the templates agree with
 * Qwen2-VL's) and has no slot at all; Qwen3-VL's prints slots in user turns only (and in tool
 * turns), so an image elsewhere would have none (`user_slots`). */
static vlmc_status_t check_messages(const vlmc_chat_message_t *messages, size_t count,
                                    bool user_slots) {
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(messages[i].role, "tool") == 0)
      return vlmc_status_make(VLMC_UNSUPPORTED, "message %zu is a tool turn; vlmc passes the "
                              "chat template no tools", i);
    if (user_slots && strcmp(messages[i].role, "user") == 0) continue;
    for (size_t k = 0; messages[i].parts && k < messages[i].part_count; ++k) {
      if (messages[i].parts[k].kind == VLMC_CHAT_PART_TEXT) continue;
      if (user_slots)
        return vlmc_status_make(VLMC_INVALID_ARGUMENT, "message %zu (%s) has %s; the Qwen3-VL "
                                "chat template prints images and videos in user turns only", i,
                                messages[i].role, vision_part_name(&messages[i].parts[k]));
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "message %zu has %s, which a text "
                              "chat template has no slot for", i, vision_part_name(&messages[i].parts[k]));
    }
  }
  return NULL;
}

/* The message's text: its string, or its text parts in order. */
static void message_text(const vlmc_chat_message_t *m, vlmc_strbuf_t *out) {
  if (!m->parts) vlmc_strbuf_append(out, m->text, m->text_len);
  for (size_t k = 0; m->parts && k < m->part_count; ++k)
    vlmc_strbuf_append(out, m->parts[k].text, m->parts[k].text_len);
}

static void plain_turn(const vlmc_chat_message_t *m, vlmc_strbuf_t *out) {
  vlmc_strbuf_printf(out, "<|im_start|>%s\n", m->role);
  message_text(m, out);
  vlmc_strbuf_puts(out, "<|im_end|>\n");
}

static bool role_is(const vlmc_chat_message_t *m, const char *role) {
  return strcmp(m->role, role) == 0;
}

/* Qwen2.5-Instruct's template without tools: the first system message (or the Qwen default)
 * once, then user, later system and assistant turns; other roles print nothing. */
static void render_qwen2_5_text(const vlmc_chat_message_t *messages, size_t count,
                                vlmc_strbuf_t *out) {
  if (count && role_is(&messages[0], "system")) plain_turn(&messages[0], out);
  else
    vlmc_strbuf_puts(out, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are "
                          "a helpful assistant.<|im_end|>\n");
  for (size_t i = 0; i < count; ++i)
    if (role_is(&messages[i], "user") || role_is(&messages[i], "assistant") ||
        (role_is(&messages[i], "system") && i > 0))
      plain_turn(&messages[i], out);
}

/* Python's str.strip family over '\n' only, on [*begin, *end). */
static void lstrip_newlines(const char **begin, const char *end) {
  while (*begin < end && **begin == '\n') ++*begin;
}
static void rstrip_newlines(const char *begin, const char **end) {
  while (*end > begin && (*end)[-1] == '\n') --*end;
}

/* The last occurrence of `needle` in [begin, end), or NULL. */
static const char *find_last(const char *begin, const char *end, const char *needle) {
  size_t n = strlen(needle);
  for (const char *p = end - n; end - begin >= (ptrdiff_t)n && p >= begin; --p)
    if (memcmp(p, needle, n) == 0) return p;
  return NULL;
}
static const char *find_first(const char *begin, const char *end, const char *needle) {
  size_t n = strlen(needle);
  for (const char *p = begin; end - p >= (ptrdiff_t)n; ++p)
    if (memcmp(p, needle, n) == 0) return p;
  return NULL;
}

static bool is_tool_response(const char *text, size_t len) {
  static const char open[] = "<tool_response>", close[] = "</tool_response>";
  return len >= sizeof open - 1 && len >= sizeof close - 1 &&
         memcmp(text, open, sizeof open - 1) == 0 &&
         memcmp(text + len - (sizeof close - 1), close, sizeof close - 1) == 0;
}

/* An assistant turn of Qwen3's template: the content after the last </think> (leading
 * newlines dropped) and the reasoning before the first one (after its last <think>); the
 * reasoning is kept only after the last user query, and there for the last turn always. */
static void qwen3_assistant(const char *content, size_t len, bool after_query, bool last,
                            vlmc_strbuf_t *out) {
  const char *begin = content, *end = content + len;
  const char *reason_begin = "", *reason_end = reason_begin;
  const char *close = find_first(begin, end, "</think>");
  if (close) {
    const char *after = find_last(begin, end, "</think>") + strlen("</think>");
    reason_end = close;
    rstrip_newlines(begin, &reason_end);
    const char *open = find_last(begin, reason_end, "<think>");
    reason_begin = open ? open + strlen("<think>") : begin;
    lstrip_newlines(&reason_begin, reason_end);
    begin = after;
    lstrip_newlines(&begin, end);
  }
  vlmc_strbuf_puts(out, "<|im_start|>assistant\n");
  if (after_query && (last || reason_end > reason_begin)) {
    lstrip_newlines(&reason_begin, reason_end); /* reasoning_content.strip('\n') */
    rstrip_newlines(reason_begin, &reason_end);
    vlmc_strbuf_puts(out, "<think>\n");
    vlmc_strbuf_append(out, reason_begin, (size_t)(reason_end - reason_begin));
    vlmc_strbuf_puts(out, "\n</think>\n\n");
    lstrip_newlines(&begin, end);
  }
  vlmc_strbuf_append(out, begin, (size_t)(end - begin));
  vlmc_strbuf_puts(out, "<|im_end|>\n");
}

/* Qwen3's template without tools. */
static void render_qwen3_text(const vlmc_chat_message_t *messages, size_t count,
                              vlmc_strbuf_t *out) {
  if (count && role_is(&messages[0], "system")) plain_turn(&messages[0], out);
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  size_t last_query = count ? count - 1 : 0;
  for (size_t i = count; i-- > 0;) {
    vlmc_strbuf_clear(&text);
    message_text(&messages[i], &text);
    if (role_is(&messages[i], "user") && !is_tool_response(vlmc_strbuf_cstr(&text), text.len)) {
      last_query = i;
      break;
    }
  }
  for (size_t i = 0; i < count; ++i) {
    if (role_is(&messages[i], "user") || (role_is(&messages[i], "system") && i > 0)) {
      plain_turn(&messages[i], out);
    } else if (role_is(&messages[i], "assistant")) {
      vlmc_strbuf_clear(&text);
      message_text(&messages[i], &text);
      qwen3_assistant(vlmc_strbuf_cstr(&text), text.len, i > last_query, i + 1 == count, out);
    }
  }
  if (text.failed) out->failed = true;
  vlmc_strbuf_deinit(&text);
}

/* ---- Qwen3-VL ---- */

/* Qwen3-VL-Instruct's template without tools: the first system message's text, then user
 * turns with their slots and assistant turns with their text; other messages print nothing. */
static void render_qwen3_vl(const vlmc_chat_message_t *messages, size_t count,
                            const vlmc_chat_render_options_t *options, vlmc_strbuf_t *out) {
  if (count && role_is(&messages[0], "system")) plain_turn(&messages[0], out);
  vision_counts_t counts = {0, 0};
  for (size_t i = 0; i < count; ++i) {
    const vlmc_chat_message_t *m = &messages[i];
    if (role_is(m, "assistant")) {
      plain_turn(m, out);
    } else if (role_is(m, "user")) {
      vision_turn(m, options, &counts, out);
    }
  }
}

vlmc_status_t vlmc_chat_template_render(const vlmc_chat_template_t *chat_template,
                                        const vlmc_chat_message_t *messages, size_t count,
                                        const vlmc_chat_render_options_t *options,
                                        vlmc_strbuf_t *out) {
  vlmc_chat_template_kind_t kind = chat_template->kind;
  if (kind != VLMC_CHAT_TEMPLATE_QWEN2_VL && kind != VLMC_CHAT_TEMPLATE_QWEN3_VL && !is_text_kind(kind))
    return vlmc_status_make(VLMC_INTERNAL, "unknown chat template kind %d", (int)kind);
  if (is_text_kind(kind) || kind == VLMC_CHAT_TEMPLATE_QWEN3_VL)
    VLMC_RETURN_IF_ERROR(check_messages(messages, count, kind == VLMC_CHAT_TEMPLATE_QWEN3_VL));
  if (kind == VLMC_CHAT_TEMPLATE_QWEN3_VL) {
    render_qwen3_vl(messages, count, options, out);
  } else if (kind == VLMC_CHAT_TEMPLATE_QWEN2_5_TEXT) {
    render_qwen2_5_text(messages, count, out);
  } else if (kind == VLMC_CHAT_TEMPLATE_QWEN3_TEXT) {
    render_qwen3_text(messages, count, out);
  } else {
    /* Qwen2-VL's template, and Qwen2's text one, which prints the same for text turns. */
    vision_counts_t counts = {0, 0};
    for (size_t i = 0; i < count; ++i) {
      const vlmc_chat_message_t *message = &messages[i];
      if (i == 0 && strcmp(message->role, "system") != 0) vlmc_strbuf_puts(out, kDefaultSystem);
      vision_turn(message, options, &counts, out);
    }
  }
  if (options->add_generation_prompt) {
    vlmc_strbuf_puts(out, "<|im_start|>assistant\n");
    if (kind == VLMC_CHAT_TEMPLATE_QWEN3_TEXT && options->disable_thinking)
      vlmc_strbuf_puts(out, "<think>\n\n</think>\n\n");
  }
  return out->failed ? vlmc_status_make(VLMC_OUT_OF_MEMORY, "chat prompt") : NULL;
}

/* ---- tokenizing with pad expansion ---- */

void vlmc_chat_prompt_deinit(vlmc_chat_prompt_t *prompt) {
  free(prompt->ids);
  free(prompt->token_types);
  prompt->ids = NULL;
  prompt->token_types = NULL;
  prompt->len = 0;
}

/* Merged tokens of one grid: t*h*w / merge^2, with h and w multiples of merge. */
static vlmc_status_t grid_token_count(const vlmc_chat_grid_t *grid, const char *what, size_t index,
                                      int64_t merge_size, size_t *out_count) {
  int64_t thw;
  if (grid->t < 1 || grid->h < 1 || grid->w < 1 || grid->h % merge_size != 0 ||
      grid->w % merge_size != 0 || !vlmc_mul_i64(grid->t, grid->h, &thw) ||
      !vlmc_mul_i64(thw, grid->w, &thw) || thw / (merge_size * merge_size) > INT32_MAX)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "%s[%zu]: grid [%lld, %lld, %lld] is not a positive grid whose h and w "
                            "are multiples of merge_size %lld",
                            what, index, (long long)grid->t, (long long)grid->h,
                            (long long)grid->w, (long long)merge_size);
  *out_count = (size_t)(thw / (merge_size * merge_size));
  return NULL;
}

typedef struct {
  int32_t pad_id;
  const char *pad_name;
  const char *grid_name;
  const vlmc_chat_grid_t *grids;
  size_t grid_count;
  uint8_t token_type;
  size_t next_grid; /* while expanding */
} pad_kind_t;

static size_t count_id(const vlmc_token_ids_t *ids, int32_t id) {
  size_t n = 0;
  for (size_t i = 0; i < ids->len; ++i) n += ids->data[i] == id;
  return n;
}

/* Checks that each pad has a grid and returns the expanded length. */
static vlmc_status_t check_pads(const vlmc_token_ids_t *ids, const pad_kind_t *kinds,
                                int64_t merge_size, size_t *out_len) {
  size_t total = ids->len;
  for (int k = 0; k < 2; ++k) {
    const pad_kind_t *kind = &kinds[k];
    size_t pads = kind->pad_id >= 0 ? count_id(ids, kind->pad_id) : 0;
    if (kind->pad_id < 0 && kind->grid_count > 0)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%zu %s given but the tokenizer has no %s",
                              kind->grid_count, kind->grid_name, kind->pad_name);
    if (pads != kind->grid_count)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "the prompt has %zu %s tokens but %zu %s were given", pads,
                              kind->pad_name, kind->grid_count, kind->grid_name);
    for (size_t g = 0; g < kind->grid_count; ++g) {
      size_t n;
      VLMC_RETURN_IF_ERROR(grid_token_count(&kind->grids[g], kind->grid_name, g, merge_size, &n));
      if (!vlmc_add_size(total, n - 1, &total) || total > INT32_MAX)
        return vlmc_status_make(VLMC_OUT_OF_RANGE, "the expanded prompt is too long");
    }
  }
  *out_len = total;
  return NULL;
}

static vlmc_status_t expand_pads(const vlmc_token_ids_t *ids, pad_kind_t *kinds,
                                 int64_t merge_size, vlmc_chat_prompt_t *prompt) {
  size_t out = 0;
  for (size_t i = 0; i < ids->len; ++i) {
    pad_kind_t *kind = NULL;
    for (int k = 0; k < 2; ++k)
      if (kinds[k].pad_id >= 0 && ids->data[i] == kinds[k].pad_id) kind = &kinds[k];
    size_t copies = 1;
    if (kind) {
      size_t g = kind->next_grid++;
      VLMC_RETURN_IF_ERROR(
          grid_token_count(&kind->grids[g], kind->grid_name, g, merge_size, &copies));
    }
    for (size_t c = 0; c < copies; ++c, ++out) {
      prompt->ids[out] = ids->data[i];
      prompt->token_types[out] = kind ? kind->token_type : VLMC_CHAT_TOKEN_TEXT;
    }
  }
  prompt->len = out;
  return NULL;
}

vlmc_status_t vlmc_chat_prompt_tokenize(const vlmc_tokenizer_t *tokenizer, const char *text,
                                        size_t len, const vlmc_chat_grid_t *image_grids,
                                        size_t image_count, const vlmc_chat_grid_t *video_grids,
                                        size_t video_count, int64_t merge_size,
                                        vlmc_chat_prompt_t *out_prompt) {
  memset(out_prompt, 0, sizeof *out_prompt);
  if (merge_size < 1 || merge_size > 64)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "merge_size %lld is not in [1, 64]",
                            (long long)merge_size);
  pad_kind_t kinds[2] = {
      {vlmc_tokenizer_token_to_id(tokenizer, "<|image_pad|>", 13), "<|image_pad|>",
       "image grids", image_grids, image_count, VLMC_CHAT_TOKEN_IMAGE, 0},
      {vlmc_tokenizer_token_to_id(tokenizer, "<|video_pad|>", 13), "<|video_pad|>",
       "video grids", video_grids, video_count, VLMC_CHAT_TOKEN_VIDEO, 0},
  };
  vlmc_token_ids_t ids;
  vlmc_token_ids_init(&ids);
  size_t total = 0;
  vlmc_status_t status = vlmc_tokenizer_encode(tokenizer, text, len, &ids);
  if (!status) status = check_pads(&ids, kinds, merge_size, &total);
  if (!status) {
    out_prompt->ids = malloc((total ? total : 1) * sizeof(int32_t));
    out_prompt->token_types = malloc(total ? total : 1);
    if (!out_prompt->ids || !out_prompt->token_types)
      status = vlmc_status_make(VLMC_OUT_OF_MEMORY, "chat prompt of %zu tokens", total);
  }
  if (!status) status = expand_pads(&ids, kinds, merge_size, out_prompt);
  vlmc_token_ids_deinit(&ids);
  if (status) vlmc_chat_prompt_deinit(out_prompt);
  return status;
}
