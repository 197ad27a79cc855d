/* Target lists, their default pipeline, target options, and the driver that runs one target
 * over a module's dispatch regions (codegen/target.h). */
#include "codegen/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/kernel_emit.h"
#include "passes/pass.h"

/* ---- lists ---- */

vlmc_status_t vlmc_target_list_parse(const char *text, vlmc_target_list_t *out) {
  memset(out, 0, sizeof *out);
  const char *p = text && *text ? text : "ref";
  while (*p) {
    size_t n = strcspn(p, ",");
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)n, p);
    const vlmc_target_t *t = n < sizeof name ? vlmc_target_find(name) : NULL;
    if (!t) {
      vlmc_strbuf_t names;
      vlmc_strbuf_init(&names);
      vlmc_target_names(&names);
      vlmc_status_t st = vlmc_status_make(VLMC_UNSUPPORTED,
                                          "--target %s: unknown target '%.*s'; targets: %s", text,
                                          (int)n, p, vlmc_strbuf_cstr(&names));
      vlmc_strbuf_deinit(&names);
      return st;
    }
    bool listed = false;
    for (size_t i = 0; i < out->count; ++i) listed |= out->targets[i] == t;
    if (!listed && out->count == VLMC_TARGET_MAX_LIST)
      return vlmc_status_make(VLMC_UNSUPPORTED, "--target %s: at most %d targets", text,
                              VLMC_TARGET_MAX_LIST);
    if (!listed) out->targets[out->count++] = t;
    p += n;
    if (*p == ',') ++p;
  }
  return NULL;
}

static bool list_has(const char *list, const char *word);

/* Whether every kernel target of the list serves fusion `name`. */
static bool all_fuse(const vlmc_target_list_t *list, const char *name, size_t len) {
  char word[64];
  if (len >= sizeof word) return false;
  memcpy(word, name, len);
  word[len] = '\0';
  for (size_t i = 0; i < list->count; ++i) {
    const vlmc_target_t *t = list->targets[i];
    if (t->pipeline_tail && !list_has(t->fusions, word)) return false;
  }
  return true;
}

/* The tail with "fuse" given the options every kernel target serves (the first one's
 * fusions, kept where all list them). */
static void tail_with_fusions(const vlmc_target_list_t *list, const vlmc_target_t *first,
                              vlmc_strbuf_t *out) {
  for (const char *p = first->pipeline_tail; *p;) {
    size_t len = strcspn(p, ",");
    vlmc_strbuf_printf(out, "%s%.*s", p == first->pipeline_tail ? "" : ",", (int)len, p);
    if (len == 4 && !strncmp(p, "fuse", 4)) {
      int taken = 0;
      for (const char *f = first->fusions; f && *f;) {
        size_t n = strcspn(f, ",");
        if (n && all_fuse(list, f, n))
          vlmc_strbuf_printf(out, "%s%.*s=true", taken++ ? "," : "{", (int)n, f);
        f += n;
        if (*f == ',') ++f;
      }
      if (taken) vlmc_strbuf_printf(out, "}");
    }
    p += len;
    if (*p == ',') ++p;
  }
}

vlmc_status_t vlmc_target_list_tail(const vlmc_target_list_t *list, vlmc_strbuf_t *out) {
  const vlmc_target_t *first = NULL;
  for (size_t i = 0; i < list->count; ++i) {
    const vlmc_target_t *t = list->targets[i];
    if (!t->pipeline_tail) continue;
    /* One module, one set of regions: every target's kernels index the same dispatches. */
    if (first && strcmp(first->pipeline_tail, t->pipeline_tail) != 0)
      return vlmc_status_make(VLMC_UNSUPPORTED,
                              "targets %s and %s need different pipeline tails (%s, %s); "
                              "compile them into separate artifacts",
                              first->name, t->name, first->pipeline_tail, t->pipeline_tail);
    if (!first) first = t;
  }
  if (first) tail_with_fusions(list, first, out);
  return out->failed ? vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory") : NULL;
}

/* ---- precision ---- */

/* Whether `word` is an item of the comma-separated `list`. */
static bool list_has(const char *list, const char *word) {
  size_t n = strlen(word);
  for (const char *p = list; p && *p;) {
    size_t len = strcspn(p, ",");
    if (len == n && !strncmp(p, word, n)) return true;
    p += len;
    if (*p == ',') ++p;
  }
  return false;
}

/* "f32" -> "f32"; "f32,f16" -> "f32 or f16"; "f32,f16,bf16" -> "f32, f16 or bf16". */
static void alternatives(const char *list, vlmc_strbuf_t *out) {
  size_t items = 1;
  for (const char *p = list; *p; ++p) items += *p == ',';
  size_t k = 0;
  for (const char *p = list; *p; ++k) {
    size_t len = strcspn(p, ",");
    vlmc_strbuf_printf(out, "%s%.*s", k == 0 ? "" : k + 1 == items ? " or " : ", ", (int)len, p);
    p += len;
    if (*p == ',') ++p;
  }
}

/* --precision auto: the default the kernel targets agree on, f32 when none has one. */
static vlmc_status_t auto_precision(const vlmc_target_list_t *list, const char **out) {
  const vlmc_target_t *chooser = NULL;
  for (size_t i = 0; i < list->count; ++i) {
    const vlmc_target_t *t = list->targets[i];
    if (!t->default_precision) continue;
    if (chooser && strcmp(chooser->default_precision, t->default_precision) != 0)
      return vlmc_status_make(VLMC_UNSUPPORTED,
                              "--precision auto: targets %s (%s) and %s (%s) default to "
                              "different precisions; choose one with --precision",
                              chooser->name, chooser->default_precision, t->name,
                              t->default_precision);
    if (!chooser) chooser = t;
  }
  *out = chooser ? chooser->default_precision : "f32";
  return NULL;
}

static vlmc_status_t resolve_precision(const vlmc_target_list_t *list, const char *requested,
                                       const char **out) {
  if (!requested || !strcmp(requested, "auto")) return auto_precision(list, out);
  if (!list_has("f32,f16,bf16,bf16-matmul", requested))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "--precision %s: expected auto, f32, f16, bf16 or bf16-matmul",
                            requested);
  for (size_t i = 0; i < list->count; ++i) {
    const vlmc_target_t *t = list->targets[i];
    if (list_has(t->precisions, requested)) continue;
    vlmc_strbuf_t ok;
    vlmc_strbuf_init(&ok);
    alternatives(t->precisions, &ok);
    vlmc_status_t st = vlmc_status_make(VLMC_UNSUPPORTED,
                                        "--precision %s with --target %s: %s; use --precision %s, "
                                        "or --target ref",
                                        requested, t->name, t->precision_note,
                                        vlmc_strbuf_cstr(&ok));
    vlmc_strbuf_deinit(&ok);
    return st;
  }
  *out = requested;
  return NULL;
}

vlmc_status_t vlmc_target_list_pipeline(const vlmc_target_list_t *list, const char *precision,
                                        vlmc_strbuf_t *out) {
  const char *resolved = "f32";
  VLMC_RETURN_IF_ERROR(resolve_precision(list, precision, &resolved));
  vlmc_strbuf_t tail;
  vlmc_strbuf_init(&tail);
  vlmc_status_t st = vlmc_target_list_tail(list, &tail);
  /* The precision pass names f32 everywhere `ref`. */
  vlmc_strbuf_printf(out, "mrope-layout,window-reorder,canonicalize,cse,dce,precision{target=%s}",
                     strcmp(resolved, "f32") ? resolved : "ref");
  if (!st && tail.len) vlmc_strbuf_printf(out, ",%s", tail.data);
  vlmc_strbuf_deinit(&tail);
  if (st) return st;
  return out->failed ? vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory") : NULL;
}

/* ---- options ---- */

static bool some_target_takes(const char *key) {
  for (size_t i = 0; i < vlmc_target_count(); ++i) {
    const vlmc_target_t *t = vlmc_target_at(i);
    for (size_t k = 0; k < t->num_options; ++k)
      if (!strcmp(t->options[k].key, key)) return true;
  }
  return false;
}

static vlmc_status_t unknown_option(const char *key) {
  vlmc_strbuf_t keys;
  vlmc_strbuf_init(&keys);
  for (size_t i = 0; i < vlmc_target_count(); ++i) {
    const vlmc_target_t *t = vlmc_target_at(i);
    for (size_t k = 0; k < t->num_options; ++k)
      vlmc_strbuf_printf(&keys, "%s%s (target %s)", keys.len ? ", " : "", t->options[k].key,
                         t->name);
  }
  vlmc_status_t st = vlmc_status_make(VLMC_INVALID_ARGUMENT,
                                      "target option '%s': no target takes it; options: %s", key,
                                      keys.len ? vlmc_strbuf_cstr(&keys) : "none");
  vlmc_strbuf_deinit(&keys);
  return st;
}

/* One "key=value" item into the next slot of config (a later one wins over an earlier). */
static vlmc_status_t add_option(vlmc_target_config_t *c, const char *item, size_t len) {
  const char *eq = memchr(item, '=', len);
  size_t key_len = eq ? (size_t)(eq - item) : 0;
  if (!eq || key_len == 0 || key_len >= sizeof c->options[0].key ||
      len - key_len - 1 >= sizeof c->options[0].value)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "target option '%.*s': expected key=value",
                            (int)len, item);
  char key[sizeof c->options[0].key];
  snprintf(key, sizeof key, "%.*s", (int)key_len, item);
  if (!some_target_takes(key)) return unknown_option(key);
  size_t slot = 0;
  while (slot < c->num_options && strcmp(c->options[slot].key, key) != 0) ++slot;
  if (slot == VLMC_TARGET_MAX_OPTIONS)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "at most %d target options",
                            VLMC_TARGET_MAX_OPTIONS);
  if (slot == c->num_options) c->num_options++;
  snprintf(c->options[slot].key, sizeof c->options[slot].key, "%s", key);
  snprintf(c->options[slot].value, sizeof c->options[slot].value, "%.*s",
           (int)(len - key_len - 1), eq + 1);
  return NULL;
}

vlmc_status_t vlmc_target_config_set_options(vlmc_target_config_t *config, const char *text) {
  for (const char *p = text ? text : ""; *p;) {
    size_t n = strcspn(p, ",");
    if (n) VLMC_RETURN_IF_ERROR(add_option(config, p, n));
    p += n;
    if (*p == ',') ++p;
  }
  return NULL;
}

const char *vlmc_target_config_option(const vlmc_target_config_t *config, const char *key) {
  for (size_t i = 0; config && i < config->num_options; ++i)
    if (!strcmp(config->options[i].key, key)) return config->options[i].value;
  return NULL;
}

/* ---- running a target ---- */

/* Every op that would be a kernel is in a region (the executor refuses the others at run time;
 * better to say so at compile time). */
static vlmc_status_t check_coverage(const vlmc_target_t *t, const vlmc_func_t *func) {
  for (const vlmc_op_t *op = func->body.first; op; op = op->next)
    if (!op->dispatch && vlmc_dispatch_may_contain(op->kind))
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "@%s: '%s' (line %u) is in no dispatch region: the %s target "
                              "needs the fuse pass at the end of the pipeline",
                              func->name, vlmc_op_info(op->kind)->mnemonic, op->loc.line, t->name);
  return NULL;
}

static vlmc_status_t generate_region(const vlmc_target_t *t, void *state,
                                     const vlmc_func_t *func, const vlmc_dispatch_region_t *r) {
  const vlmc_op_t *anchor = r->ops[vlmc_kernel_anchor_index(r)];
  if (!t->supports(r, anchor))
    return vlmc_status_make(VLMC_UNSUPPORTED, "target %s: @%s dispatch %u (%s) is not supported",
                            t->name, func->name, r->id, vlmc_op_info(anchor->kind)->mnemonic);
  return t->emit_region(state, func, r);
}

static vlmc_status_t generate_func(const vlmc_target_t *t, void *state, const vlmc_func_t *func) {
  VLMC_RETURN_IF_ERROR(check_coverage(t, func));
  vlmc_dispatch_set_t set;
  VLMC_RETURN_IF_ERROR(vlmc_dispatch_regions(func, &set));
  vlmc_status_t st = NULL;
  for (uint32_t i = 0; !st && i < set.num_regions; ++i)
    st = generate_region(t, state, func, &set.regions[i]);
  vlmc_dispatch_set_free(&set);
  return st;
}

vlmc_status_t vlmc_target_generate(const vlmc_target_t *target, const vlmc_module_t *module,
                                   const vlmc_target_config_t *config,
                                   vlmc_target_output_t *out) {
  memset(out, 0, sizeof *out);
  out->target = target;
  if (!target->emit_region) return NULL; /* the program only */
  VLMC_RETURN_IF_ERROR(target->create(config, module, &out->state));
  vlmc_status_t st = NULL;
  for (uint32_t f = 0; !st && f < module->num_funcs; ++f)
    st = generate_func(target, out->state, module->funcs[f]);
  if (!st) st = target->finish(out->state, &out->sections);
  if (st) vlmc_target_output_free(out);
  return st;
}

void vlmc_target_output_free(vlmc_target_output_t *output) {
  if (output->target && output->target->destroy && output->state)
    output->target->destroy(output->state);
  memset(output, 0, sizeof *output);
}

const vlmc_target_section_t *vlmc_target_output_section(const vlmc_target_output_t *output,
                                                        const char *name) {
  for (size_t i = 0; i < output->sections.count; ++i)
    if (!strcmp(output->sections.items[i].name, name)) return &output->sections.items[i];
  return NULL;
}

vlmc_status_t vlmc_target_run_tail(const vlmc_target_t *target, vlmc_module_t *m) {
  vlmc_target_list_t list = {{target}, 1};
  vlmc_strbuf_t tail;
  vlmc_strbuf_init(&tail);
  vlmc_status_t parsed = vlmc_target_list_tail(&list, &tail);
  vlmc_pass_registry_t registry;
  vlmc_pass_registry_init(&registry);
  if (!parsed) parsed = vlmc_pass_registry_add_builtin(&registry);
  vlmc_pass_pipeline_t *pipeline = NULL;
  if (!parsed) parsed = vlmc_pass_pipeline_parse(&registry, tail.len ? tail.data : "", &pipeline);
  vlmc_strbuf_deinit(&tail);
  VLMC_RETURN_IF_ERROR(parsed);
  vlmc_pass_manager_options_t o;
  memset(&o, 0, sizeof o);
  vlmc_status_t st = vlmc_pass_manager_run(pipeline, &o, m);
  vlmc_pass_pipeline_destroy(pipeline);
  return st;
}
