/* tokenizer.json loading on tiny hand-made tokenizers: the BPE rules (rank order, leftmost
 * first, added tokens) and every class of malformed or unsupported file, each refused with a
 * message naming the file and the JSON path. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "frontend/tokenizer.h"
#include "support/file.h"
#include "tests/unit/test.h"

/* The Qwen2 split regex, as it appears inside a JSON document. */
#define QWEN_REGEX_JSON                                                                     \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "         \
  "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"
#define QWEN_PRE_TOKENIZER                                                                  \
  "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"" \
  QWEN_REGEX_JSON "\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\"," \
  "\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]}"
#define ADDED_X                                                                             \
  "{\"id\":258,\"content\":\"<|x|>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false," \
  "\"normalized\":false,\"special\":true}"

/* Knobs for one tiny tokenizer.json; NULL fields take the valid default. */
typedef struct {
  const char *root_extra;  /* appended to the top-level object */
  const char *added;       /* added_tokens array body */
  const char *normalizer;
  const char *pre_tokenizer;
  const char *post_processor;
  const char *decoder;
  const char *model_type;
  const char *model_extra; /* appended to the model object */
  const char *vocab;       /* replaces the whole vocab value when set */
  const char *vocab_extra; /* entries after the 256 byte symbols */
  const char *merges;      /* replaces the merges value (including brackets) */
  int skip_byte;           /* a byte symbol left out of the vocab, or -1 */
  bool no_model;
} tiny_spec_t;

static tiny_spec_t valid_spec(void) {
  tiny_spec_t spec;
  memset(&spec, 0, sizeof spec);
  spec.skip_byte = -1;
  return spec;
}

static const char *or_default(const char *value, const char *fallback) {
  return value ? value : fallback;
}

/* The 256 byte-level symbols, each with its byte value as id. */
static void append_byte_vocab(vlmc_strbuf_t *json, int skip_byte) {
  bool first = true;
  for (unsigned b = 0; b < 256; ++b) {
    if ((int)b == skip_byte) continue;
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    unsigned cp = printable ? b : 256 + (b <= 0x20 ? b : b <= 0xA0 ? 33 + b - 0x7F : 67);
    char utf8[3] = {0};
    if (cp < 0x80) {
      utf8[0] = (char)cp;
    } else {
      utf8[0] = (char)(0xC0 | (cp >> 6));
      utf8[1] = (char)(0x80 | (cp & 0x3F));
    }
    if (!first) vlmc_strbuf_putc(json, ',');
    first = false;
    vlmc_tokenizer_json_string_encode(utf8, strlen(utf8), json);
    vlmc_strbuf_printf(json, ":%u", b);
  }
}

static char *build_json(const tiny_spec_t *spec) {
  vlmc_strbuf_t json;
  vlmc_strbuf_init(&json);
  vlmc_strbuf_printf(&json, "{\"version\":\"1.0\"%s,\"added_tokens\":[%s],",
                     or_default(spec->root_extra, ""), or_default(spec->added, ADDED_X));
  vlmc_strbuf_printf(&json, "\"normalizer\":%s,\"pre_tokenizer\":%s,\"post_processor\":%s,",
                     or_default(spec->normalizer, "{\"type\":\"NFC\"}"),
                     or_default(spec->pre_tokenizer, QWEN_PRE_TOKENIZER),
                     or_default(spec->post_processor, "null"));
  vlmc_strbuf_printf(&json, "\"decoder\":%s",
                     or_default(spec->decoder, "{\"type\":\"ByteLevel\"}"));
  if (!spec->no_model) {
    vlmc_strbuf_printf(&json, ",\"model\":{\"type\":\"%s\"%s,\"vocab\":",
                       or_default(spec->model_type, "BPE"), or_default(spec->model_extra, ""));
    if (spec->vocab) {
      vlmc_strbuf_puts(&json, spec->vocab);
    } else {
      vlmc_strbuf_putc(&json, '{');
      append_byte_vocab(&json, spec->skip_byte);
      vlmc_strbuf_printf(&json, "%s}", or_default(spec->vocab_extra, ",\"ab\":256,\"abc\":257"));
    }
    vlmc_strbuf_printf(&json, ",\"merges\":%s}",
                       or_default(spec->merges, "[\"a b\",[\"ab\",\"c\"]]"));
  }
  vlmc_strbuf_putc(&json, '}');
  return vlmc_strbuf_take(&json);
}

static vlmc_status_t load_spec(const tiny_spec_t *spec, vlmc_tokenizer_t **out) {
  char *json = build_json(spec);
  vlmc_status_t status = vlmc_tokenizer_create_from_buffer("tiny.json", json, strlen(json), out);
  free(json);
  return status;
}

static void expect_encoding(vlmc_tokenizer_t *tok, const char *text, const int32_t *expected,
                            size_t count) {
  vlmc_token_ids_t ids;
  vlmc_token_ids_init(&ids);
  EXPECT_OK(vlmc_tokenizer_encode(tok, text, strlen(text), &ids));
  EXPECT_EQ_INT(ids.len, count);
  for (size_t i = 0; i < count && i < ids.len; ++i) EXPECT_EQ_INT(ids.data[i], expected[i]);
  vlmc_token_ids_deinit(&ids);
}

static void test_tiny_tokenizer_encodes(void) {
  tiny_spec_t spec = valid_spec();
  vlmc_tokenizer_t *tok = NULL;
  EXPECT_OK(load_spec(&spec, &tok));
  if (!tok) return;
  /* "abc" merges fully; " abd" stops at "ab"; <|x|> is atomic. */
  static const int32_t expected[] = {257, 32, 256, 100, 258, 120};
  expect_encoding(tok, "abc abd<|x|>x", expected, 6);
  EXPECT_EQ_INT(vlmc_tokenizer_id_limit(tok), 259);
  vlmc_tokenizer_destroy(tok);
}

static void test_merges_apply_by_rank_then_leftmost(void) {
  tiny_spec_t spec = valid_spec();
  spec.vocab_extra = ",\"ab\":256,\"bc\":257,\"aa\":258";
  spec.merges = "[\"b c\",\"a b\",\"a a\"]"; /* "b c" outranks "a b" */
  spec.added = "";
  vlmc_tokenizer_t *tok = NULL;
  EXPECT_OK(load_spec(&spec, &tok));
  if (!tok) return;
  static const int32_t abc[] = {97, 257};
  expect_encoding(tok, "abc", abc, 2);
  static const int32_t aaa[] = {258, 97}; /* the leftmost pair merges first */
  expect_encoding(tok, "aaa", aaa, 2);
  vlmc_tokenizer_destroy(tok);
}

#define SPLIT_ONLY(pattern)                                                                 \
  "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":" pattern        \
  ",\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"use_regex\":false}]}"

/* Isolated keeps the gaps between matches as pieces too; a regex that matches the empty string
 * everywhere therefore cuts the text into single characters. */
static void test_split_pieces_and_empty_matches(void) {
  tiny_spec_t spec = valid_spec();
  spec.pre_tokenizer = SPLIT_ONLY("{\"Regex\":\"\\\\s*\"}");
  vlmc_tokenizer_t *tok = NULL;
  EXPECT_OK(load_spec(&spec, &tok));
  if (!tok) return;
  static const int32_t chars[] = {97, 98, 99, 32, 97, 98};
  expect_encoding(tok, "abc ab", chars, 6);
  vlmc_tokenizer_destroy(tok);
  spec.pre_tokenizer = SPLIT_ONLY("{\"String\":\" \"}"); /* a literal, not a regex */
  EXPECT_OK(load_spec(&spec, &tok));
  if (!tok) return;
  static const int32_t words[] = {257, 32, 256};
  expect_encoding(tok, "abc ab", words, 3);
  vlmc_tokenizer_destroy(tok);
}

typedef struct {
  const char *what;
  tiny_spec_t spec;
  const char *error;
} bad_case_t;

static void test_malformed_files_are_refused_by_name(void) {
  bad_case_t cases[40];
  size_t n = 0;
#define BAD(description, expected_error, ...)                           \
  do {                                                                  \
    tiny_spec_t s_ = valid_spec();                                      \
    __VA_ARGS__;                                                        \
    cases[n++] = (bad_case_t){(description), s_, (expected_error)};     \
  } while (0)
  BAD("missing model", "tiny.json: model: missing (expected the BPE model object)",
      s_.no_model = true);
  BAD("unknown model type", "tiny.json: model.type: \"WordPiece\" is not supported",
      s_.model_type = "WordPiece");
  BAD("merge as one word", "tiny.json: model.merges[1]: expected \"a b\" or [\"a\",\"b\"]",
      s_.merges = "[\"a b\",\"abc\"]");
  BAD("merge pair of one", "tiny.json: model.merges[0]: expected \"a b\" or [\"a\",\"b\"]",
      s_.merges = "[[\"a\"]]");
  BAD("merge of numbers", "tiny.json: model.merges[0]: expected", s_.merges = "[[1,2]]");
  BAD("merge with two spaces", "tiny.json: model.merges[0]: expected", s_.merges = "[\"a  b\"]");
  BAD("merges not a list", "tiny.json: model.merges: expected an array", s_.merges = "{}");
  BAD("merge part not in vocab", "tiny.json: model.merges[0]: \"zz\" is not in model.vocab",
      s_.merges = "[\"zz a\"]");
  BAD("merged token not in vocab",
      "tiny.json: model.merges[0]: the merged token \"bc\" is not in model.vocab",
      s_.merges = "[\"b c\"]");
  BAD("vocab id out of range", "tiny.json: model.vocab[\"ab\"]: expected an integer id in [0, 259)",
      s_.vocab_extra = ",\"ab\":100000,\"abc\":257");
  BAD("negative vocab id", "tiny.json: model.vocab[\"ab\"]: expected an integer id",
      s_.vocab_extra = ",\"ab\":-1,\"abc\":257");
  BAD("fractional vocab id", "tiny.json: model.vocab[\"ab\"]: expected an integer id",
      s_.vocab_extra = ",\"ab\":256.5,\"abc\":257");
  BAD("string vocab id", "tiny.json: model.vocab[\"ab\"]: expected an integer id",
      s_.vocab_extra = ",\"ab\":\"256\",\"abc\":257");
  BAD("duplicate vocab id", "tiny.json: model.vocab[\"ab\"]: id 97 is already used by \"a\"",
      s_.vocab_extra = ",\"ab\":97,\"abc\":257");
  BAD("duplicate vocab key", "tiny.json: model.vocab[\"ab\"]: key appears twice",
      s_.vocab_extra = ",\"ab\":256,\"ab\":257");
  BAD("vocab not an object", "tiny.json: model.vocab: expected an object", s_.vocab = "[]");
  BAD("missing byte symbol",
      "tiny.json: model.vocab: the byte-level symbol \"A\" (byte 0x41) is missing",
      s_.skip_byte = 'A');
  BAD("unknown normalizer", "tiny.json: normalizer.type: \"Lowercase\" is not supported",
      s_.normalizer = "{\"type\":\"Lowercase\"}");
  BAD("normalizer not an object", "tiny.json: normalizer: expected null or an object",
      s_.normalizer = "\"NFC\"");
  BAD("unknown pre-tokenizer", "tiny.json: pre_tokenizer.type: \"Whitespace\" is not supported",
      s_.pre_tokenizer = "{\"type\":\"Whitespace\"}");
  BAD("null pre-tokenizer", "tiny.json: pre_tokenizer: missing or null",
      s_.pre_tokenizer = "null");
  BAD("split behavior", "tiny.json: pre_tokenizer.pretokenizers[0].behavior: \"Removed\"",
      s_.pre_tokenizer = "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
                         "\"pattern\":{\"Regex\":\"\\\\s+\"},\"behavior\":\"Removed\"},"
                         "{\"type\":\"ByteLevel\",\"use_regex\":false}]}");
  BAD("byte level with its own regex",
      "tiny.json: pre_tokenizer.pretokenizers[1].use_regex: absent (meaning true)",
      s_.pre_tokenizer = "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
                         "\"pattern\":{\"Regex\":\"\\\\s+\"},\"behavior\":\"Isolated\"},"
                         "{\"type\":\"ByteLevel\"}]}");
  BAD("regex that does not compile",
      "tiny.json: pre_tokenizer.pretokenizers[0].pattern.Regex: the regex does not compile",
      s_.pre_tokenizer = "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
                         "\"pattern\":{\"Regex\":\"(a\"},\"behavior\":\"Isolated\"},"
                         "{\"type\":\"ByteLevel\",\"use_regex\":false}]}");
  BAD("stages swapped",
      "tiny.json: pre_tokenizer.pretokenizers[0].type: \"ByteLevel\" is not supported here",
      s_.pre_tokenizer = "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\","
                         "\"use_regex\":false},{\"type\":\"Split\"}]}");
  BAD("unknown decoder", "tiny.json: decoder.type: \"WordPiece\" is not supported",
      s_.decoder = "{\"type\":\"WordPiece\"}");
  BAD("null decoder", "tiny.json: decoder: expected an object", s_.decoder = "null");
  BAD("template post-processor",
      "tiny.json: post_processor.type: \"TemplateProcessing\" is not supported",
      s_.post_processor = "{\"type\":\"TemplateProcessing\"}");
  BAD("added token lstrip", "tiny.json: added_tokens[0].lstrip: true is not supported",
      s_.added = "{\"id\":258,\"content\":\"<|x|>\",\"lstrip\":true}");
  BAD("added token normalized", "tiny.json: added_tokens[0].normalized: true is not supported",
      s_.added = "{\"id\":258,\"content\":\"<|x|>\",\"normalized\":true}");
  BAD("added token id clash", "tiny.json: added_tokens[0].id: 97 is already used by \"a\"",
      s_.added = "{\"id\":97,\"content\":\"<|x|>\"}");
  BAD("added token without content",
      "tiny.json: added_tokens[0].content: expected a non-empty string",
      s_.added = "{\"id\":258,\"content\":\"\"}");
  BAD("added token id out of range", "tiny.json: added_tokens[0].id: expected an integer id",
      s_.added = "{\"id\":5000,\"content\":\"<|x|>\"}");
  BAD("truncation", "tiny.json: truncation: only null is supported",
      s_.root_extra = ",\"truncation\":{\"max_length\":8}");
  BAD("dropout", "tiny.json: model.dropout: BPE dropout is not supported",
      s_.model_extra = ",\"dropout\":0.1");
  BAD("byte fallback", "tiny.json: model.byte_fallback: true is not supported",
      s_.model_extra = ",\"byte_fallback\":true");
  BAD("subword prefix", "tiny.json: model.continuing_subword_prefix: only null or \"\"",
      s_.model_extra = ",\"continuing_subword_prefix\":\"##\"");
#undef BAD
  for (size_t i = 0; i < n; ++i) {
    vlmc_tokenizer_t *tok = NULL;
    vlmc_status_t status = load_spec(&cases[i].spec, &tok);
    if (!status) fprintf(stderr, "  case '%s' loaded\n", cases[i].what);
    EXPECT_ERROR(status, cases[i].error);
    EXPECT_TRUE(tok == NULL);
  }
}

static void test_bad_json(void) {
  vlmc_tokenizer_t *tok = NULL;
  EXPECT_ERROR(vlmc_tokenizer_create_from_buffer("tiny.json", "{\n  \"model\": [1,,]}", 18, &tok),
               "tiny.json: invalid JSON at line 2, column");
  EXPECT_ERROR(vlmc_tokenizer_create_from_buffer("tiny.json", "[]", 2, &tok),
               "tiny.json: expected a JSON object at the top level");
  EXPECT_ERROR(vlmc_tokenizer_create_from_buffer("tiny.json", "", 0, &tok), "invalid JSON");
  EXPECT_TRUE(tok == NULL);
}

/* Writes `data` to a fresh temporary file whose name is returned (malloc'd). */
static char *write_temp(const void *data, size_t len) {
  char *path = strdup("/tmp/vlmc-test-tokenizer-XXXXXX");
  int fd = mkstemp(path);
  if (fd < 0) return path;
  close(fd);
  vlmc_status_t status = vlmc_file_write_all(path, data, len);
  EXPECT_OK(status);
  return path;
}

static void test_files_plain_and_gzip(void) {
  tiny_spec_t spec = valid_spec();
  char *json = build_json(&spec);
  size_t len = strlen(json);
  vlmc_tokenizer_t *tok = NULL;
  char *plain = write_temp(json, len);
  EXPECT_OK(vlmc_tokenizer_create_from_file(plain, &tok));
  vlmc_tokenizer_destroy(tok);

  /* The same text gzip-compressed, then truncated, then corrupted. */
  uLongf gz_capacity = compressBound(len) + 64;
  unsigned char *gz = malloc(gz_capacity);
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  EXPECT_EQ_INT(deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  zs.next_in = (Bytef *)json;
  zs.avail_in = (uInt)len;
  zs.next_out = gz;
  zs.avail_out = (uInt)gz_capacity;
  EXPECT_EQ_INT(deflate(&zs, Z_FINISH), Z_STREAM_END);
  size_t gz_len = zs.total_out;
  deflateEnd(&zs);
  char *gz_path = write_temp(gz, gz_len);
  tok = NULL;
  EXPECT_OK(vlmc_tokenizer_create_from_file(gz_path, &tok));
  EXPECT_TRUE(tok != NULL);
  vlmc_tokenizer_destroy(tok);
  char *cut_path = write_temp(gz, gz_len / 2);
  EXPECT_ERROR(vlmc_tokenizer_create_from_file(cut_path, &tok), "truncated gzip data");
  for (size_t i = 20; i < 40 && i < gz_len; ++i) gz[i] ^= 0x5A;
  char *bad_path = write_temp(gz, gz_len);
  EXPECT_ERROR(vlmc_tokenizer_create_from_file(bad_path, &tok), "gzip data");
  EXPECT_ERROR(vlmc_tokenizer_create_from_file("/nonexistent/tokenizer.json", &tok),
               "/nonexistent/tokenizer.json: cannot open");
  char *paths[] = {plain, gz_path, cut_path, bad_path};
  for (size_t i = 0; i < 4; ++i) {
    unlink(paths[i]);
    free(paths[i]);
  }
  free(gz);
  free(json);
}

int main(void) {
  RUN_TEST(test_tiny_tokenizer_encodes);
  RUN_TEST(test_merges_apply_by_rank_then_leftmost);
  RUN_TEST(test_split_pieces_and_empty_matches);
  RUN_TEST(test_malformed_files_are_refused_by_name);
  RUN_TEST(test_bad_json);
  RUN_TEST(test_files_plain_and_gzip);
  return TEST_SUMMARY();
}
