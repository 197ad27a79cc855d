/* vlmc-run: runs a compiled .vlmc artifact. Generated text goes to stdout as it is produced;
 * everything else (errors, --stats) goes to stderr. Links the runtime only. */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/session.h"
#include "support/file.h"

enum { MAX_IMAGES = 64 };

typedef struct {
  vlmc_session_options_t session;
  vlmc_generate_options_t generate;
  const char *images[MAX_IMAGES];
  const char *input_ids_path;
  bool stats;
} run_options_t;

static void print_usage(FILE *out) {
  fprintf(out,
          "usage: vlmc-run MODEL.vlmc [options]\n"
          "  -p, --prompt TEXT      the user's message (images go before it, in order)\n"
          "  --image FILE           a PNG or JPEG image; repeat for several\n"
          "  --system TEXT          a system prompt (default: the template's)\n"
          "  -n N                   at most N new tokens (default 128)\n"
          "  -t TEMP                temperature; 0 = greedy (default)\n"
          "  --top-k K, --top-p P   sampling limits (defaults: none)\n"
          "  --seed S               sampling seed (default 0): same seed, same text\n"
          "  --max-context N        refuse prompts that need more than N positions\n"
          "  --backend ref          the backend (only ref so far)\n"
          "  --threads N            threads for the ref backend (1 or 2)\n"
          "  --params DIR           checkpoint folder for artifacts compiled with --params "
          "external\n"
          "  --verify               check every parameter's checksum before running\n"
          "  --dump-taps DIR        write the stage taps to DIR/taps.safetensors\n"
          "  --input-ids FILE       a JSON list of token ids instead of -p (no tokenizer needed)\n"
          "  --stats                timings and peak memory on stderr\n");
}

static bool parse_int(const char *text, long long min, long long max, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || *end || end == text || v < min || v > max) return false;
  *out = v;
  return true;
}

static bool parse_double(const char *text, double *out) {
  char *end;
  double v = strtod(text, &end);
  if (*end || end == text) return false;
  *out = v;
  return true;
}

static int bad_value(const char *flag, const char *value, const char *expected) {
  fprintf(stderr, "error: %s: expected %s, got '%s'\n", flag, expected, value);
  return 2;
}

/* Returns 0 to continue, 1 after --help, 2 on a usage error. */
static int parse_args(int argc, char **argv, run_options_t *o) {
  o->generate.sampling.top_p = 1.0f;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    long long n;
    double d;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      print_usage(stdout);
      return 1;
    }
    if (a[0] != '-') {
      if (o->session.artifact_path) return bad_value("MODEL", a, "one artifact");
      o->session.artifact_path = a;
      continue;
    }
    if (!strcmp(a, "--stats")) { o->stats = true; continue; }
    if (!strcmp(a, "--verify")) { o->session.verify_params = true; continue; }
    if (!v) {
      fprintf(stderr, "error: %s needs a value\n", a);
      return 2;
    }
    ++i;
    if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) o->generate.prompt = v;
    else if (!strcmp(a, "--system")) o->generate.system_prompt = v;
    else if (!strcmp(a, "--image")) {
      if (o->generate.num_images == MAX_IMAGES) return bad_value(a, v, "at most 64 images");
      o->images[o->generate.num_images++] = v;
    } else if (!strcmp(a, "-n")) {
      if (!parse_int(v, 1, 1 << 24, &n)) return bad_value(a, v, "a positive integer");
      o->generate.max_new_tokens = (int)n;
    } else if (!strcmp(a, "-t") || !strcmp(a, "--temperature")) {
      if (!parse_double(v, &d) || d < 0) return bad_value(a, v, "a number >= 0");
      o->generate.sampling.temperature = (float)d;
    } else if (!strcmp(a, "--top-k")) {
      if (!parse_int(v, 0, 1 << 30, &n)) return bad_value(a, v, "an integer >= 0");
      o->generate.sampling.top_k = (int)n;
    } else if (!strcmp(a, "--top-p")) {
      if (!parse_double(v, &d) || !(d > 0 && d <= 1)) return bad_value(a, v, "a number in (0, 1]");
      o->generate.sampling.top_p = (float)d;
    } else if (!strcmp(a, "--seed")) {
      if (!parse_int(v, 0, (long long)(~0ULL >> 1), &n)) return bad_value(a, v, "an integer >= 0");
      o->generate.sampling.seed = (uint64_t)n;
    } else if (!strcmp(a, "--max-context")) {
      if (!parse_int(v, 1, (long long)1 << 40, &n)) return bad_value(a, v, "a positive integer");
      o->generate.max_context = n;
    } else if (!strcmp(a, "--backend")) o->session.backend = v;
    else if (!strcmp(a, "--threads")) {
      if (!parse_int(v, 1, 16, &n)) return bad_value(a, v, "1 to 16");
      o->session.threads = (uint32_t)n;
    } else if (!strcmp(a, "--params")) o->session.params_dir = v;
    else if (!strcmp(a, "--dump-taps")) o->generate.dump_taps_dir = v;
    else if (!strcmp(a, "--input-ids")) o->input_ids_path = v;
    else {
      fprintf(stderr, "error: unknown option '%s'\n\n", a);
      print_usage(stderr);
      return 2;
    }
  }
  if (!o->session.artifact_path) {
    print_usage(stderr);
    return 2;
  }
  if (!o->generate.prompt && !o->input_ids_path) {
    fprintf(stderr, "error: give a prompt with -p (or token ids with --input-ids)\n");
    return 2;
  }
  o->generate.image_paths = o->images;
  return 0;
}

static vlmc_status_t read_input_ids(const char *path, int64_t **out, size_t *out_n) {
  char *text = NULL;
  size_t len = 0;
  VLMC_RETURN_IF_ERROR(vlmc_file_read_all(path, &text, &len));
  cJSON *root = cJSON_ParseWithLength(text, len);
  free(text);
  vlmc_status_t status = NULL;
  int n = cJSON_IsArray(root) ? cJSON_GetArraySize(root) : -1;
  if (n <= 0) status = vlmc_status_make(VLMC_PARSE_ERROR, "%s: expected a non-empty JSON list of "
                                        "token ids", path);
  *out = status ? NULL : malloc((size_t)n * sizeof **out);
  for (int i = 0; !status && i < n; ++i) {
    const cJSON *item = cJSON_GetArrayItem(root, i);
    if (!cJSON_IsNumber(item) || item->valuedouble < 0 || item->valuedouble > 1e12)
      status = vlmc_status_make(VLMC_PARSE_ERROR, "%s: [%d]: expected a token id", path, i);
    else
      (*out)[i] = (int64_t)item->valuedouble;
  }
  cJSON_Delete(root);
  if (status) {
    free(*out);
    *out = NULL;
  }
  *out_n = status ? 0 : (size_t)n;
  return status;
}

static bool write_text(void *ctx, const char *text, size_t len) {
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return true;
}

static void print_stats(const vlmc_session_t *s, const vlmc_generate_result_t *r) {
  double prefill_tps = r->prefill_ms > 0 ? 1e3 * (double)r->prompt_tokens / r->prefill_ms : 0;
  int64_t decoded = r->generated_tokens > 1 ? r->generated_tokens - 1 : 0;
  double decode_tps = r->decode_ms > 0 ? 1e3 * (double)decoded / r->decode_ms : 0;
  fprintf(stderr,
          "stats: load %.1f ms | image encode %.1f ms | prefill %lld tokens in %.1f ms "
          "(%.1f tokens/s) | decode %lld tokens in %.1f ms (%.1f tokens/s) | peak memory %.1f MB\n",
          vlmc_session_open_ms(s), r->encode_ms, (long long)r->prompt_tokens, r->prefill_ms,
          prefill_tps, (long long)decoded, r->decode_ms, decode_tps, r->peak_rss_kb / 1024.0);
}

int main(int argc, char **argv) {
  run_options_t o;
  memset(&o, 0, sizeof o);
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc == 1 ? 0 : 2;
  int64_t *ids = NULL;
  vlmc_status_t status = NULL;
  if (o.input_ids_path) {
    status = read_input_ids(o.input_ids_path, &ids, &o.generate.num_input_ids);
    o.generate.input_ids = ids;
  }
  vlmc_session_t *session = NULL;
  if (!status) status = vlmc_session_open(&o.session, &session);
  vlmc_generate_result_t result;
  memset(&result, 0, sizeof result);
  o.generate.on_text = write_text;
  if (!status) status = vlmc_session_generate(session, &o.generate, &result);
  if (!status) {
    printf("\n");
    if (!vlmc_session_manifest(session)->eos_count || !result.stopped_on_eos)
      fflush(stdout);
    if (o.stats) print_stats(session, &result);
    if (!result.stopped_on_eos && o.stats)
      fprintf(stderr, "stats: stopped at the token limit (-n), not at an end-of-sequence token\n");
  }
  vlmc_generate_result_deinit(&result);
  vlmc_session_destroy(session);
  free(ids);
  return vlmc_status_report(status);
}
