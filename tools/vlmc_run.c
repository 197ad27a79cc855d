/* vlmc-run: runs a compiled .vlmc artifact. Generated text goes to stdout as it is produced;
 * everything else (errors, --stats, the chat prompt marker) goes to stderr. Links the runtime
 * only (tests/runtime_deps.cmake checks that no LLVM or MLIR library is linked).
 *
 * One prompt (-p or --input-ids) gives one answer. With -i, it is a chat: each line of stdin
 * is one user message, each answer is streamed and ends with a newline, and the KV cache is
 * kept between turns, so a turn costs only its new tokens (runtime/session.h). With --batch,
 * each line of a file is one request on a fresh conversation and each answer one JSON line
 * (runtime/batch.h): the artifact is loaded once for all of them. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "runtime/backend.h"
#include "runtime/batch.h"
#include "runtime/input_ids.h"
#include "runtime/session.h"
#include "runtime/stop_text.h"
#include "support/file.h"
#include <cJSON.h>

#include "support/json.h"
#include "support/strbuf.h"
#include "tools/cli.h"
#ifdef VLMC_METAL_EMULATION
#include "tests/metal/emu.h"
#endif

enum { MAX_IMAGES = 64 };

typedef struct {
  vlmc_session_options_t session;
  vlmc_chat_options_t chat;
  const char *prompt;
  const char *prompt_file; /* -f: the prompt from a file, "-" for stdin */
  int max_new_tokens;
  const char *images[MAX_IMAGES];
  const char *input_ids_path;
  const char *ids_out_path;
  const char *batch_path;
  bool interactive;
  bool load_only;
  bool print_ids;
  bool stats;
  bool json; /* --json: --stats as JSON lines */
  bool list_devices;
  bool quiet;
  unsigned given; /* GIVEN_*: the sampling flags on the command line (over the artifact's) */
  const char *stops[VLMC_STOP_MAX_STRINGS]; /* --stop */
  size_t num_stops;
} run_options_t;

enum { GIVEN_TEMPERATURE = 1, GIVEN_TOP_K = 2, GIVEN_TOP_P = 4, GIVEN_PENALTY = 8 };

static void print_usage(FILE *out) {
  fprintf(out,
          "usage: vlmc-run MODEL.vlmc [options]\n"
          "  -p, --prompt TEXT      the user's message (images go before it, in order)\n"
          "  -f, --file FILE        the user's message from FILE (- for stdin), one trailing\n"
          "                         newline dropped: for prompts too long for the command line\n"
          "  -i, --interactive      chat: one user message per line of stdin (a line ending\n"
          "                         in \\ continues on the next), one answer per line of\n"
          "                         stdout; the KV cache is kept between turns, and --image,\n"
          "                         --system and -p apply to the first turn. /image PATH shows\n"
          "                         an image with the next message (after the first turn:\n"
          "                         the conversation is run again with it), /clear starts\n"
          "                         over, /exit ends; Ctrl-C stops an answer (at the prompt:\n"
          "                         ends)\n"
          "  --batch FILE           one request per line of FILE (- for stdin), each a JSON\n"
          "                         object {\"id\", \"prompt\" or \"input_ids\": [...],\n"
          "                         \"images\": [...], \"system\", \"max_new_tokens\"} (a prompt\n"
          "                         or token ids is required), answered on a fresh\n"
          "                         conversation as one JSON line on stdout: {\"id\", \"text\",\n"
          "                         \"tokens\", \"prompt_tokens\", \"generated_tokens\",\n"
          "                         \"stop\", \"encode_ms\", \"prefill_ms\", \"decode_ms\"}\n"
          "                         or {\"id\", \"line\", \"error\"}; one load for all;\n"
          "                         exit 1 when any request failed\n"
          "  --image FILE           a PNG or JPEG image; repeat for several\n"
          "  --system TEXT          a system prompt (default: the template's)\n"
          "  --min-pixels N, --max-pixels N\n"
          "                         the smallest and largest image area after resizing (as\n"
          "                         transformers' processor kwargs; default: the artifact's,\n"
          "                         from the checkpoint's processor config: `vlmc inspect`)\n"
          "  -n N                   at most N new tokens per answer (default 128)\n"
          "  -t, --temperature TEMP\n"
          "                         temperature; 0 = greedy, > 0 samples\n"
          "  --top-k K, --top-p P   sampling limits\n"
          "                         (-t, --top-k, --top-p and --repeat-penalty default to the\n"
          "                         checkpoint's generation_config.json, as transformers'\n"
          "                         generate() applies it, `vlmc inspect` shows them; greedy\n"
          "                         when it sets none)\n"
          "  --seed S               sampling seed (default 0): same seed, same text\n"
          "  --repeat-penalty F     transformers' repetition_penalty: the logit of every id\n"
          "                         already in the conversation divided by F when positive,\n"
          "                         multiplied when negative, greedy or not (1: off)\n"
          "  --min-p P              sampling: drop the tokens less probable than P times the\n"
          "                         most probable (default 0: off)\n"
          "  --ignore-eos           an end-of-sequence token does not end the answer (-n does)\n"
          "  --stop TEXT            end the answer where TEXT appears (not printed); repeat\n"
          "                         for several (at most 16)\n"
          "  --max-context N        refuse a prompt (or chat turn) that would need more than N\n"
          "                         positions, counting the -n new tokens (default: the\n"
          "                         model's max_position_embeddings, as `vlmc inspect` shows)\n"
          "  --backend NAME         cpu (the generated kernels; the default when the artifact\n"
          "                         carries them), ref (the reference interpreter); `--backend\n"
          "                         help` lists every registered backend; vulkan (the\n"
          "                         SPIR-V kernels; the default for an artifact compiled for\n"
          "                         vulkan only)\n"
          "  --device N             the device a device backend runs on (default 0)\n"
          "  --list-devices         list the devices of every device backend and stop\n"
          "  --threads N            threads (default 1)\n"
          "  --weights MODE         resident: copy the weights into memory on first use (the\n"
          "                         cpu backend's default: faster passes); mapped: read them\n"
          "                         from the file mapping (ref's default)\n"
          "  --params DIR           checkpoint folder for artifacts compiled with --params "
          "external\n"
          "  --verify               check every parameter's checksum before running\n"
          "  --dump-taps DIR        write the (first) prompt's stage taps to DIR/taps.safetensors\n"
          "  --input-ids FILE       a JSON list of token ids instead of -p (no tokenizer needed);\n"
          "                         with -i, each stdin line is then a JSON list of the turn's\n"
          "                         new token ids\n"
          "  --ids                  print generated token ids instead of text (the default when\n"
          "                         the artifact has no tokenizer)\n"
          "  --ids-out FILE         write each turn's ids as a JSON line: {\"turn\", \"context\"\n"
          "                         (every token the model saw before answering), \"generated\"}\n"
          "  --stats                timings and peak memory on stderr\n"
          "  --json                 what --stats says, as one JSON object per answer on one\n"
          "                         line of stderr (implies --stats; docs/cli.md: the keys)\n"
          "  --quiet                no progress lines (an image encode or a weight upload that\n"
          "                         runs past a second shows its progress on stderr)\n"
          "  --load-only            open the artifact (and --verify it) and stop: checks that\n"
          "                         it loads here; with --stats, how long that took\n"
          "  --version              the version, git revision and backends built in\n"
          "  -h, --help             this text\n"
          "Options take values as --name VALUE, --name=VALUE, -n 5 or -n5; -- ends them.\n"
          "Exit status: 0 done, 1 a failure (named on stderr), 2 a usage error.\n");
}

static bool parse_double(const char *text, double *out) {
  char *end;
  double v = strtod(text, &end);
  if (*end || end == text) return false;
  *out = v;
  return true;
}

/* ---- progress on stderr ----
 *
 * Long work (an image encode, the weights' upload at open) reports its progress as it goes
 * (runtime/session.h); shown only once the work has run past kProgressAfter, so short work
 * prints nothing. On a terminal one line is rewritten in place (at most every 0.1 s); in a
 * pipe or a file, a plain line per tenth of the work. */
static const double kProgressAfter = 1.0; /* seconds */

typedef struct {
  bool tty;
  bool shown;       /* a line of the current work is on stderr */
  double start;     /* when the current work started (seconds) */
  double last_draw; /* the terminal line's last update */
  int tenths;       /* tenths shown (pipe) */
} progress_display_t;

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "80/201 steps" or "512/1024 MB". */
static void format_amount(char *out, size_t cap, uint64_t done, uint64_t total, const char *unit) {
  if (!strcmp(unit, "bytes"))
    snprintf(out, cap, "%.0f/%.0f MB", (double)done / (1 << 20), (double)total / (1 << 20));
  else
    snprintf(out, cap, "%llu/%llu %s", (unsigned long long)done, (unsigned long long)total, unit);
}

static void show_progress(void *ctx, const char *what, uint64_t done, uint64_t total,
                          const char *unit) {
  progress_display_t *d = ctx;
  double now = now_seconds();
  if (done == 0) { /* new work */
    *d = (progress_display_t){.tty = d->tty, .start = now};
    return;
  }
  double elapsed = now - d->start;
  bool finished = total && done >= total;
  if (!total || (!d->shown && elapsed < kProgressAfter)) return;
  int percent = (int)(100.0 * (double)done / (double)total);
  char amount[64];
  format_amount(amount, sizeof amount, done, total, unit);
  if (d->tty) {
    if (!finished && now - d->last_draw < 0.1) return;
    fprintf(stderr, "\r%s: %3d%% (%s, %.1f s)\033[K%s", what, percent, amount, elapsed,
            finished ? "\n" : "");
    d->last_draw = now;
  } else {
    int tenths = percent / 10;
    if (tenths <= d->tenths && !finished) return;
    d->tenths = tenths;
    fprintf(stderr, "%s: %d%% (%s, %.1f s)\n", what, percent, amount, elapsed);
  }
  d->shown = !finished;
  if (finished) d->start = now; /* a stray report after the end shows nothing */
}

/* Flags that take no value; true when `a` was one. */
static bool parse_switch(const char *a, run_options_t *o) {
  if (!strcmp(a, "--stats")) o->stats = true;
  else if (!strcmp(a, "--json")) o->stats = o->json = true;
  else if (!strcmp(a, "--verify")) o->session.verify_params = true;
  else if (!strcmp(a, "-i") || !strcmp(a, "--interactive")) o->interactive = true;
  else if (!strcmp(a, "--ids")) o->print_ids = true;
  else if (!strcmp(a, "--load-only")) o->load_only = true;
  else if (!strcmp(a, "--list-devices")) o->list_devices = true;
  else if (!strcmp(a, "--quiet")) o->quiet = true;
  else if (!strcmp(a, "--ignore-eos")) o->chat.ignore_eos = true;
  else return false;
  return true;
}

/* Sampling and length flags; returns 0 when `a` was one, 2 on a bad value, -1 otherwise. */
static int parse_sampling(const char *a, const char *v, run_options_t *o) {
  long long n;
  double d;
  vlmc_sampler_options_t *s = &o->chat.sampling;
  if (!strcmp(a, "-n")) {
    if (!vlmc_cli_parse_int(v, 1, 1 << 24, &n))
      return vlmc_cli_bad_value(a, v, "a positive integer");
    o->max_new_tokens = (int)n;
  } else if (!strcmp(a, "-t") || !strcmp(a, "--temperature")) {
    if (!parse_double(v, &d) || !(d >= 0 && d <= 1e6)) return vlmc_cli_bad_value(a, v, "a number >= 0");
    s->temperature = (float)d;
    o->given |= GIVEN_TEMPERATURE;
  } else if (!strcmp(a, "--top-k")) {
    if (!vlmc_cli_parse_int(v, 0, 1 << 30, &n)) return vlmc_cli_bad_value(a, v, "an integer >= 0");
    s->top_k = (int)n;
    o->given |= GIVEN_TOP_K;
  } else if (!strcmp(a, "--top-p")) {
    if (!parse_double(v, &d) || !(d > 0 && d <= 1)) return vlmc_cli_bad_value(a, v, "a number in (0, 1]");
    s->top_p = (float)d;
    o->given |= GIVEN_TOP_P;
  } else if (!strcmp(a, "--seed")) {
    if (!vlmc_cli_parse_int(v, 0, (long long)(~0ULL >> 1), &n))
      return vlmc_cli_bad_value(a, v, "an integer >= 0");
    s->seed = (uint64_t)n;
  } else if (!strcmp(a, "--repeat-penalty")) {
    if (!parse_double(v, &d) || !(d > 0 && d <= 1e6)) return vlmc_cli_bad_value(a, v, "a number > 0");
    s->repetition_penalty = (float)d;
    o->given |= GIVEN_PENALTY;
  } else if (!strcmp(a, "--min-p")) {
    if (!parse_double(v, &d) || !(d >= 0 && d <= 1)) return vlmc_cli_bad_value(a, v, "a number in [0, 1]");
    s->min_p = (float)d;
  } else if (!strcmp(a, "--stop")) {
    if (!*v) return vlmc_cli_bad_value(a, v, "a non-empty string");
    if (o->num_stops == VLMC_STOP_MAX_STRINGS) return vlmc_cli_bad_value(a, v, "at most 16 stop strings");
    if (strlen(v) > VLMC_STOP_MAX_BYTES) return vlmc_cli_bad_value(a, v, "at most 256 bytes");
    o->stops[o->num_stops++] = v;
  } else if (!strcmp(a, "--max-context")) {
    if (!vlmc_cli_parse_int(v, 1, (long long)1 << 40, &n))
      return vlmc_cli_bad_value(a, v, "a positive integer");
    o->chat.max_context = n;
  } else {
    return -1;
  }
  return 0;
}

/* `--backend help`: the registry, in order of preference. */
static void print_backends(void) {
  printf("backends (in order of preference when --backend is not given):\n");
  for (size_t i = 0; i < vlmc_backend_count(); ++i) {
    const vlmc_backend_iface_t *b = vlmc_backend_at(i);
    printf("  %-6s %s%s\n", b->name, b->summary,
           b->caps & VLMC_BACKEND_EXPLICIT_ONLY ? " [only when asked for]" : "");
  }
}

/* Flags with a value; returns 0 when handled, 1 after a help request, 2 on a usage error. */
static int parse_valued(const char *a, const char *v, run_options_t *o) {
  long long n;
  int rc = parse_sampling(a, v, o);
  if (rc >= 0) return rc;
  if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) o->prompt = v;
  else if (!strcmp(a, "--file")) o->prompt_file = v;
  else if (!strcmp(a, "--system")) o->chat.system_prompt = v;
  else if (!strcmp(a, "--image")) {
    if (o->chat.num_images == MAX_IMAGES) return vlmc_cli_bad_value(a, v, "at most 64 images");
    o->images[o->chat.num_images++] = v;
  } else if (!strcmp(a, "--backend")) {
    if (!strcmp(v, "help")) {
      print_backends();
      return 1;
    }
    o->session.backend = v;
  } else if ((rc = vlmc_cli_session_option(a, v, &o->session)) >= 0) {
    return rc;
  } else if (!strcmp(a, "--min-pixels") || !strcmp(a, "--max-pixels")) {
    if (!vlmc_cli_parse_int(v, 1, (long long)1 << 40, &n))
      return vlmc_cli_bad_value(a, v, "a positive integer");
    if (!strcmp(a, "--min-pixels")) o->session.min_pixels = n;
    else o->session.max_pixels = n;
  } else if (!strcmp(a, "--dump-taps")) o->chat.dump_taps_dir = v;
  else if (!strcmp(a, "--input-ids")) o->input_ids_path = v;
  else if (!strcmp(a, "--ids-out")) o->ids_out_path = v;
  else if (!strcmp(a, "--batch")) o->batch_path = v;
  else {
    fprintf(stderr, "error: unknown option '%s'\n\n", a);
    print_usage(stderr);
    return 2;
  }
  return 0;
}

/* --batch takes its prompts and images from the file: the flags that give them, or that
 * write per-conversation files, do not combine with it. */
static int check_batch_args(const run_options_t *o) {
  const char *other = o->prompt ? "-p" : o->input_ids_path ? "--input-ids"
                    : o->interactive ? "-i" : o->chat.num_images ? "--image"
                    : o->chat.dump_taps_dir ? "--dump-taps" : o->ids_out_path ? "--ids-out"
                    : o->load_only ? "--load-only" : o->print_ids ? "--ids" : NULL;
  if (!other) return 0;
  fprintf(stderr, "error: --batch takes each request's prompt and images from its file; drop "
          "%s\n", other);
  return 2;
}

/* Every option vlmc-run takes (tools/cli.h: --name=value, -n5, ...). */
static const vlmc_cli_option_t kOptions[] = {
    {"--help", "-h", false},         {"--version", NULL, false},
    {"--stats", NULL, false},        {"--verify", NULL, false},
    {"--json", NULL, false},
    {"--interactive", "-i", false},  {"--ids", NULL, false},
    {"--load-only", NULL, false},    {"--list-devices", NULL, false},
    {"--quiet", NULL, false},        {"-n", NULL, true},
    {"--temperature", "-t", true},   {"--top-k", NULL, true},
    {"--top-p", NULL, true},         {"--seed", NULL, true},
    {"--max-context", NULL, true},   {"--prompt", "-p", true},
    {"--file", "-f", true},          {"--system", NULL, true},
    {"--image", NULL, true},         {"--backend", NULL, true},
    {"--weights", NULL, true},       {"--threads", NULL, true},
    {"--device", NULL, true},        {"--params", NULL, true},
    {"--dump-taps", NULL, true},     {"--input-ids", NULL, true},
    {"--ids-out", NULL, true},       {"--batch", NULL, true},
    {"--min-pixels", NULL, true},    {"--max-pixels", NULL, true},
    {"--repeat-penalty", NULL, true}, {"--min-p", NULL, true},
    {"--ignore-eos", NULL, false},   {"--stop", NULL, true},
};

static void print_version(void) {
  char names[256];
  vlmc_backend_names(names, sizeof names);
  char line[300];
  snprintf(line, sizeof line, "backends: %s", names);
  vlmc_cli_print_version(stdout, "vlmc-run", line);
}

/* -f: the prompt text (freed at exit); one trailing newline dropped, as llama.cpp's -f. */
static char *prompt_text;
static void free_prompt_text(void) { free(prompt_text); }

static int read_prompt_file(run_options_t *o) {
  size_t len = 0;
  vlmc_status_t st = vlmc_file_read_all(o->prompt_file, &prompt_text, &len); /* "-": stdin */
  if (st) {
    fprintf(stderr, "error: -f %s: %s\n", o->prompt_file, vlmc_status_message(st));
    vlmc_status_free(st);
    return 2;
  }
  atexit(free_prompt_text);
  if (strlen(prompt_text) != len) {
    fprintf(stderr, "error: -f %s: the prompt has a NUL byte\n", o->prompt_file);
    return 2;
  }
  if (len && prompt_text[len - 1] == '\n') prompt_text[--len] = '\0';
  if (len && prompt_text[len - 1] == '\r') prompt_text[--len] = '\0';
  o->prompt = prompt_text;
  return 0;
}

/* Returns 0 to continue, 1 after --help or --version, 2 on a usage error. */
static int parse_args(int argc, char **argv, run_options_t *o) {
  o->chat.sampling.top_p = 1.0f;
  vlmc_cli_t cli = {.tool = "vlmc-run", .options = kOptions,
                    .num_options = sizeof kOptions / sizeof kOptions[0], .index = 1};
  const char *a, *v;
  for (vlmc_cli_kind_t kind; (kind = vlmc_cli_next(&cli, argc, argv, &a, &v)) != VLMC_CLI_END;) {
    if (kind == VLMC_CLI_USAGE) return 2;
    if (kind == VLMC_CLI_POSITIONAL) {
      if (o->session.artifact_path) return vlmc_cli_bad_value("MODEL", v, "one artifact");
      o->session.artifact_path = v;
      continue;
    }
    if (!strcmp(a, "--help")) {
      print_usage(stdout);
      return 1;
    }
    if (!strcmp(a, "--version")) {
      print_version();
      return 1;
    }
    if (parse_switch(a, o)) continue;
    int rc = parse_valued(a, v, o);
    if (rc) return rc; /* 1: a help request answered */
  }
  if (o->list_devices) return 0;
  if (!o->session.artifact_path) {
    print_usage(stderr);
    return 2;
  }
  if (o->prompt && o->prompt_file) {
    fprintf(stderr, "error: give either -p or -f, not both\n");
    return 2;
  }
  if (o->num_stops && o->print_ids) {
    fprintf(stderr, "error: --stop matches the answer's text, which --ids does not print\n");
    return 2;
  }
  if (o->prompt_file && !strcmp(o->prompt_file, "-") && (o->interactive || (o->batch_path &&
      !strcmp(o->batch_path, "-")))) {
    fprintf(stderr, "error: -f - reads the prompt from stdin, which -i and --batch - read too\n");
    return 2;
  }
  if (o->prompt_file) {
    int rc = read_prompt_file(o);
    if (rc) return rc;
  }
  if (o->batch_path) return check_batch_args(o);
  if (!o->interactive && !o->load_only && !o->prompt && !o->input_ids_path) {
    fprintf(stderr, "error: give a prompt with -p or -f (or token ids with --input-ids), or "
            "chat with -i\n");
    return 2;
  }
  if (o->prompt && o->input_ids_path) {
    fprintf(stderr, "error: give either -p or --input-ids, not both\n");
    return 2;
  }
  o->chat.image_paths = o->images;
  return 0;
}

static vlmc_status_t read_input_ids(const char *path, int64_t **out, size_t *out_n) {
  char *text = NULL;
  size_t len = 0;
  VLMC_RETURN_IF_ERROR(vlmc_file_read_all(path, &text, &len));
  vlmc_status_t status = vlmc_parse_token_ids(path, text, len, out, out_n);
  free(text);
  return status;
}

static volatile sig_atomic_t interrupted; /* Ctrl-C in a chat (run_stdin_turns) */

/* Streams the answer; false (stop) once Ctrl-C was pressed in a chat. */
static bool write_text(void *ctx, const char *text, size_t len) {
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return !interrupted;
}

/* Bytes moved between host and backend memory, per call of each function run so far. */
static void print_transfers(const vlmc_session_stats_t *st) {
  fprintf(stderr, "stats: host<->device per call:");
  for (size_t i = 0; i < st->num_transfers; ++i) {
    const vlmc_program_transfers_t *t = &st->transfers[i];
    if (!t->calls) continue;
    fprintf(stderr, " @%s %llu B to device, %llu B to host (%llu calls) |", t->func,
            (unsigned long long)(t->bytes_to_device / t->calls),
            (unsigned long long)(t->bytes_to_host / t->calls), (unsigned long long)t->calls);
  }
  fprintf(stderr, "%s\n", st->host_memory ? " the backend's memory is the host's: nothing copied"
                                            : "");
}

/* --json: what print_stats says, as one JSON object on one line of stderr (docs/cli.md), so
 * that a script reads each answer's numbers without parsing prose. Times are ms, sizes bytes. */
static void print_stats_json(const vlmc_session_t *s, int turn, const vlmc_generate_result_t *r) {
  int64_t decoded = r->generated_tokens > 1 ? r->generated_tokens - 1 : 0;
  vlmc_session_stats_t st;
  vlmc_session_stats(s, &st);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "backend", vlmc_session_backend(s));
  cJSON_AddNumberToObject(o, "turn", turn + 1);
  cJSON_AddNumberToObject(o, "context_tokens", (double)r->context_tokens);
  cJSON_AddNumberToObject(o, "load_ms", vlmc_session_open_ms(s));
  cJSON_AddNumberToObject(o, "encode_ms", r->encode_ms);
  cJSON_AddNumberToObject(o, "prompt_tokens", (double)r->prompt_tokens);
  cJSON_AddNumberToObject(o, "prefill_ms", r->prefill_ms);
  cJSON_AddNumberToObject(o, "prefill_tokens_per_s",
                          r->prefill_ms > 0 ? 1e3 * (double)r->prompt_tokens / r->prefill_ms : 0);
  cJSON_AddNumberToObject(o, "generated_tokens", (double)r->generated_tokens);
  cJSON_AddNumberToObject(o, "decode_tokens", (double)decoded);
  cJSON_AddNumberToObject(o, "decode_ms", r->decode_ms);
  cJSON_AddNumberToObject(o, "decode_tokens_per_s",
                          r->decode_ms > 0 ? 1e3 * (double)decoded / r->decode_ms : 0);
  cJSON_AddStringToObject(o, "stopped_by", r->stopped_on_eos      ? "eos"
                                           : r->stopped_on_string ? "stop string"
                                                                  : "token limit");
  cJSON_AddNumberToObject(o, "peak_memory_bytes", (double)r->peak_rss_kb * 1024.0);
  cJSON_AddNumberToObject(o, "weight_bytes", (double)st.weight_bytes);
  cJSON_AddNumberToObject(o, "packed_weight_bytes", (double)st.packed_weight_bytes);
  cJSON_AddNumberToObject(o, "kernel_calls", (double)st.backend.kernel_calls);
  cJSON_AddNumberToObject(o, "kernel_ms", st.backend.kernel_seconds * 1e3);
  cJSON_AddNumberToObject(o, "activation_bytes", (double)st.memory.slot_bytes);
  cJSON_AddNumberToObject(o, "activation_slots", st.memory.slots);
  cJSON_AddNumberToObject(o, "largest_live_set_bytes", (double)st.memory.largest_live_set);
  cJSON_AddNumberToObject(o, "submits", (double)st.backend.submits);
  cJSON_AddNumberToObject(o, "gpu_ms", st.backend.device_seconds * 1e3);
  cJSON_AddNumberToObject(o, "record_ms", st.backend.record_seconds * 1e3);
  cJSON_AddNumberToObject(o, "params_uploaded_bytes", (double)st.memory.params_uploaded);
  cJSON_AddBoolToObject(o, "host_memory", st.host_memory);
  cJSON *transfers = cJSON_AddArrayToObject(o, "transfers");
  for (size_t i = 0; i < st.num_transfers; ++i) {
    const vlmc_program_transfers_t *t = &st.transfers[i];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "function", t->func);
    cJSON_AddNumberToObject(e, "calls", (double)t->calls);
    cJSON_AddNumberToObject(e, "bytes_to_device", (double)t->bytes_to_device);
    cJSON_AddNumberToObject(e, "bytes_to_host", (double)t->bytes_to_host);
    cJSON_AddItemToArray(transfers, e);
  }
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (text) fprintf(stderr, "%s\n", text);
  cJSON_free(text);
}

static void print_load_stats_json(const vlmc_session_t *s, long peak_kb) {
  fprintf(stderr, "{\"backend\":\"%s\",\"load_ms\":%.3f,\"peak_memory_bytes\":%.0f}\n",
          vlmc_session_backend(s), vlmc_session_open_ms(s), (double)peak_kb * 1024.0);
}

static void print_stats(const vlmc_session_t *s, int turn, const vlmc_generate_result_t *r,
                        bool json) {
  if (json) {
    print_stats_json(s, turn, r);
    return;
  }
  double prefill_tps = r->prefill_ms > 0 ? 1e3 * (double)r->prompt_tokens / r->prefill_ms : 0;
  int64_t decoded = r->generated_tokens > 1 ? r->generated_tokens - 1 : 0;
  double decode_tps = r->decode_ms > 0 ? 1e3 * (double)decoded / r->decode_ms : 0;
  fprintf(stderr, "stats: backend %s | ", vlmc_session_backend(s));
  if (turn > 0) fprintf(stderr, "turn %d: context %lld tokens | ", turn + 1,
                        (long long)r->context_tokens);
  fprintf(stderr,
          "load %.1f ms | image encode %.1f ms | prefill %lld tokens in %.1f ms "
          "(%.1f tokens/s) | decode %lld tokens in %.1f ms (%.1f tokens/s) | peak memory %.1f MB\n",
          vlmc_session_open_ms(s), r->encode_ms, (long long)r->prompt_tokens, r->prefill_ms,
          prefill_tps, (long long)decoded, r->decode_ms, decode_tps, r->peak_rss_kb / 1024.0);
  vlmc_session_stats_t st;
  vlmc_session_stats(s, &st);
  if (st.backend.num_kernels)
    fprintf(stderr, "stats: %s: %llu kernel calls, %.1f ms in kernels | activations %.2f MB in "
            "%u slots (largest live set %.2f MB)\n", vlmc_session_backend(s),
            (unsigned long long)st.backend.kernel_calls, st.backend.kernel_seconds * 1e3,
            (double)st.memory.slot_bytes / 1e6, st.memory.slots,
            (double)st.memory.largest_live_set / 1e6);
  fprintf(stderr, "stats: weights %.2f MB as stored", (double)st.weight_bytes / 1e6);
  if (st.packed_weight_bytes)
    fprintf(stderr, " (%.2f MB of packed quantized words; vlmc inspect gives bits per weight)",
            (double)st.packed_weight_bytes / 1e6);
  fputc('\n', stderr);
  if (st.backend.submits)
    fprintf(stderr, "stats: %s: %llu submits, %.1f ms GPU time (timestamp queries), %.1f ms "
            "of host time recording dispatches | weights uploaded at open %.2f MB\n",
            vlmc_session_backend(s), (unsigned long long)st.backend.submits,
            st.backend.device_seconds * 1e3, st.backend.record_seconds * 1e3,
            (double)st.memory.params_uploaded / 1e6);
  print_transfers(&st);
  if (!r->stopped_on_eos)
    fprintf(stderr, "stats: stopped at the token limit (-n), not at an end-of-sequence token\n");
}

static void print_load_stats(const vlmc_session_t *s, bool json) {
  struct rusage usage;
  long peak_kb = getrusage(RUSAGE_SELF, &usage) == 0 ? usage.ru_maxrss : 0;
  if (json) {
    print_load_stats_json(s, peak_kb);
    return;
  }
  fprintf(stderr, "stats: backend %s | load %.1f ms | peak memory %.1f MB\n",
          vlmc_session_backend(s), vlmc_session_open_ms(s),
          peak_kb / 1024.0);
}

static void write_id_list(FILE *out, const int64_t *ids, size_t n, const char *sep) {
  for (size_t i = 0; i < n; ++i) fprintf(out, "%s%lld", i ? sep : "", (long long)ids[i]);
}

/* A chat's conversation as text, for a turn that brings a new image: it is run again from
 * the start, as one conversation of messages (a cached turn feeds new tokens through decode,
 * which takes no image embeddings). */
typedef struct {
  char *text;    /* owned: what the user said, or the answer as printed */
  bool user;
  size_t images; /* a user message's: the images shown before its text */
} said_t;

typedef struct {
  run_options_t *o;
  vlmc_session_t *session;
  vlmc_chat_t *chat;
  FILE *ids_out;
  int turn;
  char *kept[MAX_IMAGES]; /* /image paths (the chat's options point at them) */
  size_t num_kept;
  said_t *said; /* the conversation so far (text prompts only) */
  size_t num_said, cap_said;
  size_t shown;          /* images the conversation has shown so far */
  vlmc_strbuf_t answer;  /* the answer being printed */
} runner_t;

static void forget_conversation(runner_t *r) {
  for (size_t i = 0; i < r->num_said; ++i) free(r->said[i].text);
  r->num_said = 0;
  r->shown = 0;
}

static vlmc_status_t remember(runner_t *r, const char *text, bool user, size_t images) {
  if (r->num_said == r->cap_said) {
    size_t cap = r->cap_said ? 2 * r->cap_said : 16;
    said_t *grown = realloc(r->said, cap * sizeof *grown);
    if (!grown) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    r->said = grown;
    r->cap_said = cap;
  }
  char *copy = strdup(text);
  if (!copy) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  r->said[r->num_said++] = (said_t){copy, user, images};
  return NULL;
}

/* The conversation so far plus `prompt` (after the images not shown yet) as messages: a
 * system message first when --system gave one. *out_parts holds every message's parts. */
static vlmc_status_t conversation_messages(const runner_t *r, const char *prompt,
                                           vlmc_chat_message_t **out, size_t *count,
                                           vlmc_chat_part_t **out_parts) {
  size_t n = r->num_said + 2, parts = r->o->chat.num_images + r->num_said + 1;
  vlmc_chat_message_t *m = calloc(n, sizeof *m);
  vlmc_chat_part_t *p = calloc(parts, sizeof *p);
  if (!m || !p) {
    free(m);
    free(p);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  size_t k = 0, used = 0;
  if (r->o->chat.system_prompt)
    m[k++] = (vlmc_chat_message_t){.role = "system", .text = r->o->chat.system_prompt,
                                   .text_len = strlen(r->o->chat.system_prompt)};
  for (size_t i = 0; i <= r->num_said; ++i) {
    bool last = i == r->num_said;
    const char *text = last ? prompt : r->said[i].text;
    if (!last && !r->said[i].user) {
      m[k++] = (vlmc_chat_message_t){.role = "assistant", .text = text, .text_len = strlen(text)};
      continue;
    }
    size_t images = last ? r->o->chat.num_images - r->shown : r->said[i].images;
    m[k] = (vlmc_chat_message_t){.role = "user", .parts = p + used, .part_count = images + 1};
    for (size_t j = 0; j < images; ++j) p[used++].kind = VLMC_CHAT_PART_IMAGE;
    p[used++] = (vlmc_chat_part_t){.kind = VLMC_CHAT_PART_TEXT, .text = text,
                                   .text_len = strlen(text)};
    ++k;
  }
  *out = m;
  *count = k;
  *out_parts = p;
  return NULL;
}

static vlmc_status_t write_ids_out(runner_t *r, const vlmc_generate_result_t *res) {
  if (!r->ids_out) return NULL;
  size_t count = 0;
  const int64_t *tokens = vlmc_chat_tokens(r->chat, &count);
  fprintf(r->ids_out, "{\"turn\": %d, \"context\": [", r->turn + 1);
  write_id_list(r->ids_out, tokens, (size_t)res->context_tokens, ", ");
  fprintf(r->ids_out, "], \"generated\": [");
  write_id_list(r->ids_out, res->tokens, (size_t)res->generated_tokens, ", ");
  fprintf(r->ids_out, "]}\n");
  if (fflush(r->ids_out) != 0)
    return vlmc_status_make(VLMC_IO_ERROR, "%s: write failed: %s", r->o->ids_out_path,
                            strerror(errno));
  return NULL;
}

static vlmc_status_t restart_chat(runner_t *r);

/* The answer as printed, kept for the conversation's transcript. */
static bool write_answer(void *ctx, const char *text, size_t len) {
  vlmc_strbuf_append(&((runner_t *)ctx)->answer, text, len);
  return write_text(NULL, text, len);
}

/* A text turn into the transcript: the user's message after its new images, the answer. */
static vlmc_status_t remember_turn(runner_t *r, const char *prompt) {
  VLMC_RETURN_IF_ERROR(remember(r, prompt, true, r->o->chat.num_images - r->shown));
  r->shown = r->o->chat.num_images;
  return remember(r, vlmc_strbuf_cstr(&r->answer), false, 0);
}

/* One turn: the answer streamed to stdout (text, or ids with --ids), then a newline. A text
 * turn after the first that brings new images (/image) runs the whole conversation again as
 * messages, the images where they were shown (its answer is a fresh run's of the same
 * conversation, earlier answers re-tokenized from their text). */
static vlmc_status_t run_turn(runner_t *r, const char *prompt, const int64_t *ids, size_t n) {
  vlmc_chat_turn_options_t t = {.prompt = prompt, .input_ids = ids, .num_input_ids = n,
                                .max_new_tokens = r->o->max_new_tokens,
                                .on_text = r->o->print_ids ? NULL : write_answer, .text_ctx = r,
                                .stop_strings = r->o->stops, .num_stop_strings = r->o->num_stops};
  vlmc_chat_message_t *messages = NULL;
  vlmc_chat_part_t *parts = NULL;
  if (prompt && vlmc_chat_cache_length(r->chat) > 0 && r->o->chat.num_images > r->shown) {
    VLMC_RETURN_IF_ERROR(conversation_messages(r, prompt, &messages, &t.num_messages, &parts));
    t.messages = messages;
    t.prompt = NULL;
  }
  vlmc_strbuf_clear(&r->answer);
  vlmc_generate_result_t res;
  vlmc_status_t st = messages ? restart_chat(r) : NULL;
  if (!st) st = vlmc_chat_turn(r->chat, &t, &res);
  free(messages);
  free(parts);
  VLMC_RETURN_IF_ERROR(st);
  if (prompt && !st) st = remember_turn(r, prompt);
  if (st) {
    vlmc_generate_result_deinit(&res);
    return st;
  }
  if (r->o->print_ids) write_id_list(stdout, res.tokens, (size_t)res.generated_tokens, " ");
  printf("\n");
  fflush(stdout);
  vlmc_status_t status = write_ids_out(r, &res);
  if (r->o->stats)
    print_stats(r->session, r->o->interactive ? r->turn : 0, &res, r->o->json);
  ++r->turn;
  vlmc_generate_result_deinit(&res);
  return status;
}

/* ---- -i: chat from stdin ----
 *
 * One message per line; a line ending in a backslash continues on the next (the backslash
 * becomes a newline), as llama.cpp's multi-line input. Commands: /image PATH (an image shown
 * with the next message: before the first, in the first turn; after it, the next turn runs
 * the whole conversation again as messages, since a cached turn feeds new tokens through
 * decode, which takes no image embeddings: run_turn), /clear (a new conversation: the command line's system
 * prompt, no images), /exit. Ctrl-C stops the answer being written (the conversation keeps
 * what was said, as when -n cuts it) and returns to the prompt; at the prompt it ends the
 * chat. */

static void on_interrupt(int sig) {
  (void)sig;
  interrupted = 1;
}

/* SIGINT sets `interrupted` instead of ending the process; a blocked read returns (no
 * SA_RESTART), so that Ctrl-C at the prompt ends the chat. */
static void catch_interrupts(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
}

/* One message from stdin into `msg` (continued lines joined); false at the end of the input
 * or on Ctrl-C at the prompt. */
static bool read_message(bool tty, vlmc_strbuf_t *msg, char **line, size_t *capacity) {
  vlmc_strbuf_clear(msg);
  for (bool more = true; more;) {
    if (tty) fprintf(stderr, msg->len ? ". " : "> ");
    errno = 0;
    ssize_t len = getline(line, capacity, stdin);
    if (len < 0) {
      if (interrupted && tty) fprintf(stderr, "\n");
      return msg->len > 0 && !interrupted;
    }
    while (len > 0 && ((*line)[len - 1] == '\n' || (*line)[len - 1] == '\r')) (*line)[--len] = '\0';
    more = len > 0 && (*line)[len - 1] == '\\';
    if (more) (*line)[--len] = '\0';
    vlmc_strbuf_append(msg, *line, (size_t)len);
    if (more) vlmc_strbuf_putc(msg, '\n');
  }
  return true;
}

/* A fresh conversation with the command line's options and the images given so far. */
static vlmc_status_t restart_chat(runner_t *r) {
  vlmc_chat_destroy(r->chat);
  r->chat = NULL;
  return vlmc_chat_create(r->session, &r->o->chat, &r->chat);
}

/* A line starting with '/': a command. Returns true when the chat should end. */
static bool run_command(runner_t *r, const char *line, vlmc_status_t *status) {
  run_options_t *o = r->o;
  if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) return true;
  if (!strcmp(line, "/clear")) {
    o->chat.num_images = 0;
    forget_conversation(r);
    *status = restart_chat(r);
    if (!*status) fprintf(stderr, "(a new conversation)\n");
    return false;
  }
  if (!strncmp(line, "/image ", 7) && line[7]) {
    const char *path = line + 7;
    if (o->chat.num_images == MAX_IMAGES)
      fprintf(stderr, "error: /image: at most %d images\n", MAX_IMAGES);
    else if (access(path, R_OK) != 0)
      fprintf(stderr, "error: /image %s: %s\n", path, strerror(errno));
    else {
      /* the path outlives the chat: kept until exit */
      char *kept = strdup(path);
      if (!kept) {
        *status = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
        return true;
      }
      o->images[o->chat.num_images++] = kept;
      r->kept[r->num_kept++] = kept;
      /* before the first message, the chat shows it then; after, the next turn runs the
         conversation again (run_turn) */
      if (vlmc_chat_cache_length(r->chat) == 0) *status = restart_chat(r);
      if (!*status)
        fprintf(stderr, "(image %zu: %s, shown with the next message)\n", o->chat.num_images, path);
    }
    return false;
  }
  fprintf(stderr, "error: unknown command '%s' (/image PATH, /clear, /exit)\n", line);
  return false;
}

/* Chat turns from stdin (empty messages are skipped). */
static vlmc_status_t run_stdin_turns(runner_t *r) {
  bool tty = isatty(STDIN_FILENO);
  catch_interrupts();
  char *line = NULL;
  size_t capacity = 0;
  vlmc_strbuf_t msg;
  vlmc_strbuf_init(&msg);
  vlmc_status_t status = NULL;
  for (int number = 1; !status && read_message(tty, &msg, &line, &capacity); ++number) {
    interrupted = 0;
    const char *text = vlmc_strbuf_cstr(&msg);
    if (!msg.len) continue;
    if (text[0] == '/' && !r->o->input_ids_path) {
      if (run_command(r, text, &status)) break;
      continue;
    }
    if (!r->o->input_ids_path) {
      status = run_turn(r, text, NULL, 0);
      continue;
    }
    char name[64];
    snprintf(name, sizeof name, "stdin:%d", number);
    int64_t *ids = NULL;
    size_t n = 0;
    status = vlmc_parse_token_ids(name, text, msg.len, &ids, &n);
    if (!status) status = run_turn(r, NULL, ids, n);
    free(ids);
  }
  vlmc_strbuf_deinit(&msg);
  free(line);
  return status;
}

/* ---- --batch: one request per line, one JSON answer per line ---- */

enum { kBatchLineMax = 1 << 20 }; /* bytes: a request is a prompt and a few paths */

/* Reads one line of at most kBatchLineMax bytes into `line` (its end stripped); a longer line
 * is skipped to its end and *too_long set. False at the end of the input. */
static bool read_batch_line(FILE *in, vlmc_strbuf_t *line, bool *too_long) {
  vlmc_strbuf_clear(line);
  *too_long = false;
  int c;
  bool any = false;
  while ((c = getc(in)) != EOF && c != '\n') {
    any = true;
    if (line->len < kBatchLineMax) vlmc_strbuf_putc(line, (char)c);
    else *too_long = true;
  }
  while (line->len > 0 && line->data[line->len - 1] == '\r') line->data[--line->len] = '\0';
  return any || c == '\n';
}

static bool collect_text(void *ctx, const char *text, size_t len) {
  vlmc_strbuf_append(ctx, text, len);
  return true;
}

static void put_answer_line(vlmc_strbuf_t *out) {
  vlmc_strbuf_putc(out, '\n');
  fwrite(vlmc_strbuf_cstr(out), 1, out->len, stdout);
  fflush(stdout);
  vlmc_strbuf_clear(out);
}

static void put_id(vlmc_strbuf_t *out, const char *id) {
  vlmc_strbuf_printf(out, "{\"id\": %s, ", *id ? id : "null");
}

static void put_batch_error(vlmc_strbuf_t *out, const char *id, size_t line, const char *message) {
  put_id(out, id);
  vlmc_strbuf_printf(out, "\"line\": %zu, \"error\": ", line);
  vlmc_json_write_string(out, message);
  vlmc_strbuf_putc(out, '}');
  put_answer_line(out);
}

static void put_batch_answer(vlmc_strbuf_t *out, const char *id, const char *text,
                             const vlmc_generate_result_t *res) {
  put_id(out, id);
  vlmc_strbuf_puts(out, "\"text\": ");
  vlmc_json_write_string(out, text);
  vlmc_strbuf_puts(out, ", \"tokens\": [");
  for (int64_t i = 0; i < res->generated_tokens; ++i)
    vlmc_strbuf_printf(out, "%s%lld", i ? ", " : "", (long long)res->tokens[i]);
  vlmc_strbuf_printf(out, "], \"prompt_tokens\": %lld, \"generated_tokens\": %lld, \"stop\": "
                     "\"%s\", \"encode_ms\": %.1f, \"prefill_ms\": %.1f, \"decode_ms\": %.1f}",
                     (long long)res->prompt_tokens, (long long)res->generated_tokens,
                     res->stopped_on_eos ? "eos" : "length", res->encode_ms, res->prefill_ms,
                     res->decode_ms);
  put_answer_line(out);
}

/* One request on a fresh conversation; its answer or its error is one line of stdout. */
static bool run_batch_request(runner_t *r, const char *name, size_t number, const char *text,
                              size_t len, vlmc_strbuf_t *out) {
  const run_options_t *o = r->o;
  vlmc_batch_request_t q;
  vlmc_status_t status = vlmc_batch_request_parse(name, text, len, &q);
  vlmc_strbuf_t answer;
  vlmc_strbuf_init(&answer);
  vlmc_generate_result_t res = {0};
  if (!status && q.prompt && !vlmc_session_has_tokenizer(r->session))
    status = vlmc_status_make(VLMC_UNSUPPORTED, "%s: %s has no tokenizer, so a request's prompt "
                              "cannot be text: give input_ids", name, o->session.artifact_path);
  if (!status) {
    vlmc_generate_options_t g = {
        .system_prompt = q.system ? q.system : o->chat.system_prompt, .prompt = q.prompt,
        .input_ids = q.input_ids, .num_input_ids = q.num_input_ids,
        .image_paths = q.images, .num_images = q.num_images,
        .max_new_tokens = q.max_new_tokens ? q.max_new_tokens : o->max_new_tokens,
        .max_context = o->chat.max_context, .sampling = o->chat.sampling,
        .on_text = vlmc_session_has_tokenizer(r->session) ? collect_text : NULL,
        .text_ctx = &answer, .stop_strings = o->stops, .num_stop_strings = o->num_stops};
    status = vlmc_session_generate(r->session, &g, &res);
  }
  if (status) {
    put_batch_error(out, q.id, number, vlmc_status_message(status));
  } else {
    put_batch_answer(out, q.id, vlmc_strbuf_cstr(&answer), &res);
    if (o->stats) print_stats(r->session, 0, &res, o->json);
  }
  bool ok = status == NULL;
  vlmc_status_free(status);
  vlmc_generate_result_deinit(&res);
  vlmc_strbuf_deinit(&answer);
  vlmc_batch_request_deinit(&q);
  return ok;
}

static vlmc_status_t open_batch_input(const char *path, FILE **out) {
  if (!strcmp(path, "-")) {
    *out = stdin;
    return NULL;
  }
  int fd = -1;
  uint64_t size = 0;
  VLMC_RETURN_IF_ERROR(vlmc_file_open_regular(path, &fd, &size));
  if (!(*out = fdopen(fd, "r"))) {
    close(fd);
    return vlmc_status_make(VLMC_IO_ERROR, "%s: cannot read: %s", path, strerror(errno));
  }
  return NULL;
}

/* Every request of the batch file, in order; a failed request is reported on its line and the
 * next one runs. Fails at the end when any did. */
static vlmc_status_t run_batch(runner_t *r) {
  const char *path = r->o->batch_path;
  FILE *in = NULL;
  VLMC_RETURN_IF_ERROR(open_batch_input(path, &in));
  vlmc_strbuf_t line, out;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_init(&out);
  size_t number = 0, requests = 0, failed = 0;
  bool too_long = false;
  while (read_batch_line(in, &line, &too_long)) {
    ++number;
    if (line.len == 0 && !too_long) continue;
    ++requests;
    char name[64];
    snprintf(name, sizeof name, "%.40s:%zu", !strcmp(path, "-") ? "stdin" : path, number);
    if (too_long || line.failed) {
      char message[128];
      snprintf(message, sizeof message, "%s: a request line is longer than %d bytes", name,
               kBatchLineMax);
      put_batch_error(&out, "", number, message);
      ++failed;
      continue;
    }
    if (!run_batch_request(r, name, number, line.data, line.len, &out)) ++failed;
  }
  bool read_error = ferror(in);
  if (in != stdin) fclose(in);
  vlmc_strbuf_deinit(&line);
  vlmc_strbuf_deinit(&out);
  if (read_error) return vlmc_status_make(VLMC_IO_ERROR, "%s: read failed", path);
  if (failed)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "--batch: %zu of %zu requests failed (their "
                            "answer lines say why)", failed, requests);
  return NULL;
}

/* The artifact's generation defaults (its checkpoint's generation_config.json), each
 * sampling flag given on the command line over its field, as generate(**kwargs) over a
 * GenerationConfig; -t > 0 samples (do_sample), -t 0 is greedy. */
static void apply_generation_defaults(run_options_t *o, const vlmc_session_t *session) {
  vlmc_sampler_options_t d = vlmc_session_default_sampling(session), *s = &o->chat.sampling;
  if (!(o->given & GIVEN_TEMPERATURE)) s->temperature = d.temperature;
  if (!(o->given & GIVEN_TOP_K)) s->top_k = d.top_k;
  if (!(o->given & GIVEN_TOP_P)) s->top_p = d.top_p;
  if (!(o->given & GIVEN_PENALTY)) s->repetition_penalty = d.repetition_penalty;
}

static vlmc_status_t run(runner_t *r) {
  run_options_t *o = r->o;
  VLMC_RETURN_IF_ERROR(vlmc_session_open(&o->session, &r->session));
  apply_generation_defaults(o, r->session);
  if (o->load_only) {
    if (o->stats) print_load_stats(r->session, o->json);
    return NULL;
  }
  if (o->batch_path) return run_batch(r);
  if (!vlmc_session_has_tokenizer(r->session)) o->print_ids = true;
  VLMC_RETURN_IF_ERROR(vlmc_chat_create(r->session, &o->chat, &r->chat));
  if (o->ids_out_path && !(r->ids_out = fopen(o->ids_out_path, "w")))
    return vlmc_status_make(VLMC_IO_ERROR, "%s: cannot create: %s", o->ids_out_path,
                            strerror(errno));
  if (o->input_ids_path) {
    int64_t *ids = NULL;
    size_t n = 0;
    VLMC_RETURN_IF_ERROR(read_input_ids(o->input_ids_path, &ids, &n));
    vlmc_status_t status = run_turn(r, NULL, ids, n);
    free(ids);
    VLMC_RETURN_IF_ERROR(status);
  } else if (o->prompt) {
    VLMC_RETURN_IF_ERROR(run_turn(r, o->prompt, NULL, 0));
  }
  return o->interactive ? run_stdin_turns(r) : NULL;
}

/* `--list-devices`: each device backend's devices; 0 when at least one backend listed some. */
static int list_devices(void) {
  int listed = 0, tried = 0;
  for (size_t i = 0; i < vlmc_backend_count(); ++i) {
    const vlmc_backend_iface_t *b = vlmc_backend_at(i);
    if (!b->list_devices) continue;
    tried++;
    vlmc_strbuf_t text;
    vlmc_strbuf_init(&text);
    vlmc_status_t st = b->list_devices(&text);
    if (st) {
      fprintf(stderr, "error: %s\n", vlmc_status_message(st));
      vlmc_status_free(st);
    } else {
      fputs(vlmc_strbuf_cstr(&text), stdout);
      listed++;
    }
    vlmc_strbuf_deinit(&text);
  }
  const char *why = vlmc_backend_not_built("vulkan");
  if (!tried) fprintf(stderr, "error: no device backend in this build%s%s\n", why ? ": " : "",
                      why ? why : "");
  return listed ? 0 : 1;
}

int main(int argc, char **argv) {
#ifdef VLMC_METAL_EMULATION
  /* vlmc-run-metal-emu: the same tool with the Metal emulation's backend (tests/metal), which
   * runs an artifact's metal kernels on Linux; an emulation, not Apple hardware */
  vlmc_backend_register(&vlmc_backend_metal_emulated);
#endif
  run_options_t o;
  memset(&o, 0, sizeof o);
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc == 1 ? 0 : 2;
  if (o.list_devices) return list_devices();
  progress_display_t progress = {.tty = isatty(STDERR_FILENO), .start = now_seconds()};
  if (!o.quiet) {
    o.session.progress = show_progress;
    o.session.progress_ctx = &progress;
  }
  runner_t r = {.o = &o};
  vlmc_strbuf_init(&r.answer);
  vlmc_status_t status = run(&r);
  if (r.ids_out && fclose(r.ids_out) != 0 && !status)
    status = vlmc_status_make(VLMC_IO_ERROR, "%s: write failed", o.ids_out_path);
  vlmc_chat_destroy(r.chat);
  vlmc_session_destroy(r.session);
  for (size_t i = 0; i < r.num_kept; ++i) free(r.kept[i]);
  forget_conversation(&r);
  free(r.said);
  vlmc_strbuf_deinit(&r.answer);
  return vlmc_status_report(status);
}
