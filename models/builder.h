/* What every model family's graph builder shares: the tensor table it asks for weights (by
 * name, dtype and shape; the data is never read while building), the build options of the
 * calling convention, and the small graph helpers over them (a weight checked against the
 * shape the config implies, linear with an optional bias, the SwiGLU MLP, RMSNorm and
 * LayerNorm, reshape, slice, binary ops, stage taps).
 *
 * A family's builder embeds a vlmc_model_builder_t in its own context and calls the helpers
 * with it; weights become module parameters named as the checkpoint names them, in their
 * checkpoint dtype, cast to f32 where they are used (precision is the passes' decision). */
#ifndef VLMC_MODELS_BUILDER_H
#define VLMC_MODELS_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "support/status.h"

/* What the builder needs to know of one checkpoint tensor. */
typedef struct {
  vlmc_dtype_t dtype;
  uint32_t rank;
  int64_t shape[VLMC_IR_MAX_RANK];
} vlmc_model_tensor_info_t;

/* A tensor table: `find` answers for a name (false when absent). The builder asks by hub name
 * and then by the name's other spelling (`visual.X` <-> `model.visual.X`, `model.X` <->
 * `model.language_model.X`), so tables in either layout work. `source` names the table in
 * messages (a file or folder). */
typedef struct {
  bool (*find)(void *user, const char *name, vlmc_model_tensor_info_t *out_info);
  void *user;
  const char *source;
} vlmc_model_tensors_t;

/* The most tensors a family's plan may hold (random checkpoints, the fuzzer's tables). */
enum { VLMC_MODEL_MAX_PLANNED_TENSORS = 1 << 16 };

/* Receives one tensor of a family's plan (vlmc_model_family_t.plan_tensors): its hub name,
 * its shape, and whether it is a norm weight (random weights for it are drawn around 1). */
typedef void (*vlmc_model_tensor_fn)(void *ctx, const char *name, uint32_t rank,
                                     const int64_t *shape, bool is_norm);

/* What a build is asked for, the same for every family. */
typedef struct {
  /* Fixed grid: num_images rows of (t, h, w) in patches; NULL for a symbolic grid. */
  const int64_t *grid;
  size_t num_images;
  /* Emit `tap` ops for the family's stage taps. */
  bool taps;
} vlmc_model_build_options_t;

/* The state the helpers share: the module, where weights come from, and the function being
 * built (vlmc_builder_init(&m->b, func) when a family starts a function). */
typedef struct {
  vlmc_module_t *module;
  const vlmc_model_tensors_t *tensors;
  vlmc_builder_t b;
  bool taps; /* vlmc_model_tap emits a tap op */
  /* The checkpoint's quantization (config.json's, docs/quantization.md): a weight stored as
   * packed u32 words next to `.scales` and `.biases` is read through `dequantize`; 0 when the
   * checkpoint is not quantized. */
  int64_t quant_bits, quant_group;
} vlmc_model_builder_t;

/* Longest tensor or value name a builder formats ("visual.blocks.31.mlp.down_proj.weight" is
 * 37). */
enum { VLMC_MODEL_NAME_MAX = 256 };

/* snprintf into a VLMC_MODEL_NAME_MAX buffer; asserts that the name fits (names come from the
 * config's small integers, so a longer one is a bug). */
void vlmc_model_name(char *out, const char *fmt, ...) VLMC_PRINTF(2, 3);

/* The table's entry for `name` under any of its spellings; false when it has none. */
bool vlmc_model_tensor_info(const vlmc_model_builder_t *m, const char *name,
                            vlmc_model_tensor_info_t *out_info);
/* The raw parameter `name` (checkpoint dtype), e.g. for an embedding gather: added to the
 * module on first use, after checking the table's tensor against `shape` ("tensor 'x' not
 * found (also tried 'model.x') in DIR", "DIR: tensor 'x' has shape [4,8], config.json implies
 * [4,16]"). */
vlmc_status_t vlmc_model_param(vlmc_model_builder_t *m, const char *name, uint32_t rank,
                               const int64_t *shape, vlmc_value_t **out_value);
/* The same parameter in f32 (cast when stored otherwise; dequantized when the checkpoint
 * stores it quantized: packed `X.weight` u32[rows, ceil(cols * bits / 32)] with `X.scales`
 * and `X.biases` [rows, ceil(cols / group)], shapes checked by name). */
vlmc_status_t vlmc_model_weight(vlmc_model_builder_t *m, const char *name, uint32_t rank,
                                const int64_t *shape, vlmc_value_t **out_value);

/* Checks the table against a size the config implies, before a builder allocates for it:
 * tensor `name` must be there with `shape` (errors as for vlmc_model_param). Adds nothing. */
vlmc_status_t vlmc_model_check_tensor(const vlmc_model_builder_t *m, const char *name,
                                      uint32_t rank, const int64_t *shape);
/* Checks that the table holds the tensor `prefix` + (count - 1) + `suffix` of the last of the
 * `count` blocks (layers) the config's `field` asks for, before a builder allocates per-block
 * arrays: a config saying num_hidden_layers 16777216 would otherwise allocate gigabytes before
 * the first missing tensor is noticed. The error names the field and the blocks the table has
 * ("config.json: num_hidden_layers is 16777216, but DIR has layers 0 to 1 only
 * (model.layers.2.input_layernorm.weight is absent)"); blocks are numbered from 0 without
 * gaps, so the last one present is found by O(log count) lookups. */
vlmc_status_t vlmc_model_require_blocks(const vlmc_model_builder_t *m, const char *field,
                                        int64_t count, const char *prefix, const char *suffix);

/* x·Wᵀ (+ b) with the weight `prefix.weight` [out, in] and, when `bias`, `prefix.bias`. */
vlmc_status_t vlmc_model_linear(vlmc_model_builder_t *m, vlmc_value_t *x, const char *prefix,
                                int64_t out, int64_t in, bool bias, const char *name,
                                vlmc_value_t **out_value);
/* SiLU(x·Wgᵀ) ⊙ (x·Wuᵀ) then ·Wdᵀ, the SwiGLU MLP under `prefix` (gate/up/down_proj). */
vlmc_status_t vlmc_model_swiglu(vlmc_model_builder_t *m, vlmc_value_t *x, const char *prefix,
                                int64_t hidden, int64_t inner, bool bias, const char *name,
                                vlmc_value_t **out_value);
/* RMSNorm with the weight `weight_name` [dim]. */
vlmc_status_t vlmc_model_rms_norm(vlmc_model_builder_t *m, vlmc_value_t *x,
                                  const char *weight_name, int64_t dim, double eps,
                                  const char *name, vlmc_value_t **out_value);
/* LayerNorm with `prefix.weight` [dim] and, when `bias`, `prefix.bias` [dim] (the torch
 * nn.LayerNorm names). */
vlmc_status_t vlmc_model_layer_norm(vlmc_model_builder_t *m, vlmc_value_t *x,
                                    const char *prefix, int64_t dim, double eps, bool bias,
                                    const char *name, vlmc_value_t **out_value);

/* Rows `ids` of the table `table_name` [vocab, hidden], in f32: the rows are gathered in the
 * checkpoint dtype and only they are cast (the table itself is vocab x hidden). `name` names
 * the gathered rows; their f32 copy, when one is needed, is `name`_f32. */
vlmc_status_t vlmc_model_embedding(vlmc_model_builder_t *m, const char *table_name, int64_t vocab,
                                   int64_t hidden, vlmc_value_t *ids, const char *name,
                                   vlmc_value_t **out_value);
/* softmax(q·kᵀ·scale)·v over q/k/v [rows, heads, head_dim] (GQA when k/v have fewer heads);
 * `segments` (i64 cumulative row offsets) restricts attention to blocks, NULL for none;
 * `causal` by cache index (query i of S sees keys up to T - S + i). */
vlmc_status_t vlmc_model_attention(vlmc_model_builder_t *m, vlmc_value_t *q, vlmc_value_t *k,
                                   vlmc_value_t *v, vlmc_value_t *segments, double scale,
                                   bool causal, const char *name, vlmc_value_t **out_value);

/* x viewed with a new shape (same dtype). */
vlmc_status_t vlmc_model_reshape(vlmc_model_builder_t *m, vlmc_value_t *x, uint32_t rank,
                                 const vlmc_dim_t *dims, const char *name,
                                 vlmc_value_t **out_value);
/* Elements [start, end) along `axis`. */
vlmc_status_t vlmc_model_slice(vlmc_model_builder_t *m, vlmc_value_t *x, int64_t axis,
                               int64_t start, int64_t end, const char *name,
                               vlmc_value_t **out_value);
/* A two-operand op without attributes (add, mul, ...). */
vlmc_status_t vlmc_model_binary(vlmc_model_builder_t *m, vlmc_op_kind_t kind, vlmc_value_t *a,
                                vlmc_value_t *b, const char *name, vlmc_value_t **out_value);
/* `tap @stage %x` when taps are on; nothing otherwise. */
vlmc_status_t vlmc_model_tap(vlmc_model_builder_t *m, const char *stage, vlmc_value_t *x);

#endif
