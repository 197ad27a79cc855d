/* vlmc tokenize TOKENIZER.json[.gz] < strings.jsonl
 *
 * Reads one JSON string per line from stdin and prints one line of space-separated token ids
 * per string (no special tokens are added; special tokens written in the text are matched).
 * With --decode, reads lines of ids and prints each decoded text as a JSON string. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frontend/tokenizer.h"
#include "support/file.h"
#include "tools/commands.h"

typedef struct {
  const char *tokenizer_path;
  bool decode;
  bool skip_special_tokens;
  bool stats;
} tokenize_options_t;

typedef struct {
  size_t lines;
  size_t bytes;
  size_t tokens;
  double seconds;
} tokenize_stats_t;

static void print_usage(FILE *out) {
  fprintf(out,
          "usage: vlmc tokenize [--decode] [--skip-special-tokens] [--stats] TOKENIZER.json[.gz]\n"
          "\n"
          "  reads one JSON string per line from stdin, prints one line of space-separated ids\n"
          "  per string (special tokens in the text are matched; none are added)\n"
          "\n"
          "  --decode               read lines of space-separated ids, print each text as a\n"
          "                         JSON string\n"
          "  --skip-special-tokens  with --decode, drop special tokens (<|im_end|>, ...)\n"
          "  --stats                print load time and throughput to stderr\n");
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static vlmc_status_t encode_line(const vlmc_tokenizer_t *tokenizer, const char *line, size_t len,
                                 vlmc_strbuf_t *text, vlmc_token_ids_t *ids,
                                 tokenize_stats_t *stats, vlmc_strbuf_t *out) {
  vlmc_strbuf_clear(text);
  VLMC_RETURN_IF_ERROR(vlmc_tokenizer_json_string_decode(line, len, text));
  ids->len = 0;
  double start = now_seconds();
  VLMC_RETURN_IF_ERROR(vlmc_tokenizer_encode(tokenizer, text->data ? text->data : "", text->len,
                                             ids));
  stats->seconds += now_seconds() - start;
  stats->bytes += text->len;
  stats->tokens += ids->len;
  for (size_t i = 0; i < ids->len; ++i)
    vlmc_strbuf_printf(out, i ? " %d" : "%d", (int)ids->data[i]);
  vlmc_strbuf_putc(out, '\n');
  return NULL;
}

/* Parses "12 345 6" into ids; an empty line is the empty list. */
static vlmc_status_t parse_id_line(const char *line, size_t len, vlmc_token_ids_t *ids) {
  ids->len = 0;
  size_t i = 0;
  while (i < len) {
    if (line[i] == ' ' || line[i] == '\t' || line[i] == '\r') {
      ++i;
      continue;
    }
    long value = 0;
    size_t start = i;
    while (i < len && line[i] >= '0' && line[i] <= '9' && value <= INT32_MAX)
      value = value * 10 + (line[i++] - '0');
    if (i == start || value > INT32_MAX || (i < len && line[i] != ' ' && line[i] != '\t' &&
                                            line[i] != '\r'))
      return vlmc_status_make(VLMC_PARSE_ERROR,
                              "column %zu: expected token ids (0..2147483647) separated by spaces",
                              start + 1);
    VLMC_RETURN_IF_ERROR(vlmc_token_ids_append(ids, (int32_t)value));
  }
  return NULL;
}

static vlmc_status_t decode_line(const vlmc_tokenizer_t *tokenizer, const char *line, size_t len,
                                 bool skip_special, vlmc_strbuf_t *text, vlmc_token_ids_t *ids,
                                 tokenize_stats_t *stats, vlmc_strbuf_t *out) {
  VLMC_RETURN_IF_ERROR(parse_id_line(line, len, ids));
  vlmc_strbuf_clear(text);
  double start = now_seconds();
  VLMC_RETURN_IF_ERROR(vlmc_tokenizer_decode(tokenizer, ids->data, ids->len, skip_special, text));
  stats->seconds += now_seconds() - start;
  stats->tokens += ids->len;
  stats->bytes += text->len;
  vlmc_tokenizer_json_string_encode(text->data ? text->data : "", text->len, out);
  vlmc_strbuf_putc(out, '\n');
  return NULL;
}

static vlmc_status_t run_lines(const vlmc_tokenizer_t *tokenizer, const tokenize_options_t *opts,
                               const char *input, size_t input_len, tokenize_stats_t *stats) {
  vlmc_strbuf_t text, out;
  vlmc_strbuf_init(&text);
  vlmc_strbuf_init(&out);
  vlmc_token_ids_t ids;
  vlmc_token_ids_init(&ids);
  vlmc_status_t status = NULL;
  size_t pos = 0;
  while (pos < input_len && !status) {
    const char *newline = memchr(input + pos, '\n', input_len - pos);
    size_t len = newline ? (size_t)(newline - (input + pos)) : input_len - pos;
    ++stats->lines;
    vlmc_strbuf_clear(&out);
    if (opts->decode)
      status = decode_line(tokenizer, input + pos, len, opts->skip_special_tokens, &text, &ids,
                           stats, &out);
    else
      status = encode_line(tokenizer, input + pos, len, &text, &ids, stats, &out);
    status = vlmc_status_annotate(status, "<stdin>: line %zu: ", stats->lines);
    if (!status && fwrite(vlmc_strbuf_cstr(&out), 1, out.len, stdout) != out.len)
      status = vlmc_status_make(VLMC_IO_ERROR, "<stdout>: write failed: %s", strerror(errno));
    pos += len + 1;
  }
  vlmc_strbuf_deinit(&text);
  vlmc_strbuf_deinit(&out);
  vlmc_token_ids_deinit(&ids);
  return status;
}

static int parse_args(int argc, char **argv, tokenize_options_t *opts) {
  memset(opts, 0, sizeof *opts);
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      print_usage(stdout);
      return 0;
    } else if (strcmp(arg, "--decode") == 0) {
      opts->decode = true;
    } else if (strcmp(arg, "--skip-special-tokens") == 0) {
      opts->skip_special_tokens = true;
    } else if (strcmp(arg, "--stats") == 0) {
      opts->stats = true;
    } else if (arg[0] == '-' && arg[1] != '\0') {
      fprintf(stderr, "error: vlmc tokenize: unknown option '%s'\n", arg);
      return 2;
    } else if (opts->tokenizer_path) {
      fprintf(stderr, "error: vlmc tokenize: one tokenizer file expected, got '%s' and '%s'\n",
              opts->tokenizer_path, arg);
      return 2;
    } else {
      opts->tokenizer_path = arg;
    }
  }
  if (!opts->tokenizer_path) {
    print_usage(stderr);
    return 2;
  }
  return -1;
}

static void print_stats(const tokenize_options_t *opts, double load_seconds,
                        const tokenize_stats_t *stats) {
  double seconds = stats->seconds > 0 ? stats->seconds : 1e-9;
  fprintf(stderr,
          "tokenize: load %.1f ms; %zu lines, %zu bytes, %zu tokens; %s %.1f ms "
          "(%.0f tokens/s, %.2f MB/s)\n",
          load_seconds * 1e3, stats->lines, stats->bytes, stats->tokens,
          opts->decode ? "decode" : "encode", stats->seconds * 1e3,
          (double)stats->tokens / seconds, (double)stats->bytes / seconds / 1e6);
}

int vlmc_cmd_tokenize(int argc, char **argv) {
  tokenize_options_t opts;
  int rc = parse_args(argc, argv, &opts);
  if (rc >= 0) return rc;
  double start = now_seconds();
  vlmc_tokenizer_t *tokenizer = NULL;
  vlmc_status_t status = vlmc_tokenizer_create_from_file(opts.tokenizer_path, &tokenizer);
  double load_seconds = now_seconds() - start;
  char *input = NULL;
  size_t input_len = 0;
  if (!status) status = vlmc_file_read_all("-", &input, &input_len);
  tokenize_stats_t stats = {0, 0, 0, 0.0};
  if (!status) status = run_lines(tokenizer, &opts, input, input_len, &stats);
  if (!status && fflush(stdout) != 0)
    status = vlmc_status_make(VLMC_IO_ERROR, "<stdout>: write failed: %s", strerror(errno));
  if (!status && opts.stats) print_stats(&opts, load_seconds, &stats);
  free(input);
  vlmc_tokenizer_destroy(tokenizer);
  return vlmc_status_report(status);
}
