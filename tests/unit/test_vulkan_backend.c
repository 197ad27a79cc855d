/* The vulkan runtime backend (runtime/backends/vulkan/) end to end on whatever device the
 * loader finds (lavapipe in CI): two SPIR-V kernels lowered at test time from MLIR (the CLI
 * route of /work/shared/MLIR_GPU.md: mlir-opt-19 + mlir-translate-19) for the kernel-table
 * test program (kernel_table_util.h: dispatch 1 = exp(x + y), dispatch 2 = -that), packed as
 * an artifact's sections and run through the program walker: results against the host, a
 * 2-D grid (more than 65535 workgroups), descriptor pools instead of push descriptors, the
 * on-disk pipeline cache (written, a corrupt one ignored and rewritten), the named open
 * errors (loader missing, device index out of range), kernel variants chosen by device class
 * and the registry's default pick. */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/backend.h"
#include "runtime/program.h"
#include "tests/unit/kernel_table_util.h"
#include "tests/unit/test.h"

#ifdef VLMC_HAVE_VULKAN

/* out[i] = exp(x[i] + y[i]) for i < work (push word 0); word 1 is the symbol S (unused). */
static const char kExpAddMlir[] =
    "module attributes {gpu.container_module, spirv.target_env = #spirv.target_env<\n"
    "    #spirv.vce<v1.3, [Shader], [SPV_KHR_storage_buffer_storage_class]>, #spirv.resource_limits<>>} {\n"
    "  gpu.module @kernels {\n"
    "    gpu.func @vk0(%x: memref<?xf32> {spirv.interface_var_abi = #spirv.interface_var_abi<(0, 0)>},\n"
    "                  %y: memref<?xf32> {spirv.interface_var_abi = #spirv.interface_var_abi<(0, 1)>},\n"
    "                  %o: memref<?xf32> {spirv.interface_var_abi = #spirv.interface_var_abi<(0, 2)>},\n"
    "                  %pc: memref<2xi32, #spirv.storage_class<PushConstant>> {spirv.interface_var_abi = #spirv.interface_var_abi<(0, 3)>})\n"
    "        kernel attributes {spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>} {\n"
    "      %c0 = arith.constant 0 : index\n"
    "      %c64 = arith.constant 64 : index\n"
    "      %w32 = memref.load %pc[%c0] : memref<2xi32, #spirv.storage_class<PushConstant>>\n"
    "      %work = arith.index_cast %w32 : i32 to index\n"
    "      %tx = gpu.thread_id x\n"
    "      %bx = gpu.block_id x\n"
    "      %by = gpu.block_id y\n"
    "      %gx = gpu.grid_dim x\n"
    "      %row = arith.muli %by, %gx : index\n"
    "      %group = arith.addi %row, %bx : index\n"
    "      %base = arith.muli %group, %c64 : index\n"
    "      %i = arith.addi %base, %tx : index\n"
    "      %in = arith.cmpi slt, %i, %work : index\n"
    "      scf.if %in {\n"
    "        %a = memref.load %x[%i] : memref<?xf32>\n"
    "        %b = memref.load %y[%i] : memref<?xf32>\n"
    "        %s = arith.addf %a, %b : f32\n"
    "        %e = math.exp %s : f32\n"
    "        memref.store %e, %o[%i] : memref<?xf32>\n"
    "      }\n"
    "      gpu.return\n"
    "    }\n"
    "  }\n"
    "}\n";

/* out[i] = -x[i]: 1 push word, workgroups of 32 handling 64 units each (two per lane). */
static const char kNegMlir[] =
    "module attributes {gpu.container_module, spirv.target_env = #spirv.target_env<\n"
    "    #spirv.vce<v1.3, [Shader], [SPV_KHR_storage_buffer_storage_class]>, #spirv.resource_limits<>>} {\n"
    "  gpu.module @kernels {\n"
    "    gpu.func @vk1(%x: memref<?xf32> {spirv.interface_var_abi = #spirv.interface_var_abi<(0, 0)>},\n"
    "                  %o: memref<?xf32> {spirv.interface_var_abi = #spirv.interface_var_abi<(0, 1)>},\n"
    "                  %pc: memref<1xi32, #spirv.storage_class<PushConstant>> {spirv.interface_var_abi = #spirv.interface_var_abi<(0, 2)>})\n"
    "        kernel attributes {spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [32, 1, 1]>} {\n"
    "      %c0 = arith.constant 0 : index\n"
    "      %c32 = arith.constant 32 : index\n"
    "      %c64 = arith.constant 64 : index\n"
    "      %w32 = memref.load %pc[%c0] : memref<1xi32, #spirv.storage_class<PushConstant>>\n"
    "      %work = arith.index_cast %w32 : i32 to index\n"
    "      %tx = gpu.thread_id x\n"
    "      %bx = gpu.block_id x\n"
    "      %by = gpu.block_id y\n"
    "      %gx = gpu.grid_dim x\n"
    "      %row = arith.muli %by, %gx : index\n"
    "      %group = arith.addi %row, %bx : index\n"
    "      %base = arith.muli %group, %c64 : index\n"
    "      %i0 = arith.addi %base, %tx : index\n"
    "      %i1 = arith.addi %i0, %c32 : index\n"
    "      %in0 = arith.cmpi slt, %i0, %work : index\n"
    "      scf.if %in0 {\n"
    "        %a = memref.load %x[%i0] : memref<?xf32>\n"
    "        %n = arith.negf %a : f32\n"
    "        memref.store %n, %o[%i0] : memref<?xf32>\n"
    "      }\n"
    "      %in1 = arith.cmpi slt, %i1, %work : index\n"
    "      scf.if %in1 {\n"
    "        %a = memref.load %x[%i1] : memref<?xf32>\n"
    "        %n = arith.negf %a : f32\n"
    "        memref.store %n, %o[%i1] : memref<?xf32>\n"
    "      }\n"
    "      gpu.return\n"
    "    }\n"
    "  }\n"
    "}\n";

static char g_dir[256];      /* scratch folder: MLIR, SPIR-V, the pipeline cache */
static unsigned char *g_spirv; /* the modules back to back: vk0, vk1, then vk2 */
static size_t g_spirv_size, g_size0;
static char *g_table;
static char *g_variant_table; /* g_table plus vk2, a variant of vk1 for cpu devices */
static vlmc_module_t *g_module;

static bool write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return false;
  bool ok = fputs(text, f) >= 0;
  return fclose(f) == 0 && ok;
}

static unsigned char *read_bytes(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *data = n > 0 ? malloc((size_t)n) : NULL;
  if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *size = data ? (size_t)n : 0;
  return data;
}

/* MLIR_GPU.md's CLI route: lower, cut the spirv.module out, strip bind() from the
 * push-constant global, serialize. */
static unsigned char *lower(const char *name, const char *mlir, size_t *size) {
  char path[512], cmd[4096];
  snprintf(path, sizeof path, "%s/%s.mlir", g_dir, name);
  if (!write_text(path, mlir)) return NULL;
  snprintf(cmd, sizeof cmd,
           "cd %s && mlir-opt-19 %s.mlir --pass-pipeline='builtin.module(convert-math-to-spirv,"
           "convert-gpu-to-spirv,spirv.module(spirv-lower-abi-attrs,spirv-update-vce))' -o "
           "%s.lowered.mlir && awk '/^  spirv.module/{p=1} p{print} p&&/^  }$/{exit}' "
           "%s.lowered.mlir | sed -E '/spirv.GlobalVariable .*PushConstant>$/ "
           "s/ bind\\([0-9]+, [0-9]+\\)//' > %s.spvmod.mlir && mlir-translate-19 "
           "--no-implicit-module --serialize-spirv %s.spvmod.mlir -o %s.spv",
           g_dir, name, name, name, name, name, name);
  if (system(cmd) != 0) return NULL;
  snprintf(path, sizeof path, "%s/%s.spv", g_dir, name);
  return read_bytes(path, size);
}

static const char kTableTemplate[] =
    "{\"format\": 2, \"abi\": \"vulkan-spirv-1\", \"spirv_version\": \"1.3\", \"kernels\": [\n"
    " {\"symbol\": \"vk0\", \"template\": \"elementwise\", \"signature\": \"%s\","
    " \"inputs\": [\"f32\", \"f32\"], \"output\": \"f32\", \"syms\": [\"S\"], \"cost\": 2,"
    " \"target\": {\"entry\": \"vk0\", \"spirv_offset\": 0, \"spirv_size\": %zu,"
    " \"workgroup_x\": 64, \"workgroup_y\": 1, \"workgroup_z\": 1, \"units_per_group\": 64,"
    " \"push_words\": 2, \"shared_bytes\": 0, \"features\": \"\"}},\n"
    " {\"symbol\": \"vk1\", \"template\": \"elementwise\", \"signature\": \"%s\","
    " \"inputs\": [\"f32\"], \"output\": \"f32\", \"syms\": [], \"cost\": 1,"
    " \"target\": {\"entry\": \"vk1\", \"spirv_offset\": %zu, \"spirv_size\": %zu,"
    " \"workgroup_x\": 32, \"workgroup_y\": 1, \"workgroup_z\": 1, \"units_per_group\": 64,"
    " \"push_words\": 1, \"shared_bytes\": 0, \"features\": \"\"}}],\n"
    " \"dispatches\": [\n"
    " {\"func\": \"k\", \"dispatch\": 1, \"kernel\": 0,"
    " \"work\": {\"sym\": \"S\", \"num\": 4, \"den\": 1, \"off\": 0, \"scale\": 1}},\n"
    " {\"func\": \"k\", \"dispatch\": 2, \"kernel\": 1,"
    " \"work\": {\"sym\": \"S\", \"num\": 4, \"den\": 1, \"off\": 0, \"scale\": 1}}]}\n";

/* Builds the fixture; false (with a note) when the MLIR tools are not installed. */
static bool setup(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/vlmc-test-vulkan-XXXXXX");
  if (!mkdtemp(g_dir)) return false;
  size_t n0 = 0, n1 = 0;
  unsigned char *m0 = lower("vk0", kExpAddMlir, &n0), *m1 = lower("vk1", kNegMlir, &n1);
  /* vk2: vk1 with 2x for -x, so that a test sees which of the two ran */
  char *twice_mlir = malloc(sizeof kNegMlir + 64), *to = twice_mlir;
  for (const char *from = kNegMlir; *from;) {
    if (!strncmp(from, "arith.negf %a", 13)) {
      to += sprintf(to, "arith.addf %%a, %%a");
      from += 13;
    } else {
      *to++ = *from++;
    }
  }
  *to = '\0';
  memcpy(strstr(twice_mlir, "@vk1("), "@vk2(", 5);
  size_t n2 = 0;
  unsigned char *m2 = lower("vk2", twice_mlir, &n2);
  free(twice_mlir);
  if (!m0 || !m1 || !m2) {
    free(m0);
    free(m1);
    free(m2);
    return false;
  }
  g_spirv = malloc(n0 + n1 + n2);
  memcpy(g_spirv, m0, n0);
  memcpy(g_spirv + n0, m1, n1);
  memcpy(g_spirv + n0 + n1, m2, n2);
  g_spirv_size = n0 + n1 + n2;
  g_size0 = n0;
  free(m0);
  free(m1);
  free(m2);
  vlmc_parse_options_t po = {.filename = "program", .first_line = 1};
  EXPECT_OK(vlmc_module_parse(kTableProgram, strlen(kTableProgram), &po, &g_module));
  if (!g_module) return false;
  EXPECT_OK(vlmc_module_verify(g_module));
  char sig1[17], sig2[17];
  kernel_table_signature(g_module, 1, sig1);
  kernel_table_signature(g_module, 2, sig2);
  size_t cap = sizeof kTableTemplate + 128;
  g_table = malloc(cap);
  snprintf(g_table, cap, kTableTemplate, sig1, n0, sig2, n0, n1);
  char variant[1024];
  snprintf(variant, sizeof variant,
           "}},\n {\"symbol\": \"vk2\", \"template\": \"elementwise\", \"signature\": \"%s\","
           " \"inputs\": [\"f32\"], \"output\": \"f32\", \"syms\": [], \"cost\": 1,"
           " \"variant_of\": 1, \"for_devices\": \"cpu\","
           " \"target\": {\"entry\": \"vk2\", \"spirv_offset\": %zu, \"spirv_size\": %zu,"
           " \"workgroup_x\": 32, \"workgroup_y\": 1, \"workgroup_z\": 1, \"units_per_group\": 64,"
           " \"push_words\": 1, \"shared_bytes\": 0, \"features\": \"\"}}],", sig2, n0 + n1, n2);
  const char *end = strstr(g_table, "}}],");
  g_variant_table = malloc(strlen(g_table) + strlen(variant) + 1);
  sprintf(g_variant_table, "%.*s%s%s", (int)(end - g_table), g_table, variant, end + 4);
  return true;
}

typedef struct {
  const char *table;
  const unsigned char *spirv;
  size_t spirv_size;
} artifact_t;

static const void *section(void *ctx, const char *name, size_t *size) {
  const artifact_t *a = ctx;
  if (!strcmp(name, "program")) {
    *size = 1;
    return "x";
  }
  if (!strcmp(name, "kernels.vulkan.json")) {
    *size = strlen(a->table);
    return a->table;
  }
  if (!strcmp(name, "kernels.vulkan")) {
    *size = a->spirv_size;
    return a->spirv;
  }
  *size = 0;
  return NULL;
}

static vlmc_backend_open_params_t open_params(artifact_t *a, uint32_t device) {
  *a = (artifact_t){g_table, g_spirv, g_spirv_size};
  return (vlmc_backend_open_params_t){.source = "test.vlmc", .module = g_module,
                                      .section = section, .section_ctx = a, .threads = 1,
                                      .device = device};
}

static const vlmc_backend_iface_t *vulkan(void) { return vlmc_backend_find("vulkan"); }

/* Runs @k on S rows and checks every element against the host: -exp(x + y), or `factor` *
 * exp(x + y) (a test variant's). */
static void run_and_compare_scaled(vlmc_program_t *p, int64_t rows, float factor) {
  int64_t n = rows * 4;
  float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = (float)(i % 97) * 0.01f;
    y[i] = (float)(i % 13) * -0.02f;
  }
  const int64_t shape[2] = {rows, 4};
  vlmc_tensor_t hx = vlmc_tensor_view(VLMC_DTYPE_F32, 2, shape, x);
  vlmc_tensor_t hy = vlmc_tensor_view(VLMC_DTYPE_F32, 2, shape, y);
  vlmc_rt_value_t args[2], res;
  EXPECT_OK(vlmc_program_import(p, &hx, &args[0]));
  EXPECT_OK(vlmc_program_import(p, &hy, &args[1]));
  vlmc_status_t st = vlmc_program_run(p, "k", args, 2, &res, 1);
  EXPECT_OK(st);
  if (!st) {
    vlmc_tensor_t out;
    EXPECT_OK(vlmc_program_read(p, &res, &out));
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      float want = factor * expf(x[i] + y[i]);
      if (!(fabsf(vlmc_tensor_f32(&out)[i] - want) <= 1e-5f * (1 + fabsf(want)))) ++bad;
    }
    EXPECT_EQ_INT(bad, 0);
    vlmc_tensor_release(&out);
    vlmc_program_release(p, &res);
  }
  free(x);
  free(y);
}

static void run_and_compare(vlmc_program_t *p, int64_t rows) { run_and_compare_scaled(p, rows, -1); }

static void with_backend(uint32_t device, void (*body)(vlmc_backend_t *, vlmc_program_t *)) {
  artifact_t a;
  vlmc_backend_open_params_t bp = open_params(&a, device);
  vlmc_backend_t *b = NULL;
  EXPECT_OK(vulkan()->open(&bp, &b));
  if (!b) return;
  vlmc_program_t *p = NULL;
  EXPECT_OK(vlmc_program_create(g_module, b, NULL, NULL, &p));
  if (p) body(b, p);
  vlmc_program_destroy(p);
  b->iface->destroy(b);
}

static void small_and_grid(vlmc_backend_t *b, vlmc_program_t *p) {
  run_and_compare(p, 3);
  /* 4 * (2^20 + 5) elements: 65537 workgroups of vk0, so a 2-D grid (65535 x 2). */
  run_and_compare(p, (1 << 20) + 5);
  run_and_compare(p, 1);
  vlmc_backend_counters_t c;
  b->iface->counters(b, &c);
  EXPECT_EQ_INT(c.kernel_calls, 6);
  EXPECT_EQ_INT(c.num_kernels, 2);
  EXPECT_TRUE(c.submits >= 3);
  EXPECT_TRUE(c.device_seconds > 0); /* lavapipe has timestamps */
  size_t nt = 0;
  const vlmc_program_transfers_t *t = vlmc_program_transfers(p, &nt);
  EXPECT_EQ_INT(t[0].calls, 3);
}

static void test_dispatch(void) { with_backend(0, small_and_grid); }

static void twice(vlmc_backend_t *b, vlmc_program_t *p) {
  run_and_compare(p, 5);
  run_and_compare(p, 70);
}

/* Without VK_KHR_push_descriptor: one descriptor set per dispatch from a pool per batch. */
static void test_descriptor_pools(void) {
  setenv("VLMC_VULKAN_NO_PUSH_DESCRIPTOR", "1", 1);
  with_backend(0, twice);
  unsetenv("VLMC_VULKAN_NO_PUSH_DESCRIPTOR");
}

static void once(vlmc_backend_t *b, vlmc_program_t *p) { run_and_compare(p, 2); }

/* The one pipelines-*.bin under dir/vlmc, or "" */
static void find_cache(const char *dir, char *out, size_t size) {
  char sub[512];
  snprintf(sub, sizeof sub, "%s/vlmc", dir);
  out[0] = '\0';
  DIR *d = opendir(sub);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));)
    if (!strncmp(e->d_name, "pipelines-", 10)) snprintf(out, size, "%s/%s", sub, e->d_name);
  closedir(d);
}

static bool cache_header_valid(const char *path) {
  size_t n = 0;
  unsigned char *data = read_bytes(path, &n);
  /* header size 32, VK_PIPELINE_CACHE_HEADER_VERSION_ONE (1) */
  bool ok = data && n >= 32 && data[0] == 32 && data[4] == 1;
  free(data);
  return ok;
}

static void test_pipeline_cache(void) {
  char cache_home[300], path[1024];
  snprintf(cache_home, sizeof cache_home, "%s/cache", g_dir);
  setenv("XDG_CACHE_HOME", cache_home, 1);
  with_backend(0, once);
  find_cache(cache_home, path, sizeof path);
  EXPECT_TRUE(path[0] && cache_header_valid(path));
  with_backend(0, once); /* from the cache */
  /* A corrupt cache: ignored (one warning) and rewritten. */
  EXPECT_TRUE(write_text(path, "not a pipeline cache, just forty bytes of text"));
  EXPECT_TRUE(!cache_header_valid(path));
  with_backend(0, once);
  EXPECT_TRUE(cache_header_valid(path));
  unsetenv("XDG_CACHE_HOME");
}

static void test_open_errors(void) {
  artifact_t a;
  vlmc_backend_open_params_t bp = open_params(&a, 999);
  vlmc_backend_t *b = NULL;
  EXPECT_ERROR(vulkan()->open(&bp, &b), "--device 999: ");
  EXPECT_TRUE(b == NULL);
  setenv("VLMC_VULKAN_LOADER", "/nonexistent/libvulkan.so.1", 1);
  bp = open_params(&a, 0);
  EXPECT_ERROR(vulkan()->open(&bp, &b), "not found");
  unsetenv("VLMC_VULKAN_LOADER");
  /* check needs no device: a valid artifact passes even without a loader. */
  setenv("VLMC_VULKAN_LOADER", "/nonexistent/libvulkan.so.1", 1);
  EXPECT_OK(vulkan()->check(&bp));
  unsetenv("VLMC_VULKAN_LOADER");
  /* A table whose LocalSize disagrees with its module is refused before any device work. */
  char *bad = strdup(g_table);
  char *at = strstr(bad, "\"workgroup_x\": 64");
  memcpy(at, "\"workgroup_x\": 16", 17);
  a.table = bad;
  EXPECT_ERROR(vulkan()->check(&bp), "LocalSize 64 x 1 x 1, the table says 16 x 1 x 1");
  EXPECT_ERROR(vulkan()->open(&bp, &b), "LocalSize 64 x 1 x 1");
  free(bad);
  /* A device lacking a feature a kernel lists is refused by name, before any pipeline. */
  const char *old = "\"features\": \"\"";
  char *f16 = malloc(strlen(g_table) + 32);
  at = strstr(g_table, old);
  sprintf(f16, "%.*s\"features\": \"shaderFloat16\"%s", (int)(at - g_table), g_table,
          at + strlen(old));
  a.table = f16;
  EXPECT_OK(vulkan()->check(&bp));
  setenv("VLMC_VULKAN_HIDE_FEATURES", "shaderFloat16", 1);
  EXPECT_ERROR(vulkan()->open(&bp, &b), "lacks shaderFloat16, needed by kernel vk0 "
               "(elementwise); recompile with --precision f32");
  unsetenv("VLMC_VULKAN_HIDE_FEATURES");
  free(f16);
}

/* Runs @k with the variant table and kernel_variants `variants`; expects vk1's result (-1)
 * or its variant vk2's (2). */
static void expect_variant(const char *variants, float factor) {
  artifact_t a;
  vlmc_backend_open_params_t bp = open_params(&a, 0);
  a.table = g_variant_table;
  bp.kernel_variants = variants;
  vlmc_backend_t *b = NULL;
  EXPECT_OK(vulkan()->open(&bp, &b));
  if (!b) return;
  vlmc_program_t *p = NULL;
  EXPECT_OK(vlmc_program_create(g_module, b, NULL, NULL, &p));
  if (p) run_and_compare_scaled(p, 70, factor);
  vlmc_program_destroy(p);
  b->iface->destroy(b);
}

/* A main kernel runs as its variant exactly where the device class matches and the device
 * has what the variant needs; "main" and other classes run the main kernel. */
static void test_variants(void) {
  expect_variant("main", -1);
  expect_variant("cpu", 2);
  expect_variant("gpu", -1);
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  EXPECT_OK(vulkan()->list_devices(&text));
  bool cpu_device = strstr(vlmc_strbuf_cstr(&text), "0: llvmpipe") != NULL;
  vlmc_strbuf_deinit(&text);
  expect_variant(NULL, cpu_device ? 2 : -1); /* the device's own class */
  setenv("VLMC_KERNEL_VARIANTS", "main", 1);
  expect_variant(NULL, -1);
  unsetenv("VLMC_KERNEL_VARIANTS");
  /* A variant the device cannot run leaves the main kernel in place, without an error. */
  char *needs_f16 = strdup(g_variant_table);
  char *at = strstr(needs_f16, "\"symbol\": \"vk2\"");
  at = strstr(at, "\"features\": \"\"");
  char *edited = malloc(strlen(needs_f16) + 32);
  sprintf(edited, "%.*s\"features\": \"shaderFloat16\"%s", (int)(at - needs_f16), needs_f16,
          at + strlen("\"features\": \"\""));
  char *saved = g_variant_table;
  g_variant_table = edited;
  setenv("VLMC_VULKAN_HIDE_FEATURES", "shaderFloat16", 1);
  expect_variant("cpu", -1);
  unsetenv("VLMC_VULKAN_HIDE_FEATURES");
  expect_variant("cpu", 2);
  g_variant_table = saved;
  free(edited);
  free(needs_f16);
}

static const void *named_sections(void *ctx, const char *name, size_t *size) {
  for (const char *const *p = ctx; *p; ++p)
    if (!strcmp(*p, name)) {
      *size = 1;
      return "x";
    }
  *size = 0;
  return NULL;
}

/* cpu stays first: vulkan is the default only for an artifact without cpu kernels. */
static void test_registry(void) {
  const char *vulkan_only[] = {"program", "kernels.vulkan", "kernels.vulkan.json", NULL};
  const char *both[] = {"program", "kernels.cpu", "kernels.cpu.json", "kernels.vulkan",
                        "kernels.vulkan.json", NULL};
  const vlmc_backend_iface_t *pick = vlmc_backend_pick_default(named_sections, vulkan_only);
  EXPECT_STREQ(pick ? pick->name : "none", "vulkan");
  pick = vlmc_backend_pick_default(named_sections, both);
  EXPECT_STREQ(pick ? pick->name : "none", "cpu");
  EXPECT_TRUE(vlmc_backend_not_built("vulkan") == NULL);
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  EXPECT_OK(vulkan()->list_devices(&text));
  EXPECT_TRUE(strstr(vlmc_strbuf_cstr(&text), "0: ") != NULL);
  vlmc_strbuf_deinit(&text);
}

static void cleanup(void) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (g_dir[0] && system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", g_dir);
  free(g_spirv);
  free(g_table);
  free(g_variant_table);
  vlmc_module_destroy(g_module);
}

int main(void) {
  RUN_TEST(test_registry);
  if (!setup()) {
    fprintf(stderr, "test_vulkan_backend: mlir-opt-19 / mlir-translate-19 not usable: the "
            "dispatch tests need them to make SPIR-V\n");
    cleanup();
    return TEST_SUMMARY();
  }
  RUN_TEST(test_dispatch);
  RUN_TEST(test_descriptor_pools);
  RUN_TEST(test_pipeline_cache);
  RUN_TEST(test_open_errors);
  RUN_TEST(test_variants);
  cleanup();
  return TEST_SUMMARY();
}

#else

/* A build without the backend says why, by name. */
static void test_not_built(void) {
  EXPECT_TRUE(vlmc_backend_find("vulkan") == NULL);
  const char *why = vlmc_backend_not_built("vulkan");
  EXPECT_TRUE(why && strstr(why, "vulkan/vulkan.h"));
}

int main(void) {
  RUN_TEST(test_not_built);
  printf("vulkan backend not built: only its absence is checked\n");
  return TEST_SUMMARY();
}

#endif
