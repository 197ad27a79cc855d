#include "runtime/request.h"

#include <stdlib.h>
#include <string.h>

#include "reference/mrope_positions.h"
#include "support/strbuf.h"

static vlmc_status_t load_and_preprocess(const vlmc_request_spec_t *spec,
                                         const vlmc_preprocess_params_t *params,
                                         vlmc_preprocess_output_t *out) {
  memset(out, 0, sizeof *out);
  if (spec->num_images == 0) return NULL;
  vlmc_image_t *images = calloc(spec->num_images, sizeof *images);
  if (!images) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory loading images");
  vlmc_status_t status = NULL;
  size_t loaded = 0;
  for (; loaded < spec->num_images && !status; ++loaded)
    status = vlmc_image_load(spec->image_paths[loaded], &images[loaded]);
  if (!status)
    status = vlmc_preprocess_images(images, spec->image_paths, spec->num_images, params, out);
  for (size_t i = 0; i < loaded; ++i) vlmc_image_destroy(&images[i]);
  free(images);
  return status;
}

/* The image parts of a conversation. */
static size_t image_parts(const vlmc_chat_message_t *messages, size_t count) {
  size_t n = 0;
  for (size_t m = 0; m < count; ++m)
    for (size_t p = 0; messages[m].parts && p < messages[m].part_count; ++p)
      n += messages[m].parts[p].kind == VLMC_CHAT_PART_IMAGE;
  return n;
}

/* A whole conversation, with the generation prompt. */
static vlmc_status_t render_conversation(const vlmc_chat_template_t *chat_template,
                                         const vlmc_request_spec_t *spec, vlmc_strbuf_t *out) {
  if (spec->num_messages == 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "a conversation needs at least one message");
  size_t parts = image_parts(spec->messages, spec->num_messages);
  if (parts != spec->num_images)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "the messages have %zu image part%s but %zu "
                            "image%s %s given", parts, parts == 1 ? "" : "s", spec->num_images,
                            spec->num_images == 1 ? "" : "s", spec->num_images == 1 ? "was" : "were");
  vlmc_chat_render_options_t options = {.add_generation_prompt = true, .add_vision_id = false};
  return vlmc_chat_template_render(chat_template, spec->messages, spec->num_messages, &options, out);
}

/* [system?], user: [image]*n + text, with the generation prompt. */
static vlmc_status_t render_prompt(const vlmc_chat_template_t *chat_template,
                                   const vlmc_request_spec_t *spec, vlmc_strbuf_t *out) {
  if (spec->messages) return render_conversation(chat_template, spec, out);
  size_t num_parts = spec->num_images + 1;
  vlmc_chat_part_t *parts = calloc(num_parts, sizeof *parts);
  if (!parts) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory rendering the prompt");
  for (size_t i = 0; i < spec->num_images; ++i) parts[i].kind = VLMC_CHAT_PART_IMAGE;
  parts[spec->num_images].kind = VLMC_CHAT_PART_TEXT;
  parts[spec->num_images].text = spec->prompt;
  parts[spec->num_images].text_len = strlen(spec->prompt);
  vlmc_chat_message_t messages[2];
  size_t count = 0;
  memset(messages, 0, sizeof messages);
  if (spec->system_prompt) {
    messages[count].role = "system";
    messages[count].text = spec->system_prompt;
    messages[count].text_len = strlen(spec->system_prompt);
    ++count;
  }
  messages[count].role = "user";
  messages[count].parts = parts;
  messages[count].part_count = num_parts;
  ++count;
  vlmc_chat_render_options_t options = {.add_generation_prompt = true, .add_vision_id = false};
  vlmc_status_t status = vlmc_chat_template_render(chat_template, messages, count, &options, out);
  free(parts);
  return status;
}

static vlmc_status_t tokenize_prompt(const vlmc_tokenizer_t *tokenizer, const vlmc_strbuf_t *text,
                                     const vlmc_preprocess_output_t *pixels,
                                     vlmc_request_model_t model, vlmc_request_t *out) {
  vlmc_chat_grid_t *grids = calloc(pixels->num_images ? pixels->num_images : 1, sizeof *grids);
  if (!grids) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < pixels->num_images; ++i) {
    grids[i].t = pixels->image_grid_thw[3 * i];
    grids[i].h = pixels->image_grid_thw[3 * i + 1];
    grids[i].w = pixels->image_grid_thw[3 * i + 2];
  }
  vlmc_chat_prompt_t prompt = {0};
  vlmc_status_t status =
      vlmc_chat_prompt_tokenize(tokenizer, vlmc_strbuf_cstr(text), text->len, grids,
                                pixels->num_images, NULL, 0, model.merge_size, &prompt);
  free(grids);
  if (status) return status;
  out->input_ids = malloc((prompt.len ? prompt.len : 1) * sizeof *out->input_ids);
  if (!out->input_ids) status = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; !status && i < prompt.len; ++i) out->input_ids[i] = prompt.ids[i];
  out->seq_len = prompt.len;
  vlmc_chat_prompt_deinit(&prompt);
  return status;
}

static vlmc_status_t compute_positions(const vlmc_preprocess_output_t *pixels,
                                       vlmc_request_model_t model, vlmc_request_t *out) {
  out->positions = malloc((3 * out->seq_len + 1) * sizeof *out->positions);
  vlmc_grid_thw_t *grids = calloc(pixels->num_images + 1, sizeof *grids);
  vlmc_status_t status = NULL;
  if (!out->positions || !grids) status = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; !status && i < pixels->num_images; ++i) {
    grids[i].t = pixels->image_grid_thw[3 * i];
    grids[i].h = pixels->image_grid_thw[3 * i + 1];
    grids[i].w = pixels->image_grid_thw[3 * i + 2];
  }
  vlmc_mrope_config_t config = {.image_token_id = model.image_token_id,
                                .video_token_id = model.video_token_id,
                                .merge = model.merge_size};
  if (!status)
    status = vlmc_mrope_position_ids(out->input_ids, out->seq_len, grids, pixels->num_images,
                                     config, out->positions, &out->rope_delta);
  free(grids);
  return status;
}

vlmc_status_t vlmc_request_build(const vlmc_tokenizer_t *tokenizer,
                                 const vlmc_chat_template_t *chat_template,
                                 const vlmc_preprocess_params_t *preprocess,
                                 vlmc_request_model_t model, const vlmc_request_spec_t *spec,
                                 vlmc_request_t *out) {
  memset(out, 0, sizeof *out);
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  vlmc_status_t status = load_and_preprocess(spec, preprocess, &out->pixels);
  if (!status) status = render_prompt(chat_template, spec, &text);
  if (!status) status = tokenize_prompt(tokenizer, &text, &out->pixels, model, out);
  if (!status) status = compute_positions(&out->pixels, model, out);
  out->prompt_text = vlmc_strbuf_take(&text);
  if (status) vlmc_request_deinit(out);
  return status;
}

void vlmc_request_deinit(vlmc_request_t *request) {
  free(request->prompt_text);
  free(request->input_ids);
  free(request->positions);
  if (request->pixels.pixel_values || request->pixels.image_grid_thw)
    vlmc_preprocess_output_destroy(&request->pixels);
  memset(request, 0, sizeof *request);
}
