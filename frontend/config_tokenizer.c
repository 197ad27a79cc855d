/* tokenizer_config.json (the settings around tokenizer.json) and locating the chat template.
 * The template text is returned as is; the chat-template module interprets it. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "frontend/config.h"
#include "support/file.h"
#include "support/json.h"

static vlmc_status_t copy_string(const char *file, const char *text, char **out) {
  *out = strdup(text);
  if (!*out) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", file);
  return NULL;
}

/* chat_template is a string, or (templates for tool use) a list of {"name", "template"} of
 * which the "default" one is the chat template. */
static vlmc_status_t parse_chat_template(const vlmc_json_ref_t *ref, char **out) {
  *out = NULL;
  if (!ref->node) return NULL;
  if (cJSON_IsString(ref->node)) return copy_string(ref->file, ref->node->valuestring, out);
  if (!cJSON_IsArray(ref->node))
    return vlmc_json_error(ref, VLMC_PARSE_ERROR,
                           "expected a string or a list of templates, got %s",
                           vlmc_json_kind(ref->node));
  int i = 0;
  const cJSON *node;
  cJSON_ArrayForEach(node, ref->node) {
    vlmc_json_ref_t entry = vlmc_json_ref_item(ref, node, i++);
    VLMC_RETURN_IF_ERROR(vlmc_json_expect_object(&entry));
    vlmc_json_ref_t name = vlmc_json_ref(entry.file, entry.node, entry.path, "name");
    vlmc_json_ref_t body = vlmc_json_ref(entry.file, entry.node, entry.path, "template");
    const char *name_text, *body_text;
    VLMC_RETURN_IF_ERROR(vlmc_json_string_req(&name, &name_text));
    VLMC_RETURN_IF_ERROR(vlmc_json_string_req(&body, &body_text));
    if (strcmp(name_text, "default") == 0) return copy_string(ref->file, body_text, out);
  }
  return vlmc_json_error(ref, VLMC_NOT_FOUND, "the list of templates has no \"default\" entry");
}

static vlmc_status_t parse_tokenizer_fields(const char *file, const cJSON *root,
                                            vlmc_tokenizer_config_t *config) {
  vlmc_json_ref_t cls = vlmc_json_ref(file, root, "", "tokenizer_class");
  const char *cls_text = NULL;
  bool has_class = false;
  VLMC_RETURN_IF_ERROR(vlmc_json_string_opt(&cls, &cls_text, &has_class));
  if (has_class) VLMC_RETURN_IF_ERROR(copy_string(file, cls_text, &config->tokenizer_class));
  vlmc_json_ref_t bos = vlmc_json_ref(file, root, "", "add_bos_token");
  VLMC_RETURN_IF_ERROR(
      vlmc_json_bool_opt(&bos, &config->add_bos_token, &config->has_add_bos_token));
  vlmc_json_ref_t chat = vlmc_json_ref(file, root, "", "chat_template");
  return parse_chat_template(&chat, &config->chat_template);
}

vlmc_status_t vlmc_tokenizer_config_parse(const char *text, size_t len, const char *file,
                                          vlmc_tokenizer_config_t *out_config) {
  memset(out_config, 0, sizeof *out_config);
  cJSON *root = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_json_parse_object(file, text, len, &root));
  vlmc_status_t status = parse_tokenizer_fields(file, root, out_config);
  cJSON_Delete(root);
  if (status) vlmc_tokenizer_config_deinit(out_config);
  return status;
}

vlmc_status_t vlmc_tokenizer_config_load(const char *path, vlmc_tokenizer_config_t *out_config) {
  memset(out_config, 0, sizeof *out_config);
  char *text, *file;
  size_t len;
  VLMC_RETURN_IF_ERROR(
      vlmc_json_read_config_file(path, "tokenizer_config.json", &text, &len, &file));
  vlmc_status_t status = vlmc_tokenizer_config_parse(text, len, file, out_config);
  free(text);
  free(file);
  return status;
}

void vlmc_tokenizer_config_deinit(vlmc_tokenizer_config_t *config) {
  free(config->tokenizer_class);
  free(config->chat_template);
  memset(config, 0, sizeof *config);
}

/* ---- chat template ----------------------------------------------------------------------- */

/* chat_template.json holds {"chat_template": "..."}. */
static vlmc_status_t template_from_json(const char *file, const char *text, size_t len,
                                        char **out) {
  cJSON *root = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_json_parse_object(file, text, len, &root));
  vlmc_json_ref_t ref = vlmc_json_ref(file, root, "", "chat_template");
  const char *body = NULL;
  vlmc_status_t status = vlmc_json_string_req(&ref, &body);
  if (!status) status = copy_string(file, body, out);
  cJSON_Delete(root);
  return status;
}

static vlmc_status_t template_from_tokenizer_config(const char *file, const char *text, size_t len,
                                                    char **out) {
  vlmc_tokenizer_config_t config;
  VLMC_RETURN_IF_ERROR(vlmc_tokenizer_config_parse(text, len, file, &config));
  *out = config.chat_template; /* may be NULL: no template there */
  config.chat_template = NULL;
  vlmc_tokenizer_config_deinit(&config);
  return NULL;
}

typedef enum { SOURCE_JINJA, SOURCE_JSON, SOURCE_TOKENIZER_CONFIG } template_source_t;

/* Tries one candidate file; *out_text stays NULL when the file is absent or has no template. */
static vlmc_status_t try_template_file(const char *dir, const char *name, template_source_t kind,
                                       vlmc_chat_template_source_t *out) {
  char *path = vlmc_path_join(dir, name), *text = NULL;
  size_t len = 0;
  if (!path) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", dir);
  vlmc_status_t status = vlmc_json_read_optional_file(path, &text, &len);
  if (!status && text) {
    if (kind == SOURCE_JINJA) {
      out->text = text;
      out->len = len;
      text = NULL;
    } else if (kind == SOURCE_JSON) {
      status = template_from_json(path, text, len, &out->text);
    } else {
      status = template_from_tokenizer_config(path, text, len, &out->text);
    }
  }
  free(text);
  if (!status && out->text && kind != SOURCE_JINJA) out->len = strlen(out->text);
  if (!status && out->text && out->len == 0)
    status = vlmc_status_make(VLMC_PARSE_ERROR, "%s: the chat template is empty", path);
  if (!status && out->text)
    out->source_path = path;
  else
    free(path);
  return status;
}

vlmc_status_t vlmc_chat_template_source_load(const char *dir,
                                             vlmc_chat_template_source_t *out_source) {
  memset(out_source, 0, sizeof *out_source);
  static const struct {
    const char *name;
    template_source_t kind;
  } candidates[] = {
      {"chat_template.jinja", SOURCE_JINJA},
      {"chat_template.json", SOURCE_JSON},
      {"tokenizer_config.json", SOURCE_TOKENIZER_CONFIG},
  };
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; ++i) {
    vlmc_status_t status =
        try_template_file(dir, candidates[i].name, candidates[i].kind, out_source);
    if (status) {
      vlmc_chat_template_source_deinit(out_source);
      return status;
    }
    if (out_source->source_path) return NULL;
  }
  return vlmc_status_make(
      VLMC_NOT_FOUND,
      "%s: no chat template (looked for chat_template.jinja, chat_template.json "
      "and tokenizer_config.json's chat_template)",
      dir);
}

void vlmc_chat_template_source_deinit(vlmc_chat_template_source_t *source) {
  free(source->text);
  free(source->source_path);
  memset(source, 0, sizeof *source);
}
