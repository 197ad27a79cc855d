/* docs/ir.md documents the op table: every op has a "### `mnemonic`" section that names each
 * of its attributes, every op section names an op that exists, and every dtype is listed. */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "support/file.h"
#include "tests/unit/test.h"

static char *docs;

/* The text of the section for `mnemonic`, up to the next heading; NULL if there is none. */
static char *op_section(const char *mnemonic) {
  char heading[128];
  snprintf(heading, sizeof heading, "\n### `%s`\n", mnemonic);
  const char *start = strstr(docs, heading);
  if (!start) return NULL;
  start += strlen(heading);
  const char *end = strstr(start, "\n#");
  size_t len = end ? (size_t)(end - start) : strlen(start);
  char *section = malloc(len + 1);
  memcpy(section, start, len);
  section[len] = '\0';
  return section;
}

static void test_every_op_documented(void) {
  for (int k = 0; k < VLMC_OP_COUNT; ++k) {
    const vlmc_op_info_t *info = vlmc_op_info((vlmc_op_kind_t)k);
    char *section = op_section(info->mnemonic);
    if (!section) {
      TEST_FAIL_("docs/ir.md has no section \"### `%s`\"", info->mnemonic);
      continue;
    }
    for (uint32_t a = 0; a < info->num_attrs; ++a) {
      char quoted[96];
      snprintf(quoted, sizeof quoted, "`%s`", info->attrs[a].name);
      if (!strstr(section, quoted))
        TEST_FAIL_("docs/ir.md: the section of '%s' does not mention attribute %s", info->mnemonic,
                   quoted);
      if (info->attrs[a].choices) {
        for (const char *c = info->attrs[a].choices; *c;) {
          size_t n = strcspn(c, "|");
          char choice[64];
          snprintf(choice, sizeof choice, "`%.*s`", (int)n, c);
          if (!strstr(section, choice))
            TEST_FAIL_("docs/ir.md: '%s' does not explain choice %s", info->mnemonic, choice);
          c += n + (c[n] == '|');
        }
      }
    }
    free(section);
  }
}

/* Every "### `x`" heading after "## Ops" is an op of the table (no stale documentation). */
static void test_no_stale_sections(void) {
  const char *ops = strstr(docs, "\n## Ops\n");
  EXPECT_TRUE(ops != NULL);
  const char *end = ops ? strstr(ops + 1, "\n## ") : NULL;
  int sections = 0;
  for (const char *p = ops; p && (p = strstr(p, "\n### `")) && (!end || p < end); ++p) {
    const char *name = p + 6;
    size_t n = strcspn(name, "`");
    vlmc_op_kind_t kind;
    if (!vlmc_op_kind_from_mnemonic(name, n, &kind))
      TEST_FAIL_("docs/ir.md documents '%.*s', which is not in ops.def", (int)n, name);
    ++sections;
  }
  EXPECT_EQ_INT(sections, VLMC_OP_COUNT);
}

static void test_every_dtype_documented(void) {
  for (int d = 0; d < VLMC_DTYPE_COUNT; ++d) {
    char row[32];
    snprintf(row, sizeof row, "| `%s`", vlmc_dtype_info((vlmc_dtype_t)d)->name);
    if (!strstr(docs, row)) TEST_FAIL_("docs/ir.md: the dtype table has no row %s", row);
  }
}

int main(void) {
  size_t len;
  vlmc_status_t st = vlmc_file_read_all("docs/ir.md", &docs, &len);
  if (st) {
    fprintf(stderr, "%s\n", vlmc_status_message(st));
    vlmc_status_free(st);
    return 1;
  }
  RUN_TEST(test_every_op_documented);
  RUN_TEST(test_no_stale_sections);
  RUN_TEST(test_every_dtype_documented);
  free(docs);
  return TEST_SUMMARY();
}
