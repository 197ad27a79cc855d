/* vlmc-serve's JSON: the OpenAI chat-completions request as vlmc_session_generate takes it, and
 * the answers and errors in OpenAI's format. No HTTP here (tools/vlmc_serve.c has it), so that
 * what a request means is decided in one place. */
#ifndef VLMC_TOOLS_SERVE_JSON_H
#define VLMC_TOOLS_SERVE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frontend/chat_template.h"
#include "support/status.h"
#include "support/strbuf.h"

enum {
  SERVE_MAX_IMAGES = 64,
  SERVE_MAX_TOKENS = 1 << 24,
  SERVE_MAX_STOPS = 4,
  SERVE_MAX_MESSAGES = 1024,
  SERVE_MAX_PARTS = 4096, /* content parts, all messages together */
};

/* An image of a request: decoded bytes of a data URI (checked to be a PNG or JPEG), or a local
 * file's path (only with --allow-file-images). */
typedef struct {
  uint8_t *bytes; /* owned; NULL for a path */
  size_t size;
  char *path;     /* owned: the local path, or the temporary file the bytes were written to */
  bool temporary; /* path is a temporary file to remove */
} serve_image_t;

typedef struct {
  /* The conversation, in order: roles "system" ("developer" is read as it), "user" and
   * "assistant", the last one the user's; a message's content is a string (text) or parts
   * (text and image parts, images only in user messages), each image part taking images[] in
   * order. Texts are owned by the request; messages[i].parts point into parts. */
  vlmc_chat_message_t *messages;
  size_t num_messages;
  vlmc_chat_part_t *parts;
  size_t num_parts;
  serve_image_t images[SERVE_MAX_IMAGES];
  size_t num_images;
  int max_tokens; /* 0: the server's default */
  bool has_temperature, has_top_p, has_seed;
  double temperature, top_p;
  uint64_t seed;
  bool stream;
  char *stop[SERVE_MAX_STOPS]; /* owned, non-empty: the answer ends before the first one */
  size_t num_stop;
} serve_request_t;

/* Parses a chat-completions body. Refusals (VLMC_INVALID_ARGUMENT / VLMC_PARSE_ERROR /
 * VLMC_UNSUPPORTED, each an HTTP 400) name the field: not a JSON object, no "messages", a role
 * other than system/user/assistant, a system message after a user's, an assistant message
 * first or last, an image outside a user's message, over 1024 messages or 4096 parts, an
 * http(s) image URL, a file image without allow_files, bad base64, bytes that are not a PNG or
 * JPEG, more than 4 or empty "stop" strings, "n" other than 1, and out-of-range numbers. On error *out is cleared. */
vlmc_status_t serve_request_parse(const char *body, size_t len, bool allow_files,
                                  serve_request_t *out);
void serve_request_deinit(serve_request_t *request);

/* Writes each data-URI image to a fresh file in `dir` (mkstemp), so that the runtime, which
 * reads images from paths, can take it; serve_request_deinit removes them. */
vlmc_status_t serve_request_write_images(serve_request_t *request, const char *dir);

/* {"error":{"message","type","param":null,"code":null}}; type is "invalid_request_error" for a
 * 4xx status and "server_error" otherwise. */
void serve_put_error(vlmc_strbuf_t *out, int http_status, const char *message);

typedef struct {
  const char *id;     /* "chatcmpl-N" */
  const char *model;
  long long created;  /* Unix seconds */
} serve_answer_meta_t;

/* `text` as a JSON string literal (quotes and escapes). */
void serve_put_json_string(vlmc_strbuf_t *out, const char *text);

/* The whole answer of a non-streaming request. */
void serve_put_completion(vlmc_strbuf_t *out, const serve_answer_meta_t *meta, const char *text,
                          const char *finish_reason, long long prompt_tokens,
                          long long completion_tokens);
/* One server-sent event "data: {chunk}\n\n": a piece of text (finish_reason null), or the last
 * chunk (text NULL, finish_reason "stop" or "length"). */
void serve_put_chunk(vlmc_strbuf_t *out, const serve_answer_meta_t *meta, const char *text,
                     size_t len, const char *finish_reason);

#endif
