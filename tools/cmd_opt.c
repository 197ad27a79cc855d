/* vlmc opt: parse a .vir file, verify it, run a pass pipeline, print the result. The test
 * driver of the IR and of every pass (text in, text out), and the tool to replay a dump. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "passes/pass.h"
#include "support/file.h"
#include "support/strbuf.h"
#include "tools/commands.h"
#include "tools/pass_flags.h"

typedef struct {
  const char *input;
  const char *output;
  const char *passes;
  bool split_input_file;
  bool pass_statistics;
  vlmc_pass_manager_options_t pm;
} opt_flags_t;

static void print_help(FILE *out, const vlmc_pass_registry_t *registry) {
  fprintf(out,
          "usage: vlmc opt IN.vir|- [options]\n"
          "\n"
          "Parses and verifies IN (a .vir file, or - for stdin), runs the passes, and prints the\n"
          "resulting IR to stdout. Exit status 0 on success, 1 on any error.\n"
          "\n"
          "options:\n"
          "  --passes=LIST             comma-separated pipeline, e.g. canonicalize,dce,cse or\n"
          "                            canonicalize{max-iterations=2},cse (default: none)\n"
          "  -o OUT                    write the IR to OUT instead of stdout\n"
          "%s"
          "                            (--dump-dir with --split-input-file: DIR/<chunk>/;\n"
          "                            --no-verify also skips verifying the input)\n"
          "  --split-input-file        treat '// -----' lines as separators between\n"
          "                            independent inputs; outputs are joined the same way\n"
          "  --pass-statistics         print each pass's counters to stderr at the end\n"
          "  --help                    this text\n"
          "\n"
          "passes:\n",
          vlmc_tool_pass_flags_help);
  for (uint32_t i = 0; i < registry->count; ++i) {
    const vlmc_pass_t *pass = registry->passes[i];
    fprintf(out, "  %-14s %s\n", pass->name, pass->summary);
    for (uint32_t o = 0; o < pass->num_options; ++o)
      fprintf(out, "      {%s=%s}  %s\n", pass->options[o].name, pass->options[o].default_value,
              pass->options[o].help);
  }
}

/* Returns 0 to go on, 1 on a usage error, -1 when --help was printed. */
static int parse_flags(int argc, char **argv, const vlmc_pass_registry_t *registry,
                       opt_flags_t *flags) {
  vlmc_tool_pass_flags_init(&flags->pm);
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    vlmc_pass_manager_options_t *pm = &flags->pm;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      print_help(stdout, registry);
      return -1;
    }
    if (vlmc_tool_flag_value(argc, argv, &i, "--passes", &flags->passes) ||
        vlmc_tool_flag_value(argc, argv, &i, "-o", &flags->output) ||
        vlmc_tool_pass_flag(argc, argv, &i, pm))
      continue;
    if (strcmp(a, "--split-input-file") == 0) flags->split_input_file = true;
    else if (strcmp(a, "--pass-statistics") == 0) flags->pass_statistics = true;
    else if ((a[0] != '-' || strcmp(a, "-") == 0) && !flags->input) flags->input = a;
    else {
      fprintf(stderr, "error: vlmc opt: unexpected argument '%s' (see vlmc opt --help)\n", a);
      return 1;
    }
  }
  if (!flags->input) {
    fprintf(stderr, "error: vlmc opt: no input file (see vlmc opt --help)\n");
    return 1;
  }
  return 0;
}

/* Located diagnostics ("file:line:col: error: ...") already say "error:" on their first
 * line; the rest get the prefix. */
static void report(vlmc_status_t status) {
  const char *message = vlmc_status_message(status);
  const char *located = strstr(message, ": error: ");
  const char *newline = strchr(message, '\n');
  if (located && (!newline || located < newline)) fprintf(stderr, "%s\n", message);
  else fprintf(stderr, "error: %s\n", message);
  vlmc_status_free(status);
}

/* ---- one input chunk ---- */

typedef struct {
  const char *text;
  size_t len;
  uint32_t first_line;
} chunk_t;

static vlmc_status_t process_chunk(const opt_flags_t *flags, vlmc_pass_pipeline_t *pipeline,
                                   const chunk_t *chunk, const char *dump_dir,
                                   vlmc_strbuf_t *out) {
  vlmc_parse_options_t parse = {strcmp(flags->input, "-") == 0 ? "<stdin>" : flags->input,
                                chunk->first_line};
  vlmc_module_t *module;
  VLMC_RETURN_IF_ERROR(vlmc_module_parse(chunk->text, chunk->len, &parse, &module));
  vlmc_status_t st = flags->pm.skip_verify ? NULL : vlmc_module_verify(module);
  vlmc_pass_manager_options_t pm = flags->pm;
  pm.dump_dir = dump_dir;
  if (!st) st = vlmc_pass_manager_run(pipeline, &pm, module);
  if (!st) vlmc_module_print(module, out);
  vlmc_module_destroy(module);
  return st;
}

/* Splits at lines that begin with "// -----", keeping each chunk's first line number. */
static size_t split_chunks(const char *text, size_t len, bool split, chunk_t *chunks,
                           size_t max_chunks) {
  size_t n = 0, start = 0;
  uint32_t line = 1, start_line = 1;
  for (size_t i = 0; split && i < len; ++i) {
    bool line_start = i == 0 || text[i - 1] == '\n';
    if (line_start && len - i >= 8 && memcmp(text + i, "// -----", 8) == 0 && n + 1 < max_chunks) {
      chunks[n++] = (chunk_t){text + start, i - start, start_line};
      while (i < len && text[i] != '\n') ++i;
      start = i + 1;
      start_line = line + 1;
    }
    if (i < len && text[i] == '\n') ++line;
  }
  if (start > len) start = len;
  chunks[n++] = (chunk_t){text + start, len - start, start_line};
  return n;
}

static size_t count_separators(const char *text, size_t len) {
  size_t n = 0;
  for (size_t i = 0; i + 8 <= len; ++i)
    if ((i == 0 || text[i - 1] == '\n') && memcmp(text + i, "// -----", 8) == 0) ++n;
  return n;
}

static char *chunk_dump_dir(const char *dump_dir, size_t index, bool split) {
  if (!dump_dir) return NULL;
  size_t need = strlen(dump_dir) + 32;
  char *dir = malloc(need);
  if (!dir) return NULL;
  if (split) snprintf(dir, need, "%s/%zu", dump_dir, index);
  else snprintf(dir, need, "%s", dump_dir);
  return dir;
}

static int run_chunks(const opt_flags_t *flags, vlmc_pass_pipeline_t *pipeline, const char *text,
                      size_t len, vlmc_strbuf_t *out) {
  size_t max_chunks = flags->split_input_file ? count_separators(text, len) + 1 : 1;
  chunk_t *chunks = malloc(max_chunks * sizeof *chunks);
  if (!chunks) return vlmc_status_report(vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory"));
  size_t n = split_chunks(text, len, flags->split_input_file, chunks, max_chunks);
  int rc = 0;
  for (size_t i = 0; i < n; ++i) {
    vlmc_strbuf_t chunk_out;
    vlmc_strbuf_init(&chunk_out);
    char *dir = chunk_dump_dir(flags->pm.dump_dir, i, flags->split_input_file);
    vlmc_status_t st = process_chunk(flags, pipeline, &chunks[i], dir, &chunk_out);
    free(dir);
    if (st) {
      report(st);
      rc = 1;
    }
    if (i) vlmc_strbuf_puts(out, "// -----\n");
    vlmc_strbuf_append(out, chunk_out.data ? chunk_out.data : "", chunk_out.len);
    vlmc_strbuf_deinit(&chunk_out);
  }
  free(chunks);
  return rc;
}

int vlmc_cmd_opt(int argc, char **argv) {
  vlmc_pass_registry_t registry;
  vlmc_pass_registry_init(&registry);
  vlmc_status_t st = vlmc_pass_registry_add_builtin(&registry);
  if (st) return vlmc_status_report(st);
  opt_flags_t flags;
  memset(&flags, 0, sizeof flags);
  int flag_rc = parse_flags(argc, argv, &registry, &flags);
  if (flag_rc) return flag_rc < 0 ? 0 : 1;

  vlmc_pass_pipeline_t *pipeline;
  st = vlmc_pass_pipeline_parse(&registry, flags.passes ? flags.passes : "", &pipeline);
  if (st) return vlmc_status_report(st);
  char *text;
  size_t len;
  st = vlmc_file_read_all(flags.input, &text, &len);
  if (st) {
    vlmc_pass_pipeline_destroy(pipeline);
    return vlmc_status_report(st);
  }
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  int rc = run_chunks(&flags, pipeline, text, len, &out);
  if (flags.pass_statistics) {
    vlmc_strbuf_t stats;
    vlmc_strbuf_init(&stats);
    vlmc_pass_pipeline_print_statistics(pipeline, &stats);
    fputs(vlmc_strbuf_cstr(&stats), stderr);
    vlmc_strbuf_deinit(&stats);
  }
  if (flags.output) st = vlmc_file_write_all(flags.output, vlmc_strbuf_cstr(&out), out.len);
  else fwrite(vlmc_strbuf_cstr(&out), 1, out.len, stdout);
  if (st) rc = vlmc_status_report(st);
  vlmc_strbuf_deinit(&out);
  free(text);
  vlmc_pass_pipeline_destroy(pipeline);
  return rc;
}
