/* A fake Qwen2.5-VL tensor table for model-builder tests: the tensor names and shapes of spec
 * §1.3 written out independently of models/, for any parsed config, in either spelling (hub
 * `visual.*`/`model.*` or in-memory `model.visual.*`/`model.language_model.*`), with knobs to
 * drop or reshape one tensor. */
#ifndef VLMC_TESTS_UNIT_TEST_COMPILER_MODEL_UTIL_H
#define VLMC_TESTS_UNIT_TEST_COMPILER_MODEL_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/config.h"
#include "models/qwen2_5_vl.h"

typedef struct {
  char name[300];
  vlmc_model_tensor_info_t info;
} fake_tensor_t;

typedef struct {
  fake_tensor_t *tensors;
  size_t count, capacity;
  bool in_memory_names;   /* model.visual.* / model.language_model.* */
  const char *drop;       /* a hub name to leave out */
  const char *reshape;    /* a hub name whose first dim is off by one */
  int lookups;            /* how many times find was called */
} fake_table_t;

static inline void fake_add(fake_table_t *t, const char *name, uint32_t rank,
                            const int64_t *shape) {
  if (t->drop && strcmp(name, t->drop) == 0) return;
  if (t->count == t->capacity) {
    t->capacity = t->capacity ? 2 * t->capacity : 128;
    t->tensors = realloc(t->tensors, t->capacity * sizeof *t->tensors);
  }
  fake_tensor_t *e = &t->tensors[t->count++];
  if (t->in_memory_names && strncmp(name, "visual.", 7) == 0)
    snprintf(e->name, sizeof e->name, "model.%s", name);
  else if (t->in_memory_names && strncmp(name, "model.", 6) == 0)
    snprintf(e->name, sizeof e->name, "model.language_model.%s", name + 6);
  else
    snprintf(e->name, sizeof e->name, "%s", name);
  e->info.dtype = VLMC_DTYPE_BF16;
  e->info.rank = rank;
  for (uint32_t i = 0; i < rank; ++i) e->info.shape[i] = shape[i];
  if (t->reshape && strcmp(name, t->reshape) == 0) e->info.shape[0] += 1;
}

static inline void fake_add1(fake_table_t *t, const char *name, int64_t a) {
  fake_add(t, name, 1, &a);
}
static inline void fake_add2(fake_table_t *t, const char *name, int64_t a, int64_t b) {
  int64_t s[2] = {a, b};
  fake_add(t, name, 2, s);
}

static inline void fake_linear(fake_table_t *t, const char *prefix, int64_t out, int64_t in,
                               bool bias) {
  char name[256];
  snprintf(name, sizeof name, "%s.weight", prefix);
  fake_add2(t, name, out, in);
  snprintf(name, sizeof name, "%s.bias", prefix);
  if (bias) fake_add1(t, name, out);
}

static inline void fake_fill(fake_table_t *t, const vlmc_model_config_t *c, bool with_lm_head) {
  const vlmc_vision_config_t *v = &c->vision;
  const vlmc_text_config_t *x = &c->text;
  char p[64], n[160];
  int64_t D = v->hidden_size, m2 = v->spatial_merge_size * v->spatial_merge_size;
  int64_t pe[5] = {D, v->in_channels, v->temporal_patch_size, v->patch_size, v->patch_size};
  fake_add(t, "visual.patch_embed.proj.weight", 5, pe);
  for (int64_t i = 0; i < v->depth; ++i) {
    snprintf(p, sizeof p, "visual.blocks.%lld", (long long)i);
    snprintf(n, sizeof n, "%s.norm1.weight", p);
    fake_add1(t, n, D);
    snprintf(n, sizeof n, "%s.norm2.weight", p);
    fake_add1(t, n, D);
    snprintf(n, sizeof n, "%s.attn.qkv", p);
    fake_linear(t, n, 3 * D, D, true);
    snprintf(n, sizeof n, "%s.attn.proj", p);
    fake_linear(t, n, D, D, true);
    snprintf(n, sizeof n, "%s.mlp.gate_proj", p);
    fake_linear(t, n, v->intermediate_size, D, true);
    snprintf(n, sizeof n, "%s.mlp.up_proj", p);
    fake_linear(t, n, v->intermediate_size, D, true);
    snprintf(n, sizeof n, "%s.mlp.down_proj", p);
    fake_linear(t, n, D, v->intermediate_size, true);
  }
  fake_add1(t, "visual.merger.ln_q.weight", D);
  fake_linear(t, "visual.merger.mlp.0", D * m2, D * m2, true);
  fake_linear(t, "visual.merger.mlp.2", v->out_hidden_size, D * m2, true);
  int64_t H = x->hidden_size, hd = x->head_dim, kv = x->num_key_value_heads * hd;
  fake_add2(t, "model.embed_tokens.weight", x->vocab_size, H);
  for (int64_t j = 0; j < x->num_hidden_layers; ++j) {
    snprintf(p, sizeof p, "model.layers.%lld", (long long)j);
    snprintf(n, sizeof n, "%s.input_layernorm.weight", p);
    fake_add1(t, n, H);
    snprintf(n, sizeof n, "%s.post_attention_layernorm.weight", p);
    fake_add1(t, n, H);
    snprintf(n, sizeof n, "%s.self_attn.q_proj", p);
    fake_linear(t, n, x->num_attention_heads * hd, H, true);
    snprintf(n, sizeof n, "%s.self_attn.k_proj", p);
    fake_linear(t, n, kv, H, true);
    snprintf(n, sizeof n, "%s.self_attn.v_proj", p);
    fake_linear(t, n, kv, H, true);
    snprintf(n, sizeof n, "%s.self_attn.o_proj", p);
    fake_linear(t, n, H, x->num_attention_heads * hd, false);
    snprintf(n, sizeof n, "%s.mlp.gate_proj", p);
    fake_linear(t, n, x->intermediate_size, H, false);
    snprintf(n, sizeof n, "%s.mlp.up_proj", p);
    fake_linear(t, n, x->intermediate_size, H, false);
    snprintf(n, sizeof n, "%s.mlp.down_proj", p);
    fake_linear(t, n, H, x->intermediate_size, false);
  }
  fake_add1(t, "model.norm.weight", H);
  if (with_lm_head) fake_add2(t, "lm_head.weight", x->vocab_size, H);
}

static inline bool fake_find(void *user, const char *name, vlmc_model_tensor_info_t *out) {
  fake_table_t *t = user;
  ++t->lookups;
  for (size_t i = 0; i < t->count; ++i)
    if (strcmp(t->tensors[i].name, name) == 0) {
      *out = t->tensors[i].info;
      return true;
    }
  return false;
}

static inline vlmc_model_tensors_t fake_tensors(fake_table_t *t) {
  vlmc_model_tensors_t tensors = {fake_find, t, "fake.safetensors"};
  return tensors;
}

static inline void fake_free(fake_table_t *t) { free(t->tensors); }

#endif
