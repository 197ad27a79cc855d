/* A small fused program and its valid cpu kernel table, shared by the kernel-table tests and
 * fuzzer: a table is only meaningful against the program whose regions it covers. */
#ifndef VLMC_TESTS_UNIT_KERNEL_TABLE_UTIL_H
#define VLMC_TESTS_UNIT_KERNEL_TABLE_UTIL_H

static const char kTableProgram[] =
    "func @k(%x: f32[S,4], %y: f32[S,4]) -> f32[S,4] {\n"
    "  %a = add %x, %y : f32[S,4] dispatch 1\n"
    "  %b = exp %a : f32[S,4] dispatch 1 slot 1\n"
    "  %c = neg %b : f32[S,4] dispatch 2\n"
    "  return %c\n"
    "}\n";

static const char kValidTable[] =
    "{\"format\": 1, \"cpu\": \"x86-64\", \"kernels\": [\n"
    " {\"symbol\": \"vk0\", \"template\": \"elementwise\", \"inputs\": [\"f32\", \"f32\"],"
    " \"output\": \"f32\", \"syms\": [\"S\"], \"cost\": 2},\n"
    " {\"symbol\": \"vk1\", \"template\": \"elementwise\", \"inputs\": [\"f32\"],"
    " \"output\": \"f32\", \"syms\": [], \"cost\": 1}],\n"
    " \"dispatches\": [\n"
    " {\"func\": \"k\", \"dispatch\": 1, \"kernel\": 0,"
    " \"work\": {\"sym\": \"S\", \"num\": 4, \"den\": 1, \"off\": 0, \"scale\": 1}},\n"
    " {\"func\": \"k\", \"dispatch\": 2, \"kernel\": 1,"
    " \"work\": {\"sym\": null, \"num\": 0, \"den\": 1, \"off\": 16, \"scale\": 1}}]}\n";

#endif
