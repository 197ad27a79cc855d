/* The npu tile program (artifact/npu_program.h): a valid hand-written npu2 program (the fuzz
 * seed tests/fuzz/corpus/npu_program/valid_npu2.npu: a shim, a memory tile, two compute tiles,
 * buffers, locks, BD chains, core loops, a runtime sequence) parses, checks clean and prints
 * back byte for byte; one mutation per static rule is refused by that rule, with a message
 * naming the item and the limit; malformed text is refused with its line, never a crash. */
#include <stdlib.h>
#include <string.h>

#include "artifact/npu_program.h"
#include "support/file.h"
#include "tests/unit/test.h"

static const char *kValidPath = "tests/fuzz/corpus/npu_program/valid_npu2.npu";
static char *kValid; /* read by main */

/* The valid text with `extra` appended. */
static char *appended(const char *extra) {
  char *text = malloc(strlen(kValid) + strlen(extra) + 1);
  strcpy(text, kValid);
  strcat(text, extra);
  return text;
}

/* The valid text with the first `from` replaced by `to` (a test bug if `from` is missing). */
static char *edited(const char *from, const char *to) {
  const char *at = strstr(kValid, from);
  EXPECT_TRUE(at != NULL);
  if (!at) return appended("");
  size_t head = (size_t)(at - kValid), n = strlen(kValid) - strlen(from) + strlen(to) + 1;
  char *text = malloc(n);
  memcpy(text, kValid, head);
  strcpy(text + head, to);
  strcat(text, at + strlen(from));
  return text;
}

/* Parse then check against the named device; the rule in *out_rule. */
static vlmc_status_t parse_and_check(const char *text, const char *device,
                                     vlmc_npu_rule_t *out_rule) {
  vlmc_npu_program_t p;
  vlmc_npu_program_init(&p);
  *out_rule = VLMC_NPU_RULE_NONE;
  vlmc_status_t st = vlmc_npu_program_parse("prog.npu", text, strlen(text), &p);
  if (!st) st = vlmc_npu_program_check(&p, vlmc_npu_device_find(device), out_rule);
  vlmc_npu_program_deinit(&p);
  return st;
}

/* The mutated program is refused by `rule`, with `needle` and the rule's name in the message. */
static void expect_rule_text(const char *text, vlmc_npu_rule_t rule, const char *needle) {
  vlmc_npu_rule_t got;
  vlmc_status_t st = parse_and_check(text, "npu2", &got);
  if (!st) {
    TEST_FAIL_("expected rule %s, the program passed", vlmc_npu_rule_name(rule));
    return;
  }
  if (got != rule) {
    TEST_FAIL_("expected rule %s, got %s: %s", vlmc_npu_rule_name(rule), vlmc_npu_rule_name(got),
               vlmc_status_message(st));
  }
  if (!strstr(vlmc_status_message(st), needle) ||
      !strstr(vlmc_status_message(st), vlmc_npu_rule_name(rule))) {
    TEST_FAIL_("message \"%s\" lacks \"%s\" or the rule name", vlmc_status_message(st), needle);
  }
  vlmc_status_free(st);
}

static void expect_rule(const char *from, const char *to, vlmc_npu_rule_t rule,
                        const char *needle) {
  char *text = edited(from, to);
  expect_rule_text(text, rule, needle);
  free(text);
}

static void test_valid_program_checks_and_round_trips(void) {
  vlmc_npu_program_t p;
  vlmc_npu_program_init(&p);
  EXPECT_OK(vlmc_npu_program_parse("valid.npu", kValid, strlen(kValid), &p));
  EXPECT_EQ_INT(p.tiles.count, 4);
  EXPECT_EQ_INT(p.cores.count, 2);
  EXPECT_EQ_INT(p.runtime.count, 5);
  EXPECT_EQ_INT(p.bds.items[0].pattern.ndims, 2);
  vlmc_npu_rule_t rule = VLMC_NPU_RULE_COUNT;
  EXPECT_OK(vlmc_npu_program_check(&p, vlmc_npu_device_find("npu2"), &rule));
  EXPECT_EQ_INT(rule, VLMC_NPU_RULE_NONE);
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  vlmc_npu_program_print(&p, &out);
  EXPECT_STREQ(vlmc_strbuf_cstr(&out), kValid);
  vlmc_strbuf_deinit(&out);
  vlmc_npu_program_deinit(&p);
}

/* Non-canonical spelling (comments, ';', blank lines, fields in another order) parses to the
 * same program, and its print is the canonical text. */
static void test_non_canonical_text_prints_canonically(void) {
  const char *text =
      "# a comment\n\ndevice npu2 ; tile c0 compute col 0 row 2\n"
      "buffer b tile c0 addr 1024 bytes 64\nlock l tile c0 init 1\n"
      "bd d tile c0 buffer b offset 0 dims 16x1 next d release l 1 repeat 1\n"
      "core c0 { loop 2 { acquire l 1 ; call copy b b 16 ; release l 1 } }\n";
  const char *canonical =
      "device npu2\ntile c0 compute col 0 row 2\nbuffer b tile c0 addr 1024 bytes 64\n"
      "lock l tile c0 init 1\nbd d tile c0 buffer b offset 0 dims 16x1 release l 1 next d\n"
      "core c0 {\n  loop 2 {\n    acquire l 1\n    call copy b b 16\n    release l 1\n  }\n}\n";
  vlmc_npu_program_t p;
  vlmc_npu_program_init(&p);
  EXPECT_OK(vlmc_npu_program_parse("x.npu", text, strlen(text), &p));
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  vlmc_npu_program_print(&p, &out);
  EXPECT_STREQ(vlmc_strbuf_cstr(&out), canonical);
  vlmc_npu_rule_t rule;
  EXPECT_OK(vlmc_npu_program_check(&p, vlmc_npu_device_find("npu2"), &rule));
  vlmc_strbuf_deinit(&out);
  vlmc_npu_program_deinit(&p);
}

static void test_rule_names_are_distinct(void) {
  EXPECT_STREQ(vlmc_npu_rule_name(VLMC_NPU_RULE_NONE), "none");
  EXPECT_STREQ(vlmc_npu_rule_name(VLMC_NPU_RULE_CAPACITY_EXCEEDED), "capacity_exceeded");
  for (int i = 0; i < VLMC_NPU_RULE_COUNT; ++i) {
    for (int j = 0; j < i; ++j)
      EXPECT_TRUE(strcmp(vlmc_npu_rule_name(i), vlmc_npu_rule_name(j)) != 0);
  }
  EXPECT_STREQ(vlmc_npu_microkernel_at(0), "gemv_q4nx");
  EXPECT_TRUE(vlmc_npu_microkernel_at(9) == NULL);
}

static void test_device_mismatch(void) {
  vlmc_npu_rule_t rule;
  vlmc_status_t st = parse_and_check(kValid, "npu1", &rule);
  EXPECT_EQ_INT(rule, VLMC_NPU_RULE_DEVICE_MISMATCH);
  EXPECT_TRUE(st && strstr(vlmc_status_message(st), "prog.npu:1: rule device_mismatch"));
  vlmc_status_free(st);
}

static void test_undefined_names(void) {
  expect_rule("call rmsnorm c0_in", "call rmsnorm c0_nope", VLMC_NPU_RULE_UNDEFINED_NAME,
              "no buffer named 'c0_nope'");
  expect_rule("buffer c1_out tile c1", "buffer c1_out tile c9", VLMC_NPU_RULE_UNDEFINED_NAME,
              "buffer 'c1_out': no tile named 'c9'");
  expect_rule("next m_recv", "next m_in", VLMC_NPU_RULE_UNDEFINED_NAME,
              "'m_in' is a buffer, not a bd");
  expect_rule("wait in0", "wait in9", VLMC_NPU_RULE_UNDEFINED_NAME, "no dma named 'in9'");
  expect_rule("arg 0 offset 0", "arg 5 offset 0", VLMC_NPU_RULE_UNDEFINED_NAME, "no 'arg 5'");
  expect_rule("acquire m_in_empty 1 release", "acquire c0_nolock 1 release",
              VLMC_NPU_RULE_UNDEFINED_NAME, "no lock named 'c0_nolock'");
}

static void test_tile_placement(void) {
  expect_rule("tile c1 compute col 0 row 3", "tile c1 compute col 8 row 3",
              VLMC_NPU_RULE_TILE_OUTSIDE_ARRAY, "tile 'c1' at col 8 row 3 is outside npu2's array");
  expect_rule("tile c1 compute col 0 row 3", "tile c1 compute col 0 row 6",
              VLMC_NPU_RULE_TILE_OUTSIDE_ARRAY, "8 columns x 6 rows");
  expect_rule("tile m0 memory col 0 row 1", "tile m0 memory col 0 row 2", VLMC_NPU_RULE_TILE_KIND,
              "row 2 of npu2 holds compute tiles");
  expect_rule("tile c1 compute col 0 row 3", "tile c1 compute col 0 row 2",
              VLMC_NPU_RULE_TILE_POSITION_TAKEN, "tile 'c0' is already there");
  expect_rule("dma in0 tile s0", "dma in0 tile m0", VLMC_NPU_RULE_TILE_KIND,
              "host transfers go through shim tiles");
  char *text = appended("tile c7 compute col 7 row 5\ncore m0 {\n}\n");
  expect_rule_text(text, VLMC_NPU_RULE_TILE_KIND, "only compute tiles have cores");
  free(text);
}

static void test_capacity(void) {
  expect_rule("buffer c1_out tile c1 addr 3072 bytes 2048",
              "buffer c1_out tile c1 addr 3072 bytes 63000", VLMC_NPU_RULE_CAPACITY_EXCEEDED,
              "past the tile's 65536 bytes");
  expect_rule("buffer m_out tile m0 addr 8192 bytes 4096",
              "buffer m_out tile m0 addr 8192 bytes 520000", VLMC_NPU_RULE_CAPACITY_EXCEEDED,
              "memory tile 'm0' ends at byte 528192");
  char *text = appended("buffer on_shim tile s0 addr 0 bytes 4\n");
  expect_rule_text(text, VLMC_NPU_RULE_CAPACITY_EXCEEDED, "shim tile 's0'");
  free(text);
}

static void test_buffer_overlap(void) {
  expect_rule("buffer c0_out tile c0 addr 5120", "buffer c0_out tile c0 addr 4096",
              VLMC_NPU_RULE_BUFFER_OVERLAP,
              "overlaps buffer 'c0_w' (bytes 3072..5119) on tile 'c0'");
  expect_rule("buffer c0_in tile c0 addr 1024", "buffer c0_in tile c0 addr 512",
              VLMC_NPU_RULE_BUFFER_OVERLAP, "overlaps the reserved stack (bytes 0..1023)");
}

/* `count` numbered copies of the statement `fmt` (with one %d). */
static char *appended_copies(const char *fmt, int count) {
  vlmc_strbuf_t extra;
  vlmc_strbuf_init(&extra);
  for (int i = 0; i < count; ++i) vlmc_strbuf_printf(&extra, fmt, i);
  char *text = appended(vlmc_strbuf_cstr(&extra));
  vlmc_strbuf_deinit(&extra);
  return text;
}

static void test_counts(void) {
  char *bds = appended_copies("bd extra%d tile c0 buffer c0_in offset 0 dims 4x1\n", 15);
  expect_rule_text(bds, VLMC_NPU_RULE_BD_COUNT_EXCEEDED, "tile 'c0' (compute) has only 16 BDs");
  free(bds);
  char *locks = appended_copies("lock extra%d tile c1 init 0\n", 13);
  expect_rule_text(locks, VLMC_NPU_RULE_LOCK_COUNT_EXCEEDED,
                   "lock 'extra12': tile 'c1' (compute) has only 16 locks");
  free(locks);
  expect_rule("channel c0_i tile c0 in 0", "channel c0_i tile c0 in 2",
              VLMC_NPU_RULE_CHANNEL_COUNT_EXCEEDED, "in channel 2, but tile 'c0' (compute) has 2");
  expect_rule("channel m_host_out tile m0 out 2", "channel m_host_out tile m0 out 6",
              VLMC_NPU_RULE_CHANNEL_COUNT_EXCEEDED, "tile 'm0' (memory) has 6 MM2S (out) channels");
  expect_rule("channel c1_o tile c1 out 0 bd c1_send", "channel c1_o tile c1 in 0 bd c1_send",
              VLMC_NPU_RULE_CHANNEL_COUNT_EXCEEDED,
              "in channel 0 of tile 'c1' is already channel 'c1_i'");
  expect_rule("dma out0 tile s0 in 0", "dma out0 tile s0 in 2",
              VLMC_NPU_RULE_CHANNEL_COUNT_EXCEEDED,
              "dma 'out0': in channel 2, but tile 's0' (shim) has 2");
}

static void test_bd_limits(void) {
  expect_rule("dims 512x1,4x512 acquire", "dims 1024x1,2x1024 acquire", VLMC_NPU_RULE_BD_LIMIT,
              "bd 'm_recv': d0 size 1024 is outside 1..1023 words");
  expect_rule("dims 512x1,4x512 acquire", "dims 512x1,1024x1 acquire", VLMC_NPU_RULE_BD_LIMIT,
              "d1 size 1024");
  expect_rule("dims 16x1,32x32 repeat 2", "dims 16x1,32x1048577 repeat 2", VLMC_NPU_RULE_BD_LIMIT,
              "d1 stride 1048577 is outside 1..1048576 words");
  expect_rule("dims 16x1,32x32 repeat 2", "dims 16x0,32x32 repeat 2", VLMC_NPU_RULE_BD_LIMIT,
              "d0 stride 0");
  expect_rule("dims 16x1,32x32 repeat 2", "dims 16x1,32x32 repeat 65", VLMC_NPU_RULE_BD_LIMIT,
              "repeat 65 is outside 1..64");
  expect_rule("dims 16x1,32x32 repeat 2", "dims 0x1,32x32 repeat 2", VLMC_NPU_RULE_BD_LIMIT,
              "d0 size 0");
  expect_rule("buffer m_in offset 4096", "buffer m_in offset 4094", VLMC_NPU_RULE_BD_LIMIT,
              "offset 4094 bytes is not a multiple of the 4-byte granularity");
  expect_rule("dims 512x1,2x512 acquire", "dims 512x1,2x512,2x1024 acquire",
              VLMC_NPU_RULE_BD_OUT_OF_BOUNDS,
              "spans 2048 words from offset 0, outside buffer 'm_out'");
  expect_rule("dims 512x1,2x512\n  wait", "dims 512x1,2x512,2x1024\n  wait",
              VLMC_NPU_RULE_HOST_OUT_OF_BOUNDS, "host arg 1 of 4096 bytes");
  expect_rule("bd c0_recv tile c0 buffer c0_in offset 0 dims 512x1",
              "bd c0_recv tile c0 buffer c0_in offset 0 dims 513x1", VLMC_NPU_RULE_BD_OUT_OF_BOUNDS,
              "the pattern spans 513 words from offset 0, outside buffer 'c0_in' of 2048 bytes");
  expect_rule("bd c0_recv tile c0 buffer c0_in offset 0",
              "bd c0_recv tile c0 buffer c0_in offset 4", VLMC_NPU_RULE_BD_OUT_OF_BOUNDS,
              "from offset 4");
  expect_rule("buffer m_in offset 4096 dims 512x1", "buffer m_in offset 4096 dims 512x3",
              VLMC_NPU_RULE_BD_OUT_OF_BOUNDS, "spans 1534 words from offset 4096");
}

static void test_bd_limits_d2_unchecked_but_bounded(void) {
  /* d2 is not range-checked by the device (NPU.md A.2), only by the buffer's bounds. */
  expect_rule("dims 512x1 acquire m_in_full", "dims 1x1,1x1,2100x1 acquire m_in_full",
              VLMC_NPU_RULE_BD_OUT_OF_BOUNDS, "spans 2100 words");
}

static void test_host_bounds(void) {
  expect_rule(
      "arg 1 bytes 4096", "arg 1 bytes 4000", VLMC_NPU_RULE_HOST_OUT_OF_BOUNDS,
      "dma 'out0': the pattern spans 1024 words from offset 0, outside host arg 1 of 4000 bytes");
  expect_rule("write c0_rtp offset 0", "write c0_rtp offset 16", VLMC_NPU_RULE_BD_OUT_OF_BOUNDS,
              "write to buffer 'c0_rtp' at offset 16");
}

static void test_reachability(void) {
  expect_rule("bd c0_recv tile c0 buffer c0_in", "bd c0_recv tile c0 buffer c1_in",
              VLMC_NPU_RULE_NOT_REACHABLE,
              "bd 'c0_recv' on tile 'c0' names buffer 'c1_in' of tile 'c1'");
  expect_rule("acquire c0_in_empty 1 release c0_in_full",
              "acquire c1_in_empty 1 release c0_in_full", VLMC_NPU_RULE_NOT_REACHABLE,
              "a DMA uses its own tile's locks");
  expect_rule("next c0_send", "next c1_send", VLMC_NPU_RULE_NOT_REACHABLE,
              "chains to bd 'c1_send'");
  expect_rule("channel c0_o tile c0 out 0 bd c0_send", "channel c0_o tile c0 out 0 bd c1_send",
              VLMC_NPU_RULE_NOT_REACHABLE, "starts bd 'c1_send' of tile 'c1'");
  /* c1 (row 3) may use c0's (row 2) buffer and locks: they are neighbours; m0's are not. */
  expect_rule("call silu_mul c1_in c0_out", "call silu_mul c1_in m_out",
              VLMC_NPU_RULE_NOT_REACHABLE,
              "core 'c1' passes buffer 'm_out' of tile 'm0' to silu_mul");
  expect_rule("    acquire c0_out_full 1\n    acquire c1_out_empty",
              "    acquire m_in_full 1\n    acquire c1_out_empty", VLMC_NPU_RULE_NOT_REACHABLE,
              "core 'c1' acquires lock 'm_in_full' of tile 'm0'");
}

/* A memory tile's DMA reaches its east/west neighbour memory tile; a compute tile's does not. */
static void test_memtile_neighbour_buffer(void) {
  char *ok = appended("tile m1 memory col 1 row 1\nbuffer m1_buf tile m1 addr 0 bytes 64\n"
                      "bd m_east tile m0 buffer m1_buf offset 0 dims 16x1\n");
  vlmc_npu_rule_t rule;
  EXPECT_OK(parse_and_check(ok, "npu2", &rule));
  free(ok);
  char *far = appended("tile m2 memory col 2 row 1\nbuffer m2_buf tile m2 addr 0 bytes 64\n"
                       "bd m_far tile m0 buffer m2_buf offset 0 dims 16x1\n");
  expect_rule_text(far, VLMC_NPU_RULE_NOT_REACHABLE, "names buffer 'm2_buf' of tile 'm2'");
  free(far);
}

static void test_lock_values(void) {
  expect_rule("lock m_out_empty tile m0 init 2", "lock m_out_empty tile m0 init 64",
              VLMC_NPU_RULE_LOCK_VALUE, "init value of lock 'm_out_empty': 64 is outside 0..63");
  expect_rule("acquire c0_in_full 1", "acquire c0_in_full 0", VLMC_NPU_RULE_LOCK_VALUE,
              "acquire of lock 'c0_in_full': 0 is outside 1..63");
  expect_rule("release m_out_empty 2", "release m_out_empty 99", VLMC_NPU_RULE_LOCK_VALUE,
              "release of lock 'm_out_empty': 99");
}

static void test_unknown_microkernel(void) {
  expect_rule("call rmsnorm", "call layernorm", VLMC_NPU_RULE_UNKNOWN_MICROKERNEL,
              "core 'c0' calls 'layernorm', which is not in the microkernel library");
}

/* docs/npu.md names every rule, as `name`, in its table of rules. */
static void test_docs_list_every_rule(void) {
  char *docs = NULL;
  size_t len = 0;
  EXPECT_OK(vlmc_file_read_all("docs/npu.md", &docs, &len));
  for (int i = 1; docs && i < VLMC_NPU_RULE_COUNT; ++i) {
    char quoted[64];
    snprintf(quoted, sizeof quoted, "| `%s` |", vlmc_npu_rule_name(i));
    if (!strstr(docs, quoted)) TEST_FAIL_("docs/npu.md does not document rule %s", quoted);
  }
  free(docs);
}

/* Malformed text: refused with "FILE:LINE: error:" and `needle`. */
static void expect_parse_error(const char *text, const char *line_prefix, const char *needle) {
  vlmc_npu_program_t p;
  vlmc_npu_program_init(&p);
  vlmc_status_t st = vlmc_npu_program_parse("bad.npu", text, strlen(text), &p);
  if (!st) {
    TEST_FAIL_("parsed, expected an error with \"%s\": %s", needle, text);
  } else {
    EXPECT_EQ_INT(vlmc_status_code(st), VLMC_PARSE_ERROR);
    if (!strstr(vlmc_status_message(st), line_prefix) || !strstr(vlmc_status_message(st), needle)) {
      TEST_FAIL_("error \"%s\" lacks \"%s\" or \"%s\"", vlmc_status_message(st), line_prefix,
                 needle);
    }
    vlmc_status_free(st);
  }
  EXPECT_EQ_INT(p.tiles.count, 0); /* left empty */
  vlmc_npu_program_deinit(&p);
}

static void test_malformed_text(void) {
  expect_parse_error("device npu2\ntile c0 compute col 0\n", "bad.npu:2: error:", "expected 'row'");
  expect_parse_error("device npu2\ntile c0 compute col 0 row\n", "bad.npu:2:", "expected row");
  expect_parse_error("device npu2\n\nfrobnicate x\n",
                     "bad.npu:3:", "unknown statement 'frobnicate'");
  expect_parse_error("device npu2\ntile c0 gpu col 0 row 2\n", "bad.npu:2:", "unknown kind 'gpu'");
  expect_parse_error("device npu2\ntile c0 compute col 99999999999999999999 row 2\n",
                     "bad.npu:2:", "expected a decimal number 0..2^40");
  expect_parse_error("device npu2\ntile c0 compute col 1099511627777 row 2\n",
                     "bad.npu:2:", "decimal number");
  expect_parse_error("device npu2\ntile c0 compute col -1 row 2\n", "bad.npu:2:", "got '-1'");
  expect_parse_error("device npu2\ntile c0 compute col 0 row 2\nlock c0 tile c0 init 0\n",
                     "bad.npu:3:", "duplicate name 'c0': already the tile of line 2");
  expect_parse_error("device npu2\narg 0 bytes 4\narg 0 bytes 8\n",
                     "bad.npu:3:", "duplicate 'arg 0'");
  expect_parse_error("device npu2\ncore c0 {\n  loop 2 {\n",
                     "bad.npu:4:", "'{' of line 3 is never closed");
  expect_parse_error("device npu2\n}\n", "bad.npu:2:", "'}' with no open block");
  expect_parse_error(
      "device npu2\ncore c0 {\nloop 1 {\nloop 1 {\nloop 1 {\nloop 1 {\nloop 1 {\n"
      "loop 1 {\nloop 1 {\nloop 1 {\n",
      "bad.npu:10:", "blocks nested deeper than 8");
  expect_parse_error("device npu2\ncore c0\n", "bad.npu:2:", "must be followed by '{'");
  expect_parse_error("device npu2\ntile c0 compute col 0 row 2 {\n",
                     "bad.npu:2:", "opens no block");
  expect_parse_error("device npu2\ncore c0 {\n  tile x compute col 0 row 2\n}\n",
                     "bad.npu:3:", "unknown core statement 'tile'");
  expect_parse_error("device npu2\ncore c0 {\n  loop 0 {\n  }\n}\n", "bad.npu:3:", "loop count 0");
  expect_parse_error("device npu2\nruntime {\n  dma a tile s0 sideways 0\n}\n",
                     "bad.npu:3:", "expected a direction");
  expect_parse_error("device npu2\nruntime {\n}\nruntime {\n}\n",
                     "bad.npu:4:", "a second 'runtime'");
  expect_parse_error("tile c0 compute col 0 row 2\n",
                     "bad.npu:1:", "must start with 'device NAME'");
  expect_parse_error("", "bad.npu:1:", "no 'device NAME'");
  expect_parse_error("device npu2\ndevice npu1\n", "bad.npu:2:", "a second 'device'");
  expect_parse_error("device npu2\nbuffer b tile t addr 0 bytes 0\n",
                     "bad.npu:2:", "bytes must be positive");
  expect_parse_error("device npu2\nbd d tile t buffer b offset 0 dims 4x1,\n",
                     "bad.npu:2:", "a ','");
  expect_parse_error("device npu2\nbd d tile t buffer b offset 0 dims 4x1,1x1,1x1,1x1,1x1\n",
                     "bad.npu:2:", "more than 4 dimensions");
  expect_parse_error("device npu2\nbd d tile t buffer b offset 0 dims 4y1\n",
                     "bad.npu:2:", "expected SIZExSTRIDE");
  expect_parse_error("device npu2\nbd d tile t buffer b offset 0 dims 4x1 next a next b\n",
                     "bad.npu:2:", "unexpected 'next'");
  expect_parse_error("device npu2\nlock l tile t init 0 extra\n",
                     "bad.npu:2:", "unexpected 'extra'");
  expect_parse_error("device npu2\nlock 9l tile t init 0\n", "bad.npu:2:", "is not a name");
  expect_parse_error("device npu2\nlock l tile t init 0\x01\n",
                     "bad.npu:2:", "unexpected byte 0x01");
  expect_parse_error("device npu2\nruntime {\n  write b offset 0 value 4294967296\n}\n",
                     "bad.npu:3:", "does not fit 32 bits");
  expect_parse_error(
      "device npu2\ncore c0 {\n  call add 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n}\n",
      "bad.npu:3:", "more than 16 arguments");
}

static void test_name_too_long(void) {
  char text[256];
  snprintf(text, sizeof text, "device npu2\nlock %0*d tile t init 0\n", 70, 0);
  memcpy(text + strlen("device npu2\nlock "), "abcdefgh", 8);
  expect_parse_error(text, "bad.npu:2:", "at most 63");
}

/* Every prefix of the valid program (and of one with an embedded NUL) parses or fails with
 * a located message, and whatever parses also checks without a crash. */
static void test_every_prefix_is_handled(void) {
  size_t n = strlen(kValid);
  for (size_t len = 0; len <= n; ++len) {
    vlmc_npu_program_t p;
    vlmc_npu_program_init(&p);
    vlmc_status_t st = vlmc_npu_program_parse("cut.npu", kValid, len, &p);
    if (st) {
      if (!strstr(vlmc_status_message(st), "cut.npu:"))
        TEST_FAIL_("unlocated: %s", vlmc_status_message(st));
      vlmc_status_free(st);
    } else {
      vlmc_npu_rule_t rule;
      vlmc_status_free(vlmc_npu_program_check(&p, vlmc_npu_device_find("npu2"), &rule));
    }
    vlmc_npu_program_deinit(&p);
  }
  char with_nul[] = "device npu2\ntile c0 compute\0 col 0 row 2\n";
  vlmc_npu_program_t p;
  vlmc_npu_program_init(&p);
  EXPECT_ERROR(vlmc_npu_program_parse("nul.npu", with_nul, sizeof with_nul - 1, &p),
               "nul.npu:2: error: unexpected byte 0x00");
  vlmc_npu_program_deinit(&p);
}

/* More items than a list may hold: refused by name, not an unbounded allocation. */
static void test_list_bound(void) {
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  vlmc_strbuf_puts(&text, "device npu2\n");
  for (int i = 0; i <= VLMC_NPU_MAX_ITEMS; ++i)
    vlmc_strbuf_printf(&text, "lock l%d tile t init 0\n", i);
  vlmc_npu_program_t p;
  vlmc_npu_program_init(&p);
  EXPECT_ERROR(vlmc_npu_program_parse("big.npu", vlmc_strbuf_cstr(&text), text.len, &p),
               "big.npu:4098: error: more than 4096 locks");
  vlmc_npu_program_deinit(&p);
  vlmc_strbuf_deinit(&text);
}

int main(void) {
  size_t len = 0;
  vlmc_status_t st = vlmc_file_read_all(kValidPath, &kValid, &len);
  if (st) return vlmc_status_report(st);
  RUN_TEST(test_valid_program_checks_and_round_trips);
  RUN_TEST(test_non_canonical_text_prints_canonically);
  RUN_TEST(test_rule_names_are_distinct);
  RUN_TEST(test_device_mismatch);
  RUN_TEST(test_undefined_names);
  RUN_TEST(test_tile_placement);
  RUN_TEST(test_capacity);
  RUN_TEST(test_buffer_overlap);
  RUN_TEST(test_counts);
  RUN_TEST(test_bd_limits);
  RUN_TEST(test_bd_limits_d2_unchecked_but_bounded);
  RUN_TEST(test_host_bounds);
  RUN_TEST(test_reachability);
  RUN_TEST(test_memtile_neighbour_buffer);
  RUN_TEST(test_lock_values);
  RUN_TEST(test_unknown_microkernel);
  RUN_TEST(test_docs_list_every_rule);
  RUN_TEST(test_malformed_text);
  RUN_TEST(test_name_too_long);
  RUN_TEST(test_every_prefix_is_handled);
  RUN_TEST(test_list_bound);
  free(kValid);
  return TEST_SUMMARY();
}
