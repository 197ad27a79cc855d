#define _POSIX_C_SOURCE 200809L
#include "tools/serve_json.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frontend/image.h"
#include "support/base64.h"

static vlmc_status_t bad_request(const char *fmt, const char *arg) {
  return vlmc_status_make(VLMC_INVALID_ARGUMENT, fmt, arg);
}

static char *copy_string(const char *s) {
  char *c = strdup(s);
  return c;
}

/* "data:image/png;base64,...." -> the decoded bytes, checked to be an image vlmc decodes (the
 * runtime would refuse it later anyway, but then as the server's failure, not the client's). */
static vlmc_status_t decode_data_uri(const char *url, serve_image_t *image) {
  const char *comma = strchr(url, ',');
  if (!comma) return bad_request("image_url: a data URI without a comma: %.40s", url);
  size_t head = (size_t)(comma - url);
  if (head < 7 || memcmp(comma - 7, ";base64", 7))
    return bad_request("image_url: only base64 data URIs are supported (%.40s)", url);
  vlmc_status_t st = vlmc_base64_decode(comma + 1, strlen(comma + 1), &image->bytes,
                                        &image->size);
  if (st) return vlmc_status_annotate(st, "image_url: bad base64");
  vlmc_image_t decoded = {0};
  st = vlmc_image_decode("image_url", image->bytes, image->size, 0, &decoded);
  vlmc_image_destroy(&decoded);
  if (st) {
    vlmc_status_t refused = bad_request("image_url: not a PNG or JPEG vlmc can decode: %s",
                                        vlmc_status_message(st));
    vlmc_status_free(st);
    return refused;
  }
  return NULL;
}

/* One image_url part: a data URI, or a local path / file:// URL when the server allows it;
 * http(s) is refused (the server fetches nothing). */
static vlmc_status_t parse_image_part(const cJSON *part, bool allow_files, serve_request_t *r) {
  const cJSON *iu = cJSON_GetObjectItemCaseSensitive(part, "image_url");
  const cJSON *url = cJSON_IsObject(iu) ? cJSON_GetObjectItemCaseSensitive(iu, "url") : iu;
  if (!cJSON_IsString(url) || !url->valuestring[0])
    return bad_request("%s", "an image_url part needs \"image_url\": {\"url\": \"data:...\"}");
  if (r->num_images == SERVE_MAX_IMAGES)
    return bad_request("%s", "at most 64 images per request");
  const char *u = url->valuestring;
  serve_image_t *image = &r->images[r->num_images++];
  if (!strncmp(u, "data:", 5)) return decode_data_uri(u, image);
  if (!strncmp(u, "http://", 7) || !strncmp(u, "https://", 8))
    return bad_request("image_url: http(s) URLs are not fetched by vlmc-serve; send the image "
                       "as a data URI (data:image/png;base64,...): %.60s", u);
  if (!allow_files)
    return bad_request("image_url: file images need vlmc-serve --allow-file-images; send a data "
                       "URI (data:image/png;base64,...): %.60s", u);
  if (!strncmp(u, "file://", 7)) u += 7;
  if (!(image->path = copy_string(u))) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "oom");
  /* checked here, so that a missing or broken file is the client's 400, not a failed run */
  vlmc_image_t decoded = {0};
  vlmc_status_t st = vlmc_image_load(image->path, &decoded);
  vlmc_image_destroy(&decoded);
  if (st) {
    vlmc_status_t refused = bad_request("image_url: %s", vlmc_status_message(st));
    vlmc_status_free(st);
    return refused;
  }
  return NULL;
}

/* Room for the conversation: as many messages as the request has, and as many parts as
 * their content lists have (a string content has none). */
static vlmc_status_t reserve_conversation(const cJSON *messages, serve_request_t *r) {
  size_t parts = 0, count = (size_t)cJSON_GetArraySize(messages);
  const cJSON *m;
  cJSON_ArrayForEach(m, messages) {
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (cJSON_IsArray(content)) parts += (size_t)cJSON_GetArraySize(content);
  }
  if (count > SERVE_MAX_MESSAGES || parts > SERVE_MAX_PARTS)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "at most %d messages and %d content parts "
                            "per request", SERVE_MAX_MESSAGES, SERVE_MAX_PARTS);
  r->messages = calloc(count, sizeof *r->messages);
  r->parts = calloc(parts ? parts : 1, sizeof *r->parts);
  if (!r->messages || !r->parts) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  return NULL;
}

/* A message's "content": a string, or a list of text and image_url parts (images only in a
 * user's message), kept in order: the template renders them where they are. */
static vlmc_status_t parse_content(const cJSON *content, bool images_allowed, bool allow_files,
                                   vlmc_chat_message_t *message, serve_request_t *r) {
  if (cJSON_IsString(content) || cJSON_IsNull(content) || !content) {
    const char *text = cJSON_IsString(content) ? content->valuestring : "";
    if (!(message->text = copy_string(text))) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "oom");
    message->text_len = strlen(text);
    return NULL;
  }
  if (!cJSON_IsArray(content))
    return bad_request("%s", "\"content\" must be a string or a list of parts");
  message->parts = r->parts + r->num_parts;
  const cJSON *part;
  cJSON_ArrayForEach(part, content) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
    if (!cJSON_IsObject(part) || !cJSON_IsString(type))
      return bad_request("%s", "a content part must be an object with a \"type\"");
    vlmc_chat_part_t *p = &r->parts[r->num_parts];
    if (!strcmp(type->valuestring, "text")) {
      const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
      if (!cJSON_IsString(t)) return bad_request("%s", "a text part needs a string \"text\"");
      if (!(p->text = copy_string(t->valuestring)))
        return vlmc_status_make(VLMC_OUT_OF_MEMORY, "oom");
      p->kind = VLMC_CHAT_PART_TEXT;
      p->text_len = strlen(t->valuestring);
    } else if (!strcmp(type->valuestring, "image_url")) {
      if (!images_allowed) return bad_request("%s", "images go in the user's messages only");
      VLMC_RETURN_IF_ERROR(parse_image_part(part, allow_files, r));
      p->kind = VLMC_CHAT_PART_IMAGE;
    } else {
      return bad_request("content part type '%s' is not supported (text, image_url)",
                         type->valuestring);
    }
    ++r->num_parts;
    ++message->part_count;
  }
  return NULL;
}

/* "messages": a conversation of system, user and assistant messages ending with the user's,
 * as the chat template renders it (what vlmc_session_generate answers with `messages`). */
static vlmc_status_t parse_messages(const cJSON *messages, bool allow_files, serve_request_t *r) {
  if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) == 0)
    return bad_request("%s", "\"messages\" must be a non-empty list");
  VLMC_RETURN_IF_ERROR(reserve_conversation(messages, r));
  const cJSON *m;
  bool have_user = false;
  cJSON_ArrayForEach(m, messages) {
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsObject(m) || !cJSON_IsString(role))
      return bad_request("%s", "each message must be an object with a \"role\"");
    const char *rl = role->valuestring;
    vlmc_chat_message_t *message = &r->messages[r->num_messages];
    if (!strcmp(rl, "system") || !strcmp(rl, "developer")) {
      if (have_user) return bad_request("%s", "a system message must come before the user's");
      message->role = "system";
    } else if (!strcmp(rl, "user")) {
      have_user = true;
      message->role = "user";
    } else if (!strcmp(rl, "assistant")) {
      if (!have_user) return bad_request("%s", "an assistant message must follow a user's");
      message->role = "assistant";
    } else {
      return bad_request("message role '%s' is not one of system, user, assistant", rl);
    }
    ++r->num_messages;
    VLMC_RETURN_IF_ERROR(parse_content(cJSON_GetObjectItemCaseSensitive(m, "content"),
                                       message->role[0] == 'u', allow_files, message, r));
  }
  if (!have_user) return bad_request("%s", "\"messages\" has no user message");
  if (strcmp(r->messages[r->num_messages - 1].role, "user"))
    return bad_request("%s", "the last message must be the user's (the answer follows it)");
  return NULL;
}

/* A number field in [lo, hi]; *present says whether it was given (null counts as absent). */
static vlmc_status_t number_field(const cJSON *doc, const char *key, double lo, double hi,
                                  bool *present, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, key);
  *present = false;
  if (!v || cJSON_IsNull(v)) return NULL;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
      v->valuedouble > hi)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "\"%s\" must be a number in [%.10g, %.10g]", key,
                            lo, hi);
  *present = true;
  *out = v->valuedouble;
  return NULL;
}

/* "stop": a string or a list of at most 4 non-empty strings (OpenAI's limit). */
static vlmc_status_t parse_stop(const cJSON *stop, serve_request_t *r) {
  if (!stop || cJSON_IsNull(stop)) return NULL;
  if (cJSON_IsString(stop)) {
    if (!stop->valuestring[0]) return bad_request("%s", "a \"stop\" string must not be empty");
    if (!(r->stop[r->num_stop++] = copy_string(stop->valuestring)))
      return vlmc_status_make(VLMC_OUT_OF_MEMORY, "oom");
    return NULL;
  }
  if (!cJSON_IsArray(stop) || cJSON_GetArraySize(stop) > SERVE_MAX_STOPS)
    return bad_request("%s", "\"stop\" must be a string or a list of at most 4 strings");
  const cJSON *item;
  cJSON_ArrayForEach(item, stop) {
    if (!cJSON_IsString(item) || !item->valuestring[0])
      return bad_request("%s", "each \"stop\" must be a non-empty string");
    if (!(r->stop[r->num_stop++] = copy_string(item->valuestring)))
      return vlmc_status_make(VLMC_OUT_OF_MEMORY, "oom");
  }
  return NULL;
}

static vlmc_status_t parse_options(const cJSON *doc, serve_request_t *r) {
  bool given;
  double d;
  const char *max_keys[] = {"max_tokens", "max_completion_tokens"};
  for (size_t i = 0; i < 2; ++i) {
    VLMC_RETURN_IF_ERROR(number_field(doc, max_keys[i], 1, SERVE_MAX_TOKENS, &given, &d));
    if (given) {
      if (d != floor(d)) return bad_request("\"%s\" must be an integer", max_keys[i]);
      r->max_tokens = (int)d;
    }
  }
  VLMC_RETURN_IF_ERROR(number_field(doc, "temperature", 0, 1e6, &r->has_temperature,
                                    &r->temperature));
  VLMC_RETURN_IF_ERROR(number_field(doc, "top_p", 1e-9, 1, &r->has_top_p, &r->top_p));
  VLMC_RETURN_IF_ERROR(number_field(doc, "seed", 0, 9007199254740991.0, &r->has_seed, &d));
  if (r->has_seed) {
    if (d != floor(d)) return bad_request("%s", "\"seed\" must be an integer");
    r->seed = (uint64_t)d;
  }
  VLMC_RETURN_IF_ERROR(number_field(doc, "n", 1, 1, &given, &d));
  VLMC_RETURN_IF_ERROR(parse_stop(cJSON_GetObjectItemCaseSensitive(doc, "stop"), r));
  const cJSON *stream = cJSON_GetObjectItemCaseSensitive(doc, "stream");
  if (stream && !cJSON_IsNull(stream)) {
    if (!cJSON_IsBool(stream)) return bad_request("%s", "\"stream\" must be true or false");
    r->stream = cJSON_IsTrue(stream);
  }
  return NULL;
}

vlmc_status_t serve_request_parse(const char *body, size_t len, bool allow_files,
                                  serve_request_t *out) {
  memset(out, 0, sizeof *out);
  cJSON *doc = cJSON_ParseWithLength(body, len);
  if (!doc) return vlmc_status_make(VLMC_PARSE_ERROR, "the request body is not valid JSON");
  vlmc_status_t st = NULL;
  if (!cJSON_IsObject(doc))
    st = vlmc_status_make(VLMC_PARSE_ERROR, "the request body must be a JSON object");
  if (!st) st = parse_messages(cJSON_GetObjectItemCaseSensitive(doc, "messages"), allow_files,
                               out);
  if (!st) st = parse_options(doc, out);
  cJSON_Delete(doc);
  if (st) serve_request_deinit(out);
  return st;
}

void serve_request_deinit(serve_request_t *r) {
  for (size_t i = 0; i < r->num_messages; ++i) free((char *)r->messages[i].text);
  for (size_t i = 0; i < r->num_parts; ++i) free((char *)r->parts[i].text);
  free(r->messages);
  free(r->parts);
  for (size_t i = 0; i < r->num_stop; ++i) free(r->stop[i]);
  for (size_t i = 0; i < r->num_images; ++i) {
    if (r->images[i].temporary) unlink(r->images[i].path);
    free(r->images[i].path);
    free(r->images[i].bytes);
  }
  memset(r, 0, sizeof *r);
}

static vlmc_status_t write_all(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return vlmc_status_make(VLMC_IO_ERROR, "writing an image: %s", strerror(errno));
    p += w;
    n -= (size_t)w;
  }
  return NULL;
}

vlmc_status_t serve_request_write_images(serve_request_t *r, const char *dir) {
  for (size_t i = 0; i < r->num_images; ++i) {
    serve_image_t *im = &r->images[i];
    if (!im->bytes) continue;
    size_t cap = strlen(dir) + 32;
    if (!(im->path = malloc(cap))) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "oom");
    snprintf(im->path, cap, "%s/image-XXXXXX", dir);
    int fd = mkstemp(im->path);
    if (fd < 0) {
      vlmc_status_t st = vlmc_status_make(VLMC_IO_ERROR, "%s: mkstemp: %s", dir,
                                          strerror(errno));
      free(im->path);
      im->path = NULL;
      return st;
    }
    im->temporary = true;
    vlmc_status_t st = write_all(fd, im->bytes, im->size);
    if (close(fd) != 0 && !st)
      st = vlmc_status_make(VLMC_IO_ERROR, "writing an image: %s", strerror(errno));
    VLMC_RETURN_IF_ERROR(st);
  }
  return NULL;
}

/* cJSON_PrintUnformatted of `doc` appended to `out`, then doc freed. */
static void put_json(vlmc_strbuf_t *out, cJSON *doc) {
  char *text = doc ? cJSON_PrintUnformatted(doc) : NULL;
  if (text) vlmc_strbuf_puts(out, text);
  else out->failed = true;
  free(text);
  cJSON_Delete(doc);
}

void serve_put_error(vlmc_strbuf_t *out, int http_status, const char *message) {
  cJSON *doc = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(doc, "error");
  cJSON_AddStringToObject(err, "message", message);
  cJSON_AddStringToObject(err, "type",
                          http_status < 500 ? "invalid_request_error" : "server_error");
  cJSON_AddNullToObject(err, "param");
  cJSON_AddNullToObject(err, "code");
  put_json(out, doc);
}

static cJSON *answer_object(const serve_answer_meta_t *meta, const char *object) {
  cJSON *doc = cJSON_CreateObject();
  cJSON_AddStringToObject(doc, "id", meta->id);
  cJSON_AddStringToObject(doc, "object", object);
  cJSON_AddNumberToObject(doc, "created", (double)meta->created);
  cJSON_AddStringToObject(doc, "model", meta->model);
  return doc;
}

void serve_put_completion(vlmc_strbuf_t *out, const serve_answer_meta_t *meta, const char *text,
                          const char *finish_reason, long long prompt_tokens,
                          long long completion_tokens) {
  cJSON *doc = answer_object(meta, "chat.completion");
  cJSON *choice = cJSON_CreateObject();
  cJSON_AddItemToArray(cJSON_AddArrayToObject(doc, "choices"), choice);
  cJSON_AddNumberToObject(choice, "index", 0);
  cJSON *message = cJSON_AddObjectToObject(choice, "message");
  cJSON_AddStringToObject(message, "role", "assistant");
  cJSON_AddStringToObject(message, "content", text);
  cJSON_AddStringToObject(choice, "finish_reason", finish_reason);
  cJSON *usage = cJSON_AddObjectToObject(doc, "usage");
  cJSON_AddNumberToObject(usage, "prompt_tokens", (double)prompt_tokens);
  cJSON_AddNumberToObject(usage, "completion_tokens", (double)completion_tokens);
  cJSON_AddNumberToObject(usage, "total_tokens", (double)(prompt_tokens + completion_tokens));
  put_json(out, doc);
}

void serve_put_chunk(vlmc_strbuf_t *out, const serve_answer_meta_t *meta, const char *text,
                     size_t len, const char *finish_reason) {
  cJSON *doc = answer_object(meta, "chat.completion.chunk");
  cJSON *choice = cJSON_CreateObject();
  cJSON_AddItemToArray(cJSON_AddArrayToObject(doc, "choices"), choice);
  cJSON_AddNumberToObject(choice, "index", 0);
  cJSON *delta = cJSON_AddObjectToObject(choice, "delta");
  if (text) {
    char *piece = strndup(text, len);
    cJSON_AddStringToObject(delta, "content", piece ? piece : "");
    free(piece);
    cJSON_AddNullToObject(choice, "finish_reason");
  } else {
    cJSON_AddStringToObject(choice, "finish_reason", finish_reason);
  }
  vlmc_strbuf_puts(out, "data: ");
  put_json(out, doc);
  vlmc_strbuf_puts(out, "\n\n");
}

void serve_put_json_string(vlmc_strbuf_t *out, const char *text) {
  put_json(out, cJSON_CreateString(text));
}
