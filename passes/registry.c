/* The pass registry, pipelines as text ("canonicalize{max-iterations=2},dce,cse"), and the
 * option and statistic accessors a running pass uses. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/internal.h"

/* ---- registry ---- */

void vlmc_pass_registry_init(vlmc_pass_registry_t *registry) {
  memset(registry, 0, sizeof *registry);
}

vlmc_status_t vlmc_pass_registry_add(vlmc_pass_registry_t *registry, const vlmc_pass_t *pass) {
  if (vlmc_pass_registry_find(registry, pass->name))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "pass '%s' is registered twice", pass->name);
  if (registry->count == VLMC_PASS_REGISTRY_CAPACITY)
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "the pass registry is full (%d passes)",
                            VLMC_PASS_REGISTRY_CAPACITY);
  registry->passes[registry->count++] = pass;
  return NULL;
}

vlmc_status_t vlmc_pass_registry_add_builtin(vlmc_pass_registry_t *registry) {
  static const vlmc_pass_t *const builtin[] = {
      &vlmc_pass_canonicalize, &vlmc_pass_cse,           &vlmc_pass_dce,
      &vlmc_pass_mrope_layout, &vlmc_pass_window_reorder, &vlmc_pass_quantize,
      &vlmc_pass_precision,    &vlmc_pass_fuse,           &vlmc_pass_memory_plan,
  };
  for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; ++i)
    VLMC_RETURN_IF_ERROR(vlmc_pass_registry_add(registry, builtin[i]));
  return NULL;
}

const vlmc_pass_t *vlmc_pass_registry_find(const vlmc_pass_registry_t *registry, const char *name) {
  for (uint32_t i = 0; i < registry->count; ++i)
    if (strcmp(registry->passes[i]->name, name) == 0) return registry->passes[i];
  return NULL;
}

void vlmc_pass_registry_list(const vlmc_pass_registry_t *registry, vlmc_strbuf_t *out) {
  for (uint32_t i = 0; i < registry->count; ++i) {
    if (i) vlmc_strbuf_puts(out, ", ");
    vlmc_strbuf_puts(out, registry->passes[i]->name);
  }
}

/* ---- option values ---- */

bool vlmc_pass_option_parse_int(const char *text, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || end == text || *end) return false;
  *out = v;
  return true;
}

bool vlmc_pass_option_parse_bool(const char *text, bool *out) {
  if (strcmp(text, "true") == 0 || strcmp(text, "1") == 0) *out = true;
  else if (strcmp(text, "false") == 0 || strcmp(text, "0") == 0) *out = false;
  else return false;
  return true;
}

static vlmc_status_t option_check(const vlmc_pass_t *pass, const vlmc_pass_option_t *option,
                                  const char *value) {
  int64_t i;
  bool b;
  bool ok = option->kind == VLMC_PASS_OPTION_STRING ||
            (option->kind == VLMC_PASS_OPTION_INT && vlmc_pass_option_parse_int(value, &i)) ||
            (option->kind == VLMC_PASS_OPTION_BOOL && vlmc_pass_option_parse_bool(value, &b));
  if (ok) return NULL;
  return vlmc_status_make(VLMC_INVALID_ARGUMENT, "pass '%s': option '%s' expects %s, got '%s'",
                          pass->name, option->name,
                          option->kind == VLMC_PASS_OPTION_INT ? "an integer" : "true or false",
                          value);
}

static int option_index(const vlmc_pass_t *pass, const char *name) {
  for (uint32_t i = 0; i < pass->num_options; ++i)
    if (strcmp(pass->options[i].name, name) == 0) return (int)i;
  return -1;
}

static const char *option_text(const vlmc_pass_context_t *ctx, const char *name) {
  int i = option_index(ctx->instance->pass, name);
  assert(i >= 0 && "a pass asked for an option it does not declare");
  return ctx->instance->option_values[i];
}

int64_t vlmc_pass_option_int(const vlmc_pass_context_t *ctx, const char *name) {
  int64_t v = 0;
  bool ok = vlmc_pass_option_parse_int(option_text(ctx, name), &v);
  assert(ok && "option values are checked when the pipeline is parsed");
  (void)ok;
  return v;
}

bool vlmc_pass_option_bool(const vlmc_pass_context_t *ctx, const char *name) {
  bool v = false;
  bool ok = vlmc_pass_option_parse_bool(option_text(ctx, name), &v);
  assert(ok && "option values are checked when the pipeline is parsed");
  (void)ok;
  return v;
}

const char *vlmc_pass_option_string(const vlmc_pass_context_t *ctx, const char *name) {
  return option_text(ctx, name);
}

void vlmc_pass_stat_add(vlmc_pass_context_t *ctx, uint32_t index, uint64_t n) {
  assert(index < ctx->instance->pass->num_statistics);
  ctx->instance->statistics[index] += n;
}

void vlmc_pass_remark(vlmc_pass_context_t *ctx, const char *fmt, ...) {
  if (!ctx->options || !ctx->options->log) return;
  va_list ap;
  va_start(ap, fmt);
  char message[1024];
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  ctx->options->log(ctx->options->user, ctx->instance->pass->name, message);
}

/* ---- pipelines ---- */

static void instance_free(vlmc_pass_instance_t *inst) {
  for (uint32_t i = 0; inst->option_values && i < inst->pass->num_options; ++i)
    free(inst->option_values[i]);
  free(inst->option_values);
  free(inst->statistics);
}

void vlmc_pass_pipeline_destroy(vlmc_pass_pipeline_t *pipeline) {
  if (!pipeline) return;
  for (uint32_t i = 0; i < pipeline->count; ++i) instance_free(&pipeline->instances[i]);
  free(pipeline->instances);
  free(pipeline);
}

uint32_t vlmc_pass_pipeline_size(const vlmc_pass_pipeline_t *pipeline) { return pipeline->count; }

static char *copy_trimmed(const char *begin, const char *end) {
  while (begin < end && isspace((unsigned char)*begin)) ++begin;
  while (end > begin && isspace((unsigned char)end[-1])) --end;
  char *s = malloc((size_t)(end - begin) + 1);
  if (!s) return NULL;
  memcpy(s, begin, (size_t)(end - begin));
  s[end - begin] = '\0';
  return s;
}

static vlmc_status_t unknown_pass(const vlmc_pass_registry_t *registry, const char *name) {
  vlmc_strbuf_t list;
  vlmc_strbuf_init(&list);
  vlmc_pass_registry_list(registry, &list);
  vlmc_status_t st = vlmc_status_make(VLMC_NOT_FOUND, "unknown pass '%s'; registered passes: %s",
                                      name, vlmc_strbuf_cstr(&list));
  vlmc_strbuf_deinit(&list);
  return st;
}

static vlmc_status_t unknown_option(const vlmc_pass_t *pass, const char *name) {
  vlmc_strbuf_t list;
  vlmc_strbuf_init(&list);
  for (uint32_t i = 0; i < pass->num_options; ++i)
    vlmc_strbuf_printf(&list, "%s%s", i ? ", " : "", pass->options[i].name);
  vlmc_status_t st = vlmc_status_make(VLMC_NOT_FOUND, "pass '%s' has no option '%s' (options: %s)",
                                      pass->name, name,
                                      pass->num_options ? vlmc_strbuf_cstr(&list) : "none");
  vlmc_strbuf_deinit(&list);
  return st;
}

/* "key=value" into the instance's option slot. */
static vlmc_status_t set_option(vlmc_pass_instance_t *inst, const char *begin, const char *end) {
  const char *eq = memchr(begin, '=', (size_t)(end - begin));
  char *key = copy_trimmed(begin, eq ? eq : end);
  char *value = eq ? copy_trimmed(eq + 1, end) : NULL;
  vlmc_status_t st = NULL;
  if (!key || (eq && !value)) st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  else if (!eq || !key[0])
    st = vlmc_status_make(VLMC_INVALID_ARGUMENT, "pass '%s': expected option=value, got '%s'",
                          inst->pass->name, key);
  int index = st ? -1 : option_index(inst->pass, key);
  if (!st && index < 0) st = unknown_option(inst->pass, key);
  if (!st) st = option_check(inst->pass, &inst->pass->options[index], value);
  if (!st) {
    free(inst->option_values[index]);
    inst->option_values[index] = value;
    value = NULL;
  }
  free(key);
  free(value);
  return st;
}

static vlmc_status_t instance_init(vlmc_pass_instance_t *inst, const vlmc_pass_t *pass) {
  inst->pass = pass;
  inst->option_values = calloc(pass->num_options + 1, sizeof(char *));
  inst->statistics = calloc(pass->num_statistics + 1, sizeof(uint64_t));
  if (!inst->option_values || !inst->statistics)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t i = 0; i < pass->num_options; ++i) {
    const char *d = pass->options[i].default_value ? pass->options[i].default_value : "";
    if (!(inst->option_values[i] = copy_trimmed(d, d + strlen(d))))
      return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  return NULL;
}

/* One element "name" or "name{k=v,k=v}" from [begin, end). */
static vlmc_status_t parse_element(vlmc_pass_pipeline_t *pipeline, const char *begin,
                                   const char *end) {
  const char *brace = memchr(begin, '{', (size_t)(end - begin));
  char *name = copy_trimmed(begin, brace ? brace : end);
  if (!name) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_status_t st = NULL;
  const vlmc_pass_t *pass = vlmc_pass_registry_find(pipeline->registry, name);
  if (!name[0]) st = vlmc_status_make(VLMC_INVALID_ARGUMENT, "empty pass name in the pipeline");
  else if (!pass) st = unknown_pass(pipeline->registry, name);
  free(name);
  VLMC_RETURN_IF_ERROR(st);
  vlmc_pass_instance_t *inst = &pipeline->instances[pipeline->count++];
  VLMC_RETURN_IF_ERROR(instance_init(inst, pass));
  if (!brace) return NULL;
  const char *close = end;
  while (close > brace && isspace((unsigned char)close[-1])) --close;
  if (close == brace + 1 || close[-1] != '}')
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "pass '%s': expected '}' after the options",
                            pass->name);
  for (const char *opt = brace + 1; opt < close - 1;) {
    const char *comma = memchr(opt, ',', (size_t)(close - 1 - opt));
    const char *stop = comma ? comma : close - 1;
    VLMC_RETURN_IF_ERROR(set_option(inst, opt, stop));
    opt = stop + 1;
  }
  return NULL;
}

vlmc_status_t vlmc_pass_pipeline_parse(const vlmc_pass_registry_t *registry, const char *text,
                                       vlmc_pass_pipeline_t **out_pipeline) {
  vlmc_pass_pipeline_t *pipeline = calloc(1, sizeof *pipeline);
  size_t max = 1;
  for (const char *c = text; *c; ++c) max += *c == ',';
  if (!pipeline || !(pipeline->instances = calloc(max, sizeof(vlmc_pass_instance_t)))) {
    free(pipeline);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  pipeline->registry = registry;
  vlmc_status_t st = NULL;
  bool blank = true;
  for (const char *c = text; *c; ++c) blank = blank && isspace((unsigned char)*c);
  for (const char *begin = text; !st && !blank;) {
    /* A comma ends an element unless it is inside the element's {options}. */
    const char *end = begin;
    int depth = 0;
    for (; *end && (depth > 0 || *end != ','); ++end) depth += (*end == '{') - (*end == '}');
    st = parse_element(pipeline, begin, end);
    if (!*end) break;
    begin = end + 1;
  }
  if (st) {
    vlmc_pass_pipeline_destroy(pipeline);
    return vlmc_status_annotate(st, "--passes: ");
  }
  *out_pipeline = pipeline;
  return NULL;
}

void vlmc_pass_pipeline_print_statistics(const vlmc_pass_pipeline_t *pipeline, vlmc_strbuf_t *out) {
  for (uint32_t i = 0; i < pipeline->count; ++i) {
    const vlmc_pass_instance_t *inst = &pipeline->instances[i];
    for (uint32_t s = 0; s < inst->pass->num_statistics; ++s)
      if (inst->statistics[s])
        vlmc_strbuf_printf(out, "%s: %s = %llu\n", inst->pass->name, inst->pass->statistics[s],
                           (unsigned long long)inst->statistics[s]);
  }
}
