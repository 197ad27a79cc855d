/* A loaded artifact ready to generate: the program (parsed from the artifact's IR), its
 * parameters (mapped, verified on first use), the tokenizer and chat template, and a backend
 * (runtime/backend.h, through the program walker runtime/program.h) that runs the three
 * functions of a vision-language model's calling convention (the manifest's):
 *   encode_image(pixel_values f32[P,1176], grid i64[G,3]) -> image_embeds f32[P/4, H]
 *   prefill(input_ids i64[S], image_embeds f32[M,H], positions i64[3,S])
 *       -> (logits f32[V], k_0, v_0, ..., k_{L-1}, v_{L-1})
 *   decode(token i64[1], position i64[3,1], k_0, v_0, ...) -> (logits f32[V], k_0', v_0', ...)
 * The KV caches are values handed from one call to the next (kv_cache_append grows them); they
 * stay in the backend's memory, and only the logits come back to the host each step. A chat
 * (below) keeps them between turns. The backend is the one asked for, or the registry's first
 * choice among those whose sections the artifact carries (`vlmc-run --backend help`). Opening
 * maps the artifact and checks every eagerly verified section; the parameters are checked
 * lazily, once, before the first forward pass (see docs/artifact.md). */
#ifndef VLMC_RUNTIME_SESSION_H
#define VLMC_RUNTIME_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "artifact/manifest.h"
#include "frontend/chat_template.h"
#include "runtime/backend.h"
#include "runtime/program.h"
#include "runtime/sampler.h"
#include "support/status.h"

/* Progress of long work as it goes: `done` of `total` (0: not known yet) in `unit` ("bytes",
 * "steps") of `what` ("weights loaded", "weights uploaded", "image encode"); done = 0 starts
 * a piece of work and done = total ends it. Steps are the walker's (runtime/program.h): dispatch regions and host
 * steps, not time. */
typedef void (*vlmc_progress_fn)(void *ctx, const char *what, uint64_t done, uint64_t total,
                                 const char *unit);

typedef struct {
  const char *artifact_path;
  const char *params_dir; /* for artifacts compiled with --params external */
  const char *backend;    /* a registered backend's name; NULL: the registry's pick */
  uint32_t threads;       /* 0: 1 */
  uint32_t device;        /* a device backend's device index (vlmc-run --device N) */
  bool verify_params;     /* check every parameter's checksum at open, not on first use */
  /* "resident": copy the weights into memory on first use (runtime/params.h); "mapped":
   * read them from the file mapping. NULL: resident on backends whose kernels stream the
   * weights (VLMC_BACKEND_STREAMS_WEIGHTS), mapped on the interpreter (which keeps its own
   * packed copies). */
  const char *weights;
  /* Progress of the weights' load (verify, resident copy) and upload at open and of each image
   * encode (NULL: none); a display decides what to show (vlmc-run: work that runs past a
   * second, unless --quiet). */
  vlmc_progress_fn progress;
  void *progress_ctx;
  /* The smallest and largest image area after resizing (vlmc-run --min-pixels/--max-pixels, as
   * transformers' processor kwargs): 0 keeps the artifact's (its processor config's). Refused
   * with a named error for a model that takes no images or min > max. */
  int64_t min_pixels, max_pixels;
} vlmc_session_options_t;

typedef struct vlmc_session_s vlmc_session_t;

vlmc_status_t vlmc_session_open(const vlmc_session_options_t *options,
                                vlmc_session_t **out_session);
void vlmc_session_destroy(vlmc_session_t *session);
const vlmc_manifest_t *vlmc_session_manifest(const vlmc_session_t *session);
/* The name of the backend the session runs on. */
const char *vlmc_session_backend(const vlmc_session_t *session);

/* What the backend and the walker counted, for --stats. */
typedef struct {
  vlmc_backend_counters_t backend;
  vlmc_program_memory_t memory;
  const vlmc_program_transfers_t *transfers; /* per function, borrowed */
  size_t num_transfers;
  bool host_memory; /* the backend's memory is the host's: nothing is ever copied */
  /* The weights as the artifact stores them (what a resident copy or an upload holds), and
   * the packed quantized words among them (u32 parameters, read through dequantize). */
  uint64_t weight_bytes, packed_weight_bytes;
} vlmc_session_stats_t;
void vlmc_session_stats(const vlmc_session_t *session, vlmc_session_stats_t *out);
/* Milliseconds vlmc_session_open took (mapping, parsing, verifying the program). */
double vlmc_session_open_ms(const vlmc_session_t *session);
/* Whether prompts can be text (the artifact has a tokenizer), or only token ids. */
bool vlmc_session_has_tokenizer(const vlmc_session_t *session);

/* The artifact's generation defaults (its checkpoint's generation_config.json, as
 * transformers' generate() applies it): greedy unless do_sample, with its repetition penalty,
 * top_k and top_p either way (they apply once a caller sets a temperature); greedy with no
 * penalty and no limits when the artifact recorded none. Seed 0. */
vlmc_sampler_options_t vlmc_session_default_sampling(const vlmc_session_t *session);

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
  /* Or a whole conversation to answer (vlmc_chat_turn_options_t's messages). */
  const vlmc_chat_message_t *messages;
  size_t num_messages;
  int max_new_tokens;     /* default 128 when 0 */
  int64_t max_context;    /* 0: the model's positions (manifest tokens.max_positions; no
                             limit when unknown); a prompt that does not fit is refused */
  vlmc_sampler_options_t sampling;
  const char *dump_taps_dir; /* write taps.safetensors there */
  vlmc_text_fn on_text;
  void *text_ctx;
  const char *const *stop_strings; /* as vlmc_chat_turn_options_t's */
  size_t num_stop_strings;
} vlmc_generate_options_t;

typedef struct {
  int64_t prompt_tokens;   /* tokens this call fed to the model before generating */
  int64_t context_tokens;  /* tokens the KV cache held when generation started */
  int64_t generated_tokens;
  int64_t *tokens;         /* the generated ids, an end-of-sequence id included (owned; free
                              with vlmc_generate_result_deinit) */
  int64_t rope_delta;
  bool stopped_on_eos;
  bool stopped_on_string;  /* a stop string ended the answer (vlmc_chat_turn_options_t) */
  double encode_ms, prefill_ms, decode_ms;
  long peak_rss_kb;
} vlmc_generate_result_t;

vlmc_status_t vlmc_session_generate(vlmc_session_t *session, const vlmc_generate_options_t *options,
                                    vlmc_generate_result_t *out_result);
void vlmc_generate_result_deinit(vlmc_generate_result_t *result);

/* ---- chat: several turns over one KV cache ----
 *
 * The first turn is a whole prompt (rendered with the chat template, images first, or explicit
 * token ids) run through encode_image and prefill. Each later turn feeds only its new tokens on
 * top of the cache the previous turns left: with a template, what the template renders after
 * the last answer for one more user message ("<|im_end|>\n<|im_start|>user\n...<|im_end|>\n
 * <|im_start|>assistant\n"); with token ids, the ids as given. Positions continue from the
 * cache length plus the first prompt's rope delta, as decode does, so the cache ends up holding
 * exactly what a single prefill of the whole conversation would have produced. An answer's
 * end-of-sequence id is not part of the conversation (the template's "<|im_end|>" follows
 * it); an answer cut by the token limit is kept as it is.
 *
 * The program's decode function appends one row to the cache per call (kv_cache_append with
 * C+1; an IR dimension holds one symbol, so "C+S" has no type), so the new tokens of a later
 * turn go through decode one at a time: S decode calls instead of one prefill over S rows.
 * Their cost is that of generating S tokens; on the ref backend a decode step costs about as
 * much as a prefill row, so a follow-up question of ~20 tokens costs ~20 decode steps. */
typedef struct {
  const char *system_prompt;       /* NULL: the template's default */
  const char *const *image_paths;  /* shown in the first turn, before its text */
  size_t num_images;
  int64_t max_context;             /* 0: the model's positions (none when unknown); a turn that
                                      would exceed it is refused */
  vlmc_sampler_options_t sampling; /* one seeded generator for the whole conversation */
  const char *dump_taps_dir;       /* write the first turn's taps to DIR/taps.safetensors */
  bool ignore_eos;                 /* an end-of-sequence id does not end an answer (it is
                                      kept in the conversation; the token limit ends it) */
} vlmc_chat_options_t;

typedef struct {
  const char *prompt;          /* the user's message */
  const int64_t *input_ids;    /* or token ids (first turn: the whole prompt; later: new ones) */
  size_t num_input_ids;
  /* Or, in the first turn only, a whole conversation (system, user and assistant messages,
   * frontend/chat_template.h) rendered by the template in place of the system prompt and
   * `prompt`; its image parts take the chat's image_paths in order (as many as there are).
   * Answering it is what a fresh run of the same conversation in turns would answer last. */
  const vlmc_chat_message_t *messages;
  size_t num_messages;
  int max_new_tokens;          /* default 128 when 0 */
  vlmc_text_fn on_text;
  void *text_ctx;
  /* Stop strings (runtime/stop_text.h; with on_text): the answer ends where one appears, and
   * on_text never receives any part of it. The conversation keeps the answer's tokens up to
   * the one that completed it. */
  const char *const *stop_strings;
  size_t num_stop_strings;
} vlmc_chat_turn_options_t;

typedef struct vlmc_chat_s vlmc_chat_t;

/* The session must outlive the chat; so must the strings of `options`. A session runs one
 * chat at a time (they share its backend and its buffers). */
vlmc_status_t vlmc_chat_create(vlmc_session_t *session, const vlmc_chat_options_t *options,
                               vlmc_chat_t **out_chat);
void vlmc_chat_destroy(vlmc_chat_t *chat);

/* Runs one turn. A turn refused before it touches the cache (it does not fit max_context, a
 * bad token id, a message that does not tokenize) leaves the conversation as it was; an error
 * while running ends the conversation (later turns are refused). */
vlmc_status_t vlmc_chat_turn(vlmc_chat_t *chat, const vlmc_chat_turn_options_t *options,
                             vlmc_generate_result_t *out_result);

/* The conversation so far, in order: every turn's prompt tokens and every answer's tokens
 * (without end-of-sequence ids). Borrowed until the next turn. Feeding these ids to a fresh
 * session (with the same images) continues exactly where this conversation is. */
const int64_t *vlmc_chat_tokens(const vlmc_chat_t *chat, size_t *out_count);
/* The logits the last answer token was sampled from (f32[vocab]); NULL before a turn ran. */
const float *vlmc_chat_logits(const vlmc_chat_t *chat, size_t *out_count);
/* Rows in the KV cache now (the conversation's tokens but possibly the last answer token,
 * which is fed at the start of the next turn). */
int64_t vlmc_chat_cache_length(const vlmc_chat_t *chat);

#endif
