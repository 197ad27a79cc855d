/* A small fused program and its valid cpu kernel table, shared by the kernel-table tests and
 * fuzzer: a table is only meaningful against the program whose regions it covers. The
 * table's kernel signatures depend on the program, so the text is a template: SIG1 and SIG2
 * stand for the signatures of dispatches 1 and 2 (kernel_table_text fills them in). */
#ifndef VLMC_TESTS_UNIT_KERNEL_TABLE_UTIL_H
#define VLMC_TESTS_UNIT_KERNEL_TABLE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/dispatch.h"

static const char kTableProgram[] =
    "func @k(%x: f32[S,4], %y: f32[S,4]) -> f32[S,4] {\n"
    "  %a = add %x, %y : f32[S,4] dispatch 1\n"
    "  %b = exp %a : f32[S,4] dispatch 1 slot 1\n"
    "  %c = neg %b : f32[S,4] dispatch 2\n"
    "  return %c\n"
    "}\n";

static const char kValidTableTemplate[] =
    "{\"format\": 2, \"cpu\": \"x86-64\", \"kernels\": [\n"
    " {\"symbol\": \"vk0\", \"template\": \"elementwise\", \"signature\": \"SIG1\","
    " \"inputs\": [\"f32\", \"f32\"], \"output\": \"f32\", \"syms\": [\"S\"], \"cost\": 2},\n"
    " {\"symbol\": \"vk1\", \"template\": \"elementwise\", \"signature\": \"SIG2\","
    " \"inputs\": [\"f32\"], \"output\": \"f32\", \"syms\": [], \"cost\": 1}],\n"
    " \"dispatches\": [\n"
    " {\"func\": \"k\", \"dispatch\": 1, \"kernel\": 0,"
    " \"work\": {\"sym\": \"S\", \"num\": 4, \"den\": 1, \"off\": 0, \"scale\": 1}},\n"
    " {\"func\": \"k\", \"dispatch\": 2, \"kernel\": 1,"
    " \"work\": {\"sym\": \"S\", \"num\": 4, \"den\": 1, \"off\": 0, \"scale\": 1}}]}\n";

/* The signature of dispatch `id` of the module's first function, as 16 hex digits. */
static inline void kernel_table_signature(const vlmc_module_t *m, uint32_t id, char out[17]) {
  vlmc_dispatch_set_t set;
  snprintf(out, 17, "%016x", 0);
  vlmc_status_t st = vlmc_dispatch_regions(m->funcs[0], &set);
  if (st) { /* zeros: the test then sees the table refused */
    vlmc_status_free(st);
    return;
  }
  const vlmc_dispatch_region_t *r = vlmc_dispatch_find(&set, id);
  if (r) snprintf(out, 17, "%016llx", (unsigned long long)vlmc_dispatch_signature(m, r));
  vlmc_dispatch_set_free(&set);
}

/* The valid table for kTableProgram's module (malloc'd). */
static inline char *kernel_table_text(const vlmc_module_t *m) {
  char *text = malloc(sizeof kValidTableTemplate); /* strdup needs POSIX; the fuzzer is C11 */
  if (text) memcpy(text, kValidTableTemplate, sizeof kValidTableTemplate);
  char sig[17];
  for (uint32_t id = 1; text && id <= 2; ++id) {
    char placeholder[8];
    snprintf(placeholder, sizeof placeholder, "SIG%u", id);
    char *at = strstr(text, placeholder);
    kernel_table_signature(m, id, sig);
    /* "SIGn" is 4 bytes, the signature 16: rebuild around it. */
    size_t head = (size_t)(at - text), n = strlen(text) + 16;
    char *grown = malloc(n);
    if (grown) snprintf(grown, n, "%.*s%s%s", (int)head, text, sig, at + strlen(placeholder));
    free(text);
    text = grown;
  }
  return text;
}

#endif
