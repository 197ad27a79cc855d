/* The cpu kernels' ELF loader (runtime/backends/cpu/elf_loader.h) on real shared objects,
 * built here with the system C compiler the way the cpu target links kernels (`cc -shared
 * -nostartfiles -fPIC ... -lm`), and on each hostile thing an edited, resealed artifact could
 * plant: a constructor (refused, and it must not run: it would write a marker file), a
 * destructor, imports of abort, system, dlopen and mprotect, a foreign shared object, every
 * truncation, forged program headers, dynamic tags and relocations, and flipped bytes (refused
 * or loaded safely, never a crash; this file runs under ASan+UBSan too). A good image loads,
 * its entry points run with W^X pages, and the cpu backend's `check` and `open` go through
 * the same loader. */
#define _GNU_SOURCE
#include <elf.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/ir.h"
#include "runtime/backend.h"
#include "runtime/backends/cpu/elf_loader.h"
#include "support/file.h"
#include "tests/unit/kernel_table_util.h"
#include "tests/unit/test.h"

static const char kOrigin[] = "t.vlmc: section 'kernels.cpu'";
static char g_dir[] = "/tmp/vlmc-elf-test-XXXXXX";

typedef void (*kernel_fn)(void *const *buffers, const int64_t *counts, int64_t lo, int64_t hi);

typedef struct {
  unsigned char *data;
  size_t len;
} bytes_t;

/* The kernel ABI (docs/artifact.md), a call into libm and memset, a data pointer (an
 * R_X86_64_RELATIVE), a call through the PLT to a function of the image itself, bss, and an
 * exported variable that is not an entry point. vk0 and vk1 are the names the kernel table
 * of tests/unit/kernel_table_util.h uses. */
static const char kGoodSource[] =
    "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n"
    "static float scale_value = 2.0f;\n"
    "float *const scale = &scale_value;\n"
    "static char zeros[65536];\n"
    "int not_a_function = 3;\n"
    "void vk0(void *const *b, const int64_t *c, int64_t lo, int64_t hi) {\n"
    "  const float *x = b[0], *y = b[1]; float *out = b[2];\n"
    "  for (int64_t i = lo; i < hi; ++i) out[i] = expf(x[i] + y[i]) + zeros[i % 65536];\n"
    "}\n"
    "void vk1(void *const *b, const int64_t *c, int64_t lo, int64_t hi) {\n"
    "  float *out = b[1];\n"
    "  memset(out, 0, (size_t)c[1] * sizeof *out);\n"
    "  vk0(b, c, lo, lo);\n"
    "  for (int64_t i = lo; i < hi; ++i) out[i] = -((const float *)b[0])[i] * *scale;\n"
    "}\n";

/* ---- building shared objects ---- */

static char *path_in_dir(const char *name) {
  static char paths[8][512];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, sizeof paths[0], "%s/%s", g_dir, name);
  return p;
}

static bytes_t read_exact(const char *path) {
  bytes_t b = {NULL, 0};
  char *data = NULL;
  vlmc_status_t st = vlmc_file_read_all(path, &data, &b.len);
  if (st) {
    vlmc_status_free(st);
    return b;
  }
  b.data = malloc(b.len ? b.len : 1);
  if (b.data) memcpy(b.data, data, b.len);
  free(data);
  return b;
}

/* `cc -shared -nostartfiles -fPIC -O2 NAME.c -o NAME.so -lm EXTRA`; the bytes in an
 * exact-size buffer so that ASan sees a read one past the end. Without the stack protector
 * and fortified string calls some distributions turn on by default: they would add imports
 * (__stack_chk_fail, __memset_chk) the generated kernels never have. */
static bytes_t build(const char *name, const char *source, const char *extra) {
  bytes_t b = {NULL, 0};
  char src[512], so[512], cmd[2048];
  snprintf(src, sizeof src, "%s/%s.c", g_dir, name);
  snprintf(so, sizeof so, "%s/%s.so", g_dir, name);
  EXPECT_OK(vlmc_file_write_all(src, source, strlen(source)));
  snprintf(cmd, sizeof cmd,
           "cc -shared -nostartfiles -fPIC -O2 -fno-stack-protector -U_FORTIFY_SOURCE -o %s %s "
           "-lm %s", so, src, extra ? extra : "");
  if (system(cmd) != 0) {
    TEST_FAIL_("'%s' failed", cmd);
    return b;
  }
  return read_exact(so);
}

static bytes_t copy_bytes(bytes_t from, size_t len) {
  bytes_t b = {malloc(len ? len : 1), len};
  if (b.data && len) memcpy(b.data, from.data, len);
  return b;
}

/* Both entry points refuse the bytes with `needle` in the message, naming the section. */
static void expect_refused(bytes_t b, const char *needle) {
  vlmc_elf_image_t *image = NULL;
  EXPECT_ERROR(vlmc_elf_check(kOrigin, b.data, b.len), needle);
  EXPECT_ERROR(vlmc_elf_load(kOrigin, b.data, b.len, &image), needle);
  EXPECT_ERROR(vlmc_elf_check(kOrigin, b.data, b.len), kOrigin);
  EXPECT_TRUE(image == NULL);
  vlmc_elf_unload(image);
}

/* ---- finding things in our own (trusted) test images ---- */

static Elf64_Ehdr header_of(bytes_t b) {
  Elf64_Ehdr h;
  memcpy(&h, b.data, sizeof h);
  return h;
}

/* The offset of the first program header of `type`, or 0. */
static size_t phdr_offset(bytes_t b, uint32_t type) {
  Elf64_Ehdr h = header_of(b);
  for (unsigned i = 0; i < h.e_phnum; ++i) {
    Elf64_Phdr p;
    size_t at = h.e_phoff + i * sizeof p;
    memcpy(&p, b.data + at, sizeof p);
    if (p.p_type == type) return at;
  }
  return 0;
}

static Elf64_Phdr phdr_at(bytes_t b, size_t at) {
  Elf64_Phdr p;
  memcpy(&p, b.data + at, sizeof p);
  return p;
}

/* The file offset of the first section of `type` and its size. */
static size_t section_offset(bytes_t b, uint32_t type, size_t *size) {
  Elf64_Ehdr h = header_of(b);
  for (unsigned i = 0; i < h.e_shnum; ++i) {
    Elf64_Shdr s;
    memcpy(&s, b.data + h.e_shoff + i * sizeof s, sizeof s);
    if (s.sh_type == type) {
      *size = s.sh_size;
      return s.sh_offset;
    }
  }
  *size = 0;
  return 0;
}

/* The file offset of the dynamic entry with `tag`, or 0. */
static size_t dynamic_entry(bytes_t b, int64_t tag) {
  size_t size, at = section_offset(b, SHT_DYNAMIC, &size);
  for (size_t i = 0; at && i < size / sizeof(Elf64_Dyn); ++i) {
    Elf64_Dyn d;
    memcpy(&d, b.data + at + i * sizeof d, sizeof d);
    if (d.d_tag == tag) return at + i * sizeof d;
  }
  return 0;
}

/* ---- tests ---- */

static bytes_t g_good;

static bool mapping_of(const void *address, char perms[5]) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return false;
  char line[1024];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && (uintptr_t)address >= lo &&
        (uintptr_t)address < hi)
      found = true;
  }
  fclose(f);
  return found;
}

static bool any_writable_executable_mapping(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return false;
  char line[1024], perms[5];
  bool found = false;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "%*x-%*x %4s", perms) == 1 && perms[1] == 'w' && perms[2] == 'x')
      found = true;
  fclose(f);
  return found;
}

static void test_good_image_loads_and_runs(void) {
  EXPECT_TRUE(g_good.data != NULL);
  if (!g_good.data) return;
  EXPECT_OK(vlmc_elf_check(kOrigin, g_good.data, g_good.len));
  vlmc_elf_image_t *image = NULL;
  EXPECT_OK(vlmc_elf_load(kOrigin, g_good.data, g_good.len, &image));
  if (!image) return;
  vlmc_elf_fn_t f0 = NULL, f1 = NULL, other = NULL;
  EXPECT_TRUE(vlmc_elf_symbol(image, "vk0", &f0));
  EXPECT_TRUE(vlmc_elf_symbol(image, "vk1", &f1));
  EXPECT_TRUE(!vlmc_elf_symbol(image, "not_a_function", &other)); /* data, not code */
  EXPECT_TRUE(!vlmc_elf_symbol(image, "expf", &other));           /* an import */
  EXPECT_TRUE(!vlmc_elf_symbol(image, "vk2", &other));
  char perms[5] = "";
  EXPECT_TRUE(f0 && mapping_of((const void *)(uintptr_t)f0, perms));
  EXPECT_STREQ(perms, "r-xp");
  EXPECT_TRUE(!any_writable_executable_mapping());
  float x[5] = {0, 1, -1, 0.5f, 3}, y[5] = {1, 0, 2, 0.25f, -3}, out[5];
  void *buffers[3] = {x, y, out};
  int64_t counts[3] = {5, 5, 5};
  if (f0) ((kernel_fn)f0)(buffers, counts, 0, 5);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(out[i], expf(x[i] + y[i]), 1e-6 * expf(x[i] + y[i]));
  void *buffers1[3] = {x, out, NULL};
  if (f1) ((kernel_fn)f1)(buffers1, counts, 1, 4); /* memset, then scale (a RELATIVE) */
  EXPECT_NEAR(out[0], 0, 0);
  for (int i = 1; i < 4; ++i) EXPECT_NEAR(out[i], -2 * x[i], 0);
  EXPECT_NEAR(out[4], 0, 0);
  vlmc_elf_unload(image);
}

/* The symbol count comes from DT_GNU_HASH (the default), DT_HASH, or both. */
static void test_both_hash_styles_load(void) {
  static const char *const kStyles[] = {"-Wl,--hash-style=sysv", "-Wl,--hash-style=both"};
  for (size_t i = 0; i < 2; ++i) {
    bytes_t b = build(i ? "hash-both" : "hash-sysv", kGoodSource, kStyles[i]);
    vlmc_elf_image_t *image = NULL;
    if (b.data) EXPECT_OK(vlmc_elf_load(kOrigin, b.data, b.len, &image));
    vlmc_elf_fn_t fn = NULL;
    EXPECT_TRUE(image && vlmc_elf_symbol(image, "vk1", &fn) && fn);
    EXPECT_TRUE(!image || !vlmc_elf_symbol(image, "not_a_function", &fn));
    vlmc_elf_unload(image);
    free(b.data);
  }
}

static void test_constructor_is_refused_and_never_runs(void) {
  const char *marker = path_in_dir("constructor-ran");
  char source[1024];
  snprintf(source, sizeof source,
           "#include <stdio.h>\n"
           "__attribute__((constructor)) static void planted(void) {\n"
           "  FILE *f = fopen(\"%s\", \"w\"); if (f) fclose(f);\n}\n"
           "void vk0(void) {}\n",
           marker);
  bytes_t b = build("constructor", source, NULL);
  if (b.data) {
    expect_refused(b, "t.vlmc: section 'kernels.cpu': the kernels have a constructor "
                      "(DT_INIT_ARRAY); refused");
    EXPECT_TRUE(access(marker, F_OK) != 0);
  }
  free(b.data);
  /* -init names a function ld puts in DT_INIT. */
  bytes_t init = build("init", "void planted_init(void) {}\nvoid vk0(void) {}\n",
                       "-Wl,-init,planted_init");
  if (init.data) expect_refused(init, "the kernels have a constructor (DT_INIT); refused");
  free(init.data);
  bytes_t dtor = build("destructor",
                       "volatile int ran;\n"
                       "__attribute__((destructor)) static void planted(void) { ran = 1; }\n"
                       "void vk0(void) {}\n", NULL);
  if (dtor.data) expect_refused(dtor, "the kernels have a destructor (DT_FINI_ARRAY); refused");
  free(dtor.data);
}

static void test_imports_off_the_allowlist_are_refused(void) {
  static const struct {
    const char *name, *call;
  } kCases[] = {
      {"abort", "abort();"},
      {"system", "system(\"touch /tmp/vlmc-elf-system-ran\");"},
      {"dlopen", "dlopen(\"libc.so.6\", RTLD_NOW);"},
      {"mprotect", "mprotect(0, 0, PROT_EXEC);"},
  };
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; ++i) {
    char source[1024], needle[128];
    snprintf(source, sizeof source,
             "#include <dlfcn.h>\n#include <stdint.h>\n#include <stdlib.h>\n"
             "#include <sys/mman.h>\n"
             "void vk0(void *const *b, const int64_t *c, int64_t lo, int64_t hi) { %s }\n",
             kCases[i].call);
    bytes_t b = build(kCases[i].name, source, NULL);
    snprintf(needle, sizeof needle, "the kernels import '%s', which is not on the allowlist",
             kCases[i].name);
    if (b.data) expect_refused(b, needle);
    free(b.data);
  }
  EXPECT_STREQ(vlmc_elf_allowed_import(0), "exp");
  for (size_t i = 0; vlmc_elf_allowed_import(i); ++i) {
    EXPECT_TRUE(strcmp(vlmc_elf_allowed_import(i), "abort") != 0);
    EXPECT_TRUE(strcmp(vlmc_elf_allowed_import(i), "system") != 0);
  }
}

/* Shared objects not made for vlmc: a normally linked one (crt files: DT_INIT) and the
 * system's libm (constructors or imports). */
static void test_foreign_shared_objects_are_refused(void) {
  char cmd[1024];
  const char *so = path_in_dir("with-crt.so"), *src = path_in_dir("with-crt.c");
  static const char kPlain[] = "int f(int x) { return x + 1; }\n";
  EXPECT_OK(vlmc_file_write_all(src, kPlain, strlen(kPlain)));
  snprintf(cmd, sizeof cmd, "cc -shared -fPIC -o %s %s", so, src);
  EXPECT_TRUE(system(cmd) == 0);
  bytes_t crt = read_exact(so);
  EXPECT_TRUE(crt.data != NULL);
  if (crt.data) expect_refused(crt, "constructor (DT_INIT)");
  free(crt.data);
  static const char *const kLibms[] = {"/usr/lib/x86_64-linux-gnu/libm.so.6",
                                       "/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6"};
  for (size_t i = 0; i < 3; ++i) {
    bytes_t libm = read_exact(kLibms[i]);
    if (!libm.data) continue;
    vlmc_status_t st = vlmc_elf_check(kOrigin, libm.data, libm.len);
    EXPECT_TRUE(st != NULL);
    fprintf(stderr, "%s: %s\n", kLibms[i], vlmc_status_message(st));
    vlmc_status_free(st);
    expect_refused(libm, kOrigin);
    free(libm.data);
    break;
  }
}

static void test_every_truncation_is_refused(void) {
  if (!g_good.data) return;
  for (size_t len = 0; len < g_good.len; ++len) {
    bytes_t cut = copy_bytes(g_good, len);
    vlmc_status_t st = vlmc_elf_check(kOrigin, cut.data, cut.len);
    vlmc_elf_image_t *image = NULL;
    vlmc_status_t loaded = vlmc_elf_load(kOrigin, cut.data, cut.len, &image);
    if (!st || !loaded)
      TEST_FAIL_("a truncation to %zu of %zu bytes was accepted", len, g_good.len);
    if (st && !strstr(vlmc_status_message(st), kOrigin))
      TEST_FAIL_("truncation to %zu: '%s' does not name the section", len, vlmc_status_message(st));
    vlmc_status_free(st);
    vlmc_status_free(loaded);
    vlmc_elf_unload(image);
    free(cut.data);
  }
}

/* Forged headers: each edit of the good image, refused by name. */
static void test_forged_headers_are_refused(void) {
  if (!g_good.data) return;
  bytes_t b = copy_bytes(g_good, g_good.len);
  /* the writable PT_LOAD made executable too */
  Elf64_Ehdr h = header_of(b);
  for (unsigned i = 0; i < h.e_phnum; ++i) {
    size_t at = h.e_phoff + i * sizeof(Elf64_Phdr);
    Elf64_Phdr p = phdr_at(b, at);
    if (p.p_type != PT_LOAD || !(p.p_flags & PF_W)) continue;
    p.p_flags |= PF_X;
    memcpy(b.data + at, &p, sizeof p);
    expect_refused(b, "asks to be writable and executable (W+X); refused");
    memcpy(b.data, g_good.data, b.len);
  }
  /* a spare program header turned into PT_INTERP, then PT_TLS */
  size_t spare = phdr_offset(b, PT_GNU_STACK);
  EXPECT_TRUE(spare != 0);
  static const struct {
    uint32_t type;
    const char *needle;
  } kTypes[] = {{PT_INTERP, "program interpreter (PT_INTERP); refused"},
                {PT_TLS, "thread-local storage (PT_TLS); refused"}};
  for (size_t i = 0; spare && i < 2; ++i) {
    memcpy(b.data + spare, &kTypes[i].type, sizeof kTypes[i].type);
    expect_refused(b, kTypes[i].needle);
    memcpy(b.data, g_good.data, b.len);
  }
  /* a dynamic entry turned into DT_TEXTREL, DT_INIT, DT_REL */
  size_t entry = dynamic_entry(b, DT_RELACOUNT);
  if (!entry) entry = dynamic_entry(b, DT_VERSYM);
  EXPECT_TRUE(entry != 0);
  static const struct {
    int64_t tag;
    const char *needle;
  } kTags[] = {{DT_TEXTREL, "text relocations (DT_TEXTREL); refused"},
               {DT_INIT, "constructor (DT_INIT); refused"},
               {DT_FINI, "destructor (DT_FINI); refused"},
               {DT_REL, "REL relocations"},
               {DT_RELR, "packed relocations (DT_RELR)"}};
  for (size_t i = 0; entry && i < sizeof kTags / sizeof kTags[0]; ++i) {
    memcpy(b.data + entry, &kTags[i].tag, sizeof kTags[i].tag);
    expect_refused(b, kTags[i].needle);
    memcpy(b.data, g_good.data, b.len);
  }
  /* the first PLT relocation: an ifunc's (its resolver would run), then one writing into the
   * header's read-only page */
  size_t size, rela = 0;
  Elf64_Ehdr eh = header_of(b);
  for (unsigned i = 0; i < eh.e_shnum && !rela; ++i) {
    Elf64_Shdr s;
    memcpy(&s, b.data + eh.e_shoff + i * sizeof s, sizeof s);
    if (s.sh_type == SHT_RELA && (s.sh_flags & SHF_INFO_LINK)) rela = s.sh_offset; /* .rela.plt */
  }
  if (!rela) rela = section_offset(b, SHT_RELA, &size);
  EXPECT_TRUE(rela != 0);
  if (rela) {
    Elf64_Rela r;
    memcpy(&r, b.data + rela, sizeof r);
    Elf64_Rela irelative = r;
    irelative.r_info = ELF64_R_INFO(0, R_X86_64_IRELATIVE);
    memcpy(b.data + rela, &irelative, sizeof irelative);
    expect_refused(b, "relocation type 37 (R_X86_64_IRELATIVE)");
    Elf64_Rela into_header = r;
    into_header.r_offset = 8;
    memcpy(b.data + rela, &into_header, sizeof into_header);
    expect_refused(b, "outside every writable segment");
    memcpy(b.data, g_good.data, b.len);
  }
  /* not x86-64, not a shared object, big-endian */
  b.data[EI_DATA] = ELFDATA2MSB;
  expect_refused(b, "not little-endian");
  memcpy(b.data, g_good.data, b.len);
  uint16_t exec = ET_EXEC, arm = EM_AARCH64;
  memcpy(b.data + offsetof(Elf64_Ehdr, e_type), &exec, 2);
  expect_refused(b, "not a shared object");
  memcpy(b.data, g_good.data, b.len);
  memcpy(b.data + offsetof(Elf64_Ehdr, e_machine), &arm, 2);
  expect_refused(b, "not x86-64");
  free(b.data);
}

/* One flip of `mask` at `at`: refused by name, or loaded (never called) and unloaded. */
static bool flip_probe(size_t at, unsigned char mask) {
  bytes_t b = copy_bytes(g_good, g_good.len);
  b.data[at] ^= mask;
  vlmc_elf_image_t *image = NULL;
  vlmc_status_t checked = vlmc_elf_check(kOrigin, b.data, b.len);
  vlmc_status_t loaded = vlmc_elf_load(kOrigin, b.data, b.len, &image);
  if (!checked != !loaded)
    TEST_FAIL_("byte %zu ^ 0x%02x: check and load disagree ('%s' vs '%s')", at, mask,
               vlmc_status_message(checked), vlmc_status_message(loaded));
  if (checked && !strstr(vlmc_status_message(checked), kOrigin))
    TEST_FAIL_("byte %zu: '%s' does not name the section", at, vlmc_status_message(checked));
  vlmc_elf_fn_t fn;
  if (image) (void)vlmc_elf_symbol(image, "vk0", &fn);
  bool refused = checked != NULL;
  vlmc_status_free(checked);
  vlmc_status_free(loaded);
  vlmc_elf_unload(image);
  free(b.data);
  return refused;
}

/* Every byte of the header, the program headers and the tables in the first segment
 * (.gnu.hash, .dynsym, .dynstr, versions, relocations) and of the dynamic array, flipped one
 * low and one high bit at a time. */
static void test_flipped_header_bytes_never_crash(void) {
  if (!g_good.data) return;
  size_t first_end = 0, dyn_size = 0, refused = 0, probes = 0;
  size_t load = phdr_offset(g_good, PT_LOAD);
  if (load) first_end = phdr_at(g_good, load).p_filesz;
  size_t dyn = section_offset(g_good, SHT_DYNAMIC, &dyn_size);
  for (size_t at = 0; at < g_good.len; ++at) {
    if (at >= first_end && !(at >= dyn && at < dyn + dyn_size)) continue;
    refused += flip_probe(at, 0x01) + flip_probe(at, 0x80);
    probes += 2;
  }
  EXPECT_TRUE(probes > 1000);
  EXPECT_TRUE(refused > 0 && refused < probes);
  fprintf(stderr, "flipped bytes: %zu probes, %zu refused, %zu loaded safely\n", probes, refused,
          probes - refused);
}

/* ---- through the cpu backend ---- */

typedef struct {
  bytes_t so;
  char *table; /* kernels.cpu.json for kTableProgram (its regions' signatures filled in) */
} sections_t;

static const void *section_of(void *ctx, const char *name, size_t *out_size) {
  const sections_t *s = ctx;
  if (!strcmp(name, "kernels.cpu")) {
    *out_size = s->so.len;
    return s->so.data;
  }
  if (!strcmp(name, "kernels.cpu.json")) {
    *out_size = s->table ? strlen(s->table) : 0;
    return s->table;
  }
  if (!strcmp(name, "program")) {
    *out_size = strlen(kTableProgram);
    return kTableProgram;
  }
  *out_size = 0;
  return NULL;
}

static void test_cpu_backend_check_and_open_use_the_loader(void) {
  vlmc_module_t *module = NULL;
  vlmc_parse_options_t po = {.filename = "program", .first_line = 1};
  EXPECT_OK(vlmc_module_parse(kTableProgram, strlen(kTableProgram), &po, &module));
  if (module) EXPECT_OK(vlmc_module_verify(module));
  const vlmc_backend_iface_t *cpu = vlmc_backend_find("cpu");
  if (!module || !cpu || !g_good.data) return;
  sections_t sections = {g_good, kernel_table_text(module)};
  vlmc_backend_open_params_t p = {.source = "t.vlmc", .module = module, .section = section_of,
                                  .section_ctx = &sections, .threads = 1};
  EXPECT_OK(cpu->check(&p));
  vlmc_backend_t *backend = NULL;
  EXPECT_OK(cpu->open(&p, &backend));
  if (backend) cpu->destroy(backend);

  const char *marker = path_in_dir("backend-constructor-ran");
  char source[1024];
  snprintf(source, sizeof source,
           "#include <stdio.h>\n"
           "__attribute__((constructor)) static void planted(void) {\n"
           "  FILE *f = fopen(\"%s\", \"w\"); if (f) fclose(f);\n}\n"
           "void vk0(void) {}\nvoid vk1(void) {}\n",
           marker);
  sections.so = build("backend-constructor", source, NULL);
  const char *needle = "t.vlmc: section 'kernels.cpu': the kernels have a constructor "
                       "(DT_INIT_ARRAY); refused";
  EXPECT_ERROR(cpu->check(&p), needle);
  backend = NULL;
  EXPECT_ERROR(cpu->open(&p, &backend), needle);
  EXPECT_TRUE(backend == NULL);
  EXPECT_TRUE(access(marker, F_OK) != 0);
  free(sections.so.data);
  free(sections.table);
  vlmc_module_destroy(module);
}

static void remove_dir(void) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
}

int main(void) {
  if (!mkdtemp(g_dir)) {
    perror("mkdtemp");
    return 1;
  }
  g_good = build("good", kGoodSource, NULL);
  RUN_TEST(test_good_image_loads_and_runs);
  RUN_TEST(test_both_hash_styles_load);
  RUN_TEST(test_constructor_is_refused_and_never_runs);
  RUN_TEST(test_imports_off_the_allowlist_are_refused);
  RUN_TEST(test_foreign_shared_objects_are_refused);
  RUN_TEST(test_every_truncation_is_refused);
  RUN_TEST(test_forged_headers_are_refused);
  RUN_TEST(test_flipped_header_bytes_never_crash);
  RUN_TEST(test_cpu_backend_check_and_open_use_the_loader);
  free(g_good.data);
  remove_dir();
  return TEST_SUMMARY();
}
