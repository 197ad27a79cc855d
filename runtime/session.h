/* A loaded artifact ready to generate: the program (parsed from the artifact's IR), its
 * parameters (mapped, verified on first use), the tokenizer and chat template, and a backend
 * that runs the three functions of a vision-language model:
 *   encode_image(pixel_values f32[P,1176], grid i64[G,3]) -> image_embeds f32[P/4, H]
 *   prefill(input_ids i64[S], image_embeds f32[M,H], positions i64[3,S])
 *       -> (logits f32[V], k_0, v_0, ..., k_{L-1}, v_{L-1})
 *   decode(token i64[1], position i64[3,1], k_0, v_0, ...) -> (logits f32[V], k_0', v_0', ...)
 * The KV caches are values handed from one call to the next (kv_cache_append grows them).
 * Only the `ref` backend (the reference executor) exists so far. */
#ifndef VLMC_RUNTIME_SESSION_H
#define VLMC_RUNTIME_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/manifest.h"
#include "runtime/sampler.h"
#include "support/status.h"

typedef struct {
  const char *artifact_path;
  const char *params_dir; /* for artifacts compiled with --params external */
  const char *backend;    /* "ref" (default) */
  uint32_t threads;       /* 0: 1 */
  bool verify_params;     /* check every parameter's checksum at open, not on first use */
} vlmc_session_options_t;

typedef struct vlmc_session_s vlmc_session_t;

vlmc_status_t vlmc_session_open(const vlmc_session_options_t *options,
                                vlmc_session_t **out_session);
void vlmc_session_destroy(vlmc_session_t *session);
const vlmc_manifest_t *vlmc_session_manifest(const vlmc_session_t *session);
/* Milliseconds vlmc_session_open took (mapping, parsing, verifying the program). */
double vlmc_session_open_ms(const vlmc_session_t *session);

/* Receives generated text as soon as it forms complete UTF-8; return false to stop. */
typedef bool (*vlmc_text_fn)(void *ctx, const char *text, size_t len);

typedef struct {
  /* What to say: a prompt rendered with the chat template (images first), or explicit token
   * ids (input_ids != NULL), e.g. for models without a tokenizer. */
  const char *system_prompt;
  const char *prompt;
  const int64_t *input_ids;
  size_t num_input_ids;
  const char *const *image_paths;
  size_t num_images;
  int max_new_tokens;     /* default 128 when 0 */
  int64_t max_context;    /* 0: no limit beyond memory; a prompt that does not fit is refused */
  vlmc_sampler_options_t sampling;
  const char *dump_taps_dir; /* write taps.safetensors there */
  vlmc_text_fn on_text;
  void *text_ctx;
} vlmc_generate_options_t;

typedef struct {
  int64_t prompt_tokens;
  int64_t generated_tokens;
  int64_t *tokens;         /* the generated ids (owned; free with vlmc_generate_result_deinit) */
  int64_t rope_delta;
  bool stopped_on_eos;
  double encode_ms, prefill_ms, decode_ms;
  long peak_rss_kb;
} vlmc_generate_result_t;

vlmc_status_t vlmc_session_generate(vlmc_session_t *session, const vlmc_generate_options_t *options,
                                    vlmc_generate_result_t *out_result);
void vlmc_generate_result_deinit(vlmc_generate_result_t *result);

#endif
