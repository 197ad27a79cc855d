/* vlmc random-checkpoint --config CONFIG.json -o DIR [--seed S] [--shard-size N]: a
 * HuggingFace-layout Qwen2.5-VL checkpoint with random bf16 weights for a given config, so
 * that real model shapes (3B, 7B) can be compiled, inspected and loaded without downloading
 * anything: bench/load_time.sh makes the 3B-shaped one with it.
 *
 * DIR receives config.json (the given file, unchanged), generation_config.json and
 * preprocessor_config.json (the Qwen2.5-VL processor settings with the config's patch, merge
 * and temporal sizes), model-0000i-of-0000N.safetensors and model.safetensors.index.json.
 * The tensor list is derived from the config and checked against the model builder before
 * anything is written: every tensor the builder asks for is there with the shape it expects,
 * and nothing else is. Tensors are streamed to disk in chunks of 1 MiB, so memory stays small
 * for any model size. Values: uniform with standard deviation 0.02 (the configs'
 * initializer_range) around 0, and around 1 for norm weights; each tensor's stream is seeded
 * by the seed and its name, so the same seed gives the same bytes. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/config.h"
#include "frontend/safetensors.h"
#include "support/float16.h"
#include "models/family.h"
#include "support/file.h"
#include "support/hash.h"
#include "support/strbuf.h"
#include "tools/commands.h"
#include "tools/pass_flags.h"

enum { NAME_MAX_LEN = 128, MAX_RANK = 5, CHUNK_ELEMENTS = 1 << 19 };
/* The 7B has 729 tensors, the 72B about 1500: a config implying more (num_hidden_layers
 * 16777216 is inside the parser's range) is refused before its plan takes gigabytes. */
enum { MAX_PLANNED_TENSORS = 1 << 16 };

typedef struct {
  char name[NAME_MAX_LEN];
  uint32_t rank;
  int64_t shape[MAX_RANK];
  uint64_t nbytes;
  bool is_norm;      /* values around 1 */
  bool used;         /* the model builder asked for it */
  int shard;
  uint64_t offset;   /* within the shard's data */
} planned_tensor_t;

typedef struct {
  planned_tensor_t *items;
  size_t count, capacity;
  vlmc_status_t error; /* the first failure of plan_add */
} plan_t;

/* ---- the tensor list of a config ---- */

/* The list is the family's (vlmc_model_family_t.plan_tensors), checked against its builder
 * below before anything is written. */

/* A vlmc_model_tensor_fn: appends one tensor of the family's plan. */
static void plan_add(void *ctx, const char *name, uint32_t rank, const int64_t *shape,
                     bool is_norm) {
  plan_t *p = ctx;
  if (p->error) return;
  if (p->count == MAX_PLANNED_TENSORS) {
    p->error = vlmc_status_make(VLMC_OUT_OF_RANGE,
                                "the config implies more than %d tensors (num_hidden_layers, "
                                "vision_config.depth); vlmc random-checkpoint makes at most that",
                                MAX_PLANNED_TENSORS);
    return;
  }
  if (rank > MAX_RANK || strlen(name) >= NAME_MAX_LEN) {
    p->error = vlmc_status_make(VLMC_INTERNAL, "planned tensor '%s' does not fit the tool's "
                                "limits (rank %d, names below %d bytes)", name, MAX_RANK,
                                NAME_MAX_LEN);
    return;
  }
  if (p->count == p->capacity) {
    size_t capacity = p->capacity ? 2 * p->capacity : 256;
    planned_tensor_t *grown = realloc(p->items, capacity * sizeof *grown);
    if (!grown) {
      p->error = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
      return;
    }
    p->items = grown;
    p->capacity = capacity;
  }
  planned_tensor_t *t = &p->items[p->count++];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->rank = rank;
  t->is_norm = is_norm;
  uint64_t elements = 1;
  for (uint32_t i = 0; i < rank; ++i) {
    t->shape[i] = shape[i];
    elements *= (uint64_t)shape[i];
  }
  t->nbytes = 2 * elements;
}

/* ---- the list checked against the model builder ---- */

static bool plan_find(void *user, const char *name, vlmc_model_tensor_info_t *out) {
  plan_t *p = user;
  for (size_t i = 0; i < p->count; ++i) {
    planned_tensor_t *t = &p->items[i];
    if (strcmp(t->name, name) != 0) continue;
    t->used = true;
    out->dtype = VLMC_DTYPE_BF16;
    out->rank = t->rank;
    memcpy(out->shape, t->shape, t->rank * sizeof *t->shape);
    return true;
  }
  return false;
}

static vlmc_status_t plan_check(plan_t *p, const vlmc_model_family_t *family,
                                const vlmc_model_config_t *cfg, const char *config) {
  vlmc_model_tensors_t tensors = {.find = plan_find, .user = p, .source = "the planned tensors"};
  vlmc_module_t *module = NULL;
  vlmc_status_t status = family->build(cfg, &tensors, NULL, &module);
  vlmc_module_destroy(module);
  if (status)
    return vlmc_status_annotate(status, "%s: the tensor list for this config does not fit the "
                                "model builder: ", config);
  for (size_t i = 0; i < p->count; ++i)
    if (!p->items[i].used)
      return vlmc_status_make(VLMC_INTERNAL, "%s: planned tensor '%s' is not used by the model",
                              config, p->items[i].name);
  return NULL;
}

/* Puts tensors into shards of at most `limit` bytes (a bigger tensor gets a shard alone). */
static int plan_shard(plan_t *p, uint64_t limit) {
  int shard = 0;
  uint64_t used = 0;
  for (size_t i = 0; i < p->count; ++i) {
    planned_tensor_t *t = &p->items[i];
    if (used > 0 && used + t->nbytes > limit) {
      ++shard;
      used = 0;
    }
    t->shard = shard;
    t->offset = used;
    used += t->nbytes;
  }
  return shard + 1;
}

/* ---- writing ---- */

static void shard_name(char *out, size_t size, int shard, int count) {
  snprintf(out, size, "model-%05d-of-%05d.safetensors", shard + 1, count);
}

static void shard_header(const plan_t *p, int shard, vlmc_strbuf_t *out) {
  vlmc_strbuf_puts(out, "{\"__metadata__\":{\"format\":\"pt\"}");
  for (size_t i = 0; i < p->count; ++i) {
    const planned_tensor_t *t = &p->items[i];
    if (t->shard != shard) continue;
    vlmc_strbuf_printf(out, ",\"%s\":{\"dtype\":\"BF16\",\"shape\":[", t->name);
    for (uint32_t d = 0; d < t->rank; ++d)
      vlmc_strbuf_printf(out, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    vlmc_strbuf_printf(out, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)t->offset,
                       (unsigned long long)(t->offset + t->nbytes));
  }
  vlmc_strbuf_putc(out, '}');
  while ((8 + out->len) % 8) vlmc_strbuf_putc(out, ' '); /* data 8-byte aligned, as torch */
}

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Uniform on [center - a, center + a] with a = 0.02 * sqrt(3): standard deviation 0.02. */
static void fill_chunk(uint64_t *rng, bool is_norm, uint16_t *out, size_t n) {
  const double half_width = 0.02 * 1.7320508075688772, center = is_norm ? 1.0 : 0.0;
  for (size_t i = 0; i < n; ++i) {
    double u = (double)(splitmix64(rng) >> 11) * 0x1.0p-53;
    out[i] = vlmc_f32_to_bf16((float)(center + (2 * u - 1) * half_width));
  }
}

static vlmc_status_t write_tensor(FILE *f, const char *path, const planned_tensor_t *t,
                                  uint64_t seed, uint16_t *chunk) {
  uint64_t rng = vlmc_xxh64(t->name, strlen(t->name), seed);
  for (uint64_t left = t->nbytes / 2; left > 0;) {
    size_t n = left < CHUNK_ELEMENTS ? (size_t)left : CHUNK_ELEMENTS;
    fill_chunk(&rng, t->is_norm, chunk, n);
    if (fwrite(chunk, 2, n, f) != n)
      return vlmc_status_make(VLMC_IO_ERROR, "%s: write failed: %s", path, strerror(errno));
    left -= n;
  }
  return NULL;
}

static vlmc_status_t write_shard(const plan_t *p, const char *dir, int shard, int count,
                                 uint64_t seed, uint16_t *chunk) {
  char name[64];
  shard_name(name, sizeof name, shard, count);
  vlmc_strbuf_t path, header;
  vlmc_strbuf_init(&path);
  vlmc_strbuf_init(&header);
  vlmc_strbuf_printf(&path, "%s/%s", dir, name);
  shard_header(p, shard, &header);
  const char *file = vlmc_strbuf_cstr(&path);
  /* A temporary file renamed into place when whole (support/file.h): an interrupted run
   * leaves no shard that looks complete. */
  vlmc_output_t output;
  vlmc_status_t status = vlmc_output_open(file, &output);
  FILE *f = output.stream;
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = (unsigned char)((uint64_t)header.len >> (8 * i));
  if (!status && (fwrite(len, 1, 8, f) != 8 || fwrite(header.data, 1, header.len, f) != header.len))
    status = vlmc_status_make(VLMC_IO_ERROR, "%s: write failed: %s", file, strerror(errno));
  for (size_t i = 0; !status && i < p->count; ++i)
    if (p->items[i].shard == shard) status = write_tensor(f, file, &p->items[i], seed, chunk);
  if (status) vlmc_output_discard(&output);
  else status = vlmc_output_commit(&output);
  vlmc_strbuf_deinit(&path);
  vlmc_strbuf_deinit(&header);
  return status;
}

static vlmc_status_t write_text(const char *dir, const char *name, const vlmc_strbuf_t *text) {
  vlmc_strbuf_t path;
  vlmc_strbuf_init(&path);
  vlmc_strbuf_printf(&path, "%s/%s", dir, name);
  vlmc_status_t status = vlmc_file_write_all(vlmc_strbuf_cstr(&path), text->data, text->len);
  vlmc_strbuf_deinit(&path);
  return status;
}

static vlmc_status_t write_index(const plan_t *p, const char *dir, int count) {
  uint64_t total = 0;
  for (size_t i = 0; i < p->count; ++i) total += p->items[i].nbytes;
  vlmc_strbuf_t json;
  vlmc_strbuf_init(&json);
  vlmc_strbuf_printf(&json, "{\n  \"metadata\": {\"total_size\": %llu},\n  \"weight_map\": {",
                     (unsigned long long)total);
  for (size_t i = 0; i < p->count; ++i) {
    char name[64];
    shard_name(name, sizeof name, p->items[i].shard, count);
    vlmc_strbuf_printf(&json, "%s\n    \"%s\": \"%s\"", i ? "," : "", p->items[i].name, name);
  }
  vlmc_strbuf_puts(&json, "\n  }\n}\n");
  vlmc_status_t status = write_text(dir, "model.safetensors.index.json", &json);
  vlmc_strbuf_deinit(&json);
  return status;
}

/* The processor and generation settings the Qwen2.5-VL uploads ship, with this config's
 * geometry and stop id. */
static vlmc_status_t write_side_configs(const vlmc_model_config_t *cfg, const char *dir) {
  vlmc_strbuf_t json;
  vlmc_strbuf_init(&json);
  vlmc_strbuf_printf(&json,
                     "{\n  \"min_pixels\": 3136,\n  \"max_pixels\": 12845056,\n"
                     "  \"patch_size\": %lld,\n  \"temporal_patch_size\": %lld,\n"
                     "  \"merge_size\": %lld,\n"
                     "  \"image_mean\": [0.48145466, 0.4578275, 0.40821073],\n"
                     "  \"image_std\": [0.26862954, 0.26130258, 0.27577711],\n"
                     "  \"do_resize\": true,\n  \"do_rescale\": true,\n"
                     "  \"rescale_factor\": 0.00392156862745098,\n  \"do_normalize\": true,\n"
                     "  \"do_convert_rgb\": true,\n  \"resample\": 3,\n"
                     "  \"image_processor_type\": \"Qwen2VLImageProcessor\",\n"
                     "  \"processor_class\": \"Qwen2_5_VLProcessor\"\n}\n",
                     (long long)cfg->vision.patch_size, (long long)cfg->vision.temporal_patch_size,
                     (long long)cfg->vision.spatial_merge_size);
  vlmc_status_t status = write_text(dir, "preprocessor_config.json", &json);
  vlmc_strbuf_clear(&json);
  vlmc_strbuf_puts(&json, "{\n  \"do_sample\": false");
  if (cfg->text.has_bos_token_id)
    vlmc_strbuf_printf(&json, ",\n  \"bos_token_id\": %lld", (long long)cfg->text.bos_token_id);
  if (cfg->text.has_eos_token_id)
    vlmc_strbuf_printf(&json, ",\n  \"eos_token_id\": [%lld]", (long long)cfg->text.eos_token_id);
  vlmc_strbuf_puts(&json, "\n}\n");
  if (!status) status = write_text(dir, "generation_config.json", &json);
  vlmc_strbuf_deinit(&json);
  return status;
}

typedef struct {
  const char *config_path;
  const char *out_dir;
  uint64_t seed;
  uint64_t shard_bytes;
  bool dry_run; /* check the tensor list and print the summary; write nothing */
} options_t;

static vlmc_status_t write_checkpoint(const options_t *o, const plan_t *p,
                                      const vlmc_model_config_t *cfg, const vlmc_strbuf_t *config,
                                      int shards) {
  VLMC_RETURN_IF_ERROR(vlmc_file_mkdirs(o->out_dir));
  VLMC_RETURN_IF_ERROR(write_text(o->out_dir, "config.json", config));
  VLMC_RETURN_IF_ERROR(write_side_configs(cfg, o->out_dir));
  uint16_t *chunk = malloc(CHUNK_ELEMENTS * sizeof *chunk);
  if (!chunk) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_status_t status = NULL;
  for (int s = 0; !status && s < shards; ++s)
    status = write_shard(p, o->out_dir, s, shards, o->seed, chunk);
  free(chunk);
  VLMC_RETURN_IF_ERROR(status);
  return write_index(p, o->out_dir, shards);
}

static vlmc_status_t random_checkpoint(const options_t *o) {
  vlmc_strbuf_t config;
  vlmc_strbuf_init(&config);
  char *text = NULL;
  size_t len = 0;
  VLMC_RETURN_IF_ERROR(vlmc_file_read_all(o->config_path, &text, &len));
  vlmc_strbuf_append(&config, text, len);
  vlmc_model_config_t cfg;
  const vlmc_model_family_t *family = NULL;
  vlmc_status_t status =
      vlmc_model_family_parse_config(text, len, o->config_path, &family, &cfg);
  free(text);
  plan_t plan = {0};
  if (!status && !family->plan_tensors)
    status = vlmc_status_make(VLMC_UNSUPPORTED, "%s: random-checkpoint has no tensor list for "
                              "the %s family", o->config_path, family->display_name);
  if (!status)
    status = vlmc_status_annotate(family->plan_tensors(&cfg, plan_add, &plan), "%s: ",
                                  o->config_path);
  if (!status) status = vlmc_status_annotate(plan.error, "%s: ", o->config_path);
  if (!status) status = plan_check(&plan, family, &cfg, o->config_path);
  if (!status) {
    int shards = plan_shard(&plan, o->shard_bytes);
    uint64_t total = 0;
    for (size_t i = 0; i < plan.count; ++i) total += plan.items[i].nbytes;
    fprintf(stderr, "random-checkpoint: %zu tensors, %llu parameters, %.3f GB of bf16 in %d "
            "shard(s) -> %s\n", plan.count, (unsigned long long)(total / 2), (double)total / 1e9,
            shards, o->out_dir);
    if (!o->dry_run) status = write_checkpoint(o, &plan, &cfg, &config, shards);
  }
  free(plan.items);
  vlmc_strbuf_deinit(&config);
  return status;
}

static void print_help(FILE *out) {
  fprintf(out,
          "usage: vlmc random-checkpoint --config CONFIG.json -o DIR [--seed S] [--shard-size N]\n"
          "                              [--dry-run]\n"
          "  a Qwen2.5-VL checkpoint with random bf16 weights for CONFIG.json: config.json,\n"
          "  generation_config.json, preprocessor_config.json, sharded safetensors and their\n"
          "  index; tensors are streamed to disk (memory stays small for any size)\n"
          "  --config FILE     the model's config.json (e.g. tests/fixtures/configs/)\n"
          "  -o DIR            the checkpoint folder to write\n"
          "  --seed S          the random seed (default 0): same seed, same bytes\n"
          "  --shard-size N    at most N bytes per shard, with an optional K, M or G (binary)\n"
          "                    suffix (default 4G); a bigger tensor gets a shard of its own\n"
          "  --dry-run         check the tensor list against the model and print the summary\n"
          "                    only\n");
}

static bool parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || *end || end == text || text[0] == '-' || v < min || v > max) return false;
  *out = v;
  return true;
}

/* "4G", "512M", "300K", "1000": bytes, binary multiples. */
static bool parse_size(const char *text, uint64_t *out) {
  char digits[32];
  size_t len = strlen(text);
  if (len == 0 || len >= sizeof digits) return false;
  memcpy(digits, text, len + 1);
  unsigned shift = 0;
  char last = digits[len - 1];
  if (last == 'K' || last == 'M' || last == 'G') {
    shift = last == 'K' ? 10 : last == 'M' ? 20 : 30;
    digits[len - 1] = '\0';
  }
  uint64_t v;
  if (!parse_u64(digits, 1, UINT64_MAX >> 31, &v)) return false;
  *out = v << shift;
  return true;
}

int vlmc_cmd_random_checkpoint(int argc, char **argv) {
  options_t o = {.shard_bytes = 4096ULL << 20};
  const char *seed = NULL, *shard = NULL;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      print_help(stdout);
      return 0;
    }
    if (!strcmp(argv[i], "--dry-run")) {
      o.dry_run = true;
      continue;
    }
    if (vlmc_tool_flag_value(argc, argv, &i, "--config", &o.config_path) ||
        vlmc_tool_flag_value(argc, argv, &i, "-o", &o.out_dir) ||
        vlmc_tool_flag_value(argc, argv, &i, "--seed", &seed) ||
        vlmc_tool_flag_value(argc, argv, &i, "--shard-size", &shard))
      continue;
    fprintf(stderr, "error: vlmc random-checkpoint: unexpected argument '%s' (see --help)\n",
            argv[i]);
    return 2;
  }
  if (!o.config_path || !o.out_dir) {
    fprintf(stderr, "error: vlmc random-checkpoint: need --config CONFIG.json and -o DIR\n");
    return 2;
  }
  if (seed && !parse_u64(seed, 0, UINT64_MAX, &o.seed)) {
    fprintf(stderr, "error: --seed %s: expected an integer >= 0\n", seed);
    return 2;
  }
  if (shard && !parse_size(shard, &o.shard_bytes)) {
    fprintf(stderr, "error: --shard-size %s: expected a byte count with an optional K, M or G "
            "suffix\n", shard);
    return 2;
  }
  return vlmc_status_report(random_checkpoint(&o));
}
