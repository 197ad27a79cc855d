/* The kernels' ELF loader (runtime/backends/cpu/elf_loader.h). Everything is read from the
 * untrusted bytes with bounds-checked copies (memcpy into <elf.h> structs, no pointer casts
 * into the buffer); the mapping is only ever written, and only at checked offsets.
 *
 * One parse (parse_view) serves both entry points: vlmc_elf_check stops after it, and
 * vlmc_elf_load maps what it validated, so the two cannot disagree about what is accepted. */
#define _GNU_SOURCE
#include "runtime/backends/cpu/elf_loader.h"

#include <elf.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "support/checked_math.h"

enum {
  MAX_PROGRAM_HEADERS = 64,
  MAX_DYNAMIC_ENTRIES = 4096,
  MAX_SYMBOLS = 1 << 20,
  MAX_SEGMENT_ALIGN = 2 << 20, /* the largest max-page-size linkers use on x86-64 */
  NAME_SHOWN = 64,             /* characters of an image's symbol name put in a message */
};

/* ---- the allowlist ---- */

/* What the generated kernels call: libm for what LLVM has no instruction for (expf, erff,
 * tanhf, sincos, and fmaf without FMA hardware), memset/memcpy/memmove for what LLVM turns
 * loops into; plus the obvious math functions a template may start to use. Nothing here can
 * reach the file system, other processes, the dynamic linker or the program's control flow
 * (abort, exit, system, dlopen, mprotect, ... are refused by name). */
typedef struct {
  const char *name;
  vlmc_elf_fn_t address;
} allowed_import_t;

#define MATH(name) {#name, (vlmc_elf_fn_t)name}, {#name "f", (vlmc_elf_fn_t)name##f}
static const allowed_import_t kAllowedImports[] = {
    MATH(exp),   MATH(exp2),  MATH(expm1), MATH(log),   MATH(log2),      MATH(log10),
    MATH(log1p), MATH(pow),   MATH(sqrt),  MATH(cbrt),  MATH(sin),       MATH(cos),
    MATH(sincos), MATH(tan),  MATH(asin),  MATH(acos),  MATH(atan),      MATH(atan2),
    MATH(sinh),  MATH(cosh),  MATH(tanh),  MATH(asinh), MATH(acosh),     MATH(atanh),
    MATH(erf),   MATH(erfc),  MATH(fma),   MATH(fmod),  MATH(floor),     MATH(ceil),
    MATH(round), MATH(trunc), MATH(rint),  MATH(nearbyint), MATH(fabs),  MATH(fmin),
    MATH(fmax),  MATH(copysign),
    {"memcpy", (vlmc_elf_fn_t)memcpy},
    {"memmove", (vlmc_elf_fn_t)memmove},
    {"memset", (vlmc_elf_fn_t)memset},
};
#undef MATH

enum { NUM_ALLOWED_IMPORTS = sizeof kAllowedImports / sizeof kAllowedImports[0] };

const char *vlmc_elf_allowed_import(size_t index) {
  return index < NUM_ALLOWED_IMPORTS ? kAllowedImports[index].name : NULL;
}

static const allowed_import_t *find_allowed_import(const char *name) {
  for (size_t i = 0; i < NUM_ALLOWED_IMPORTS; ++i)
    if (!strcmp(kAllowedImports[i].name, name)) return &kAllowedImports[i];
  return NULL;
}

/* ---- what the parse found ---- */

typedef struct {
  uint64_t vaddr, size, offset; /* a table: where it is in the image and in the file */
  bool present;
} table_t;

typedef struct {
  const char *origin;
  const uint8_t *data;
  size_t len;
  uint64_t page;
  Elf64_Ehdr header;
  Elf64_Phdr loads[MAX_PROGRAM_HEADERS]; /* the PT_LOADs, in address order */
  uint32_t num_loads;
  Elf64_Phdr dynamic, relro;
  bool has_dynamic, has_relro;
  uint64_t lo, hi;  /* the span of the loads, page-rounded */
  uint64_t align;   /* what the mapping's start must be a multiple of */
  table_t symtab, strtab, rela, jmprel, hash, gnu_hash;
  uint64_t num_symbols;
} elf_view_t;

/* ---- messages ---- */

static vlmc_status_t fail(const elf_view_t *v, vlmc_status_code_t code, const char *fmt, ...)
    VLMC_PRINTF(3, 4);

static vlmc_status_t fail(const elf_view_t *v, vlmc_status_code_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlmc_status_t st = vlmc_status_makev(code, fmt, ap);
  va_end(ap);
  return vlmc_status_annotate(st, "%s: ", v->origin);
}

#define MALFORMED(v, ...) fail((v), VLMC_PARSE_ERROR, "not a valid kernels ELF: " __VA_ARGS__)
#define REFUSED(v, ...) fail((v), VLMC_UNSUPPORTED, __VA_ARGS__)

/* Names from the image go into messages: printable ASCII only, and not too much of it. */
static void printable(const char *name, char out[NAME_SHOWN + 4]) {
  size_t n = 0;
  for (; name[n] && n < NAME_SHOWN; ++n)
    out[n] = name[n] >= 0x20 && name[n] < 0x7f ? name[n] : '?';
  if (name[n]) {
    memcpy(out + n, "...", 3);
    n += 3;
  }
  out[n] = '\0';
}

/* ---- bounds ---- */

/* Whether [offset, offset + size) lies inside the bytes. */
static bool in_file(const elf_view_t *v, uint64_t offset, uint64_t size) {
  uint64_t end;
  return vlmc_add_u64(offset, size, &end) && end <= v->len;
}

static uint64_t page_down(const elf_view_t *v, uint64_t x) { return x & ~(v->page - 1); }
/* x must be small enough not to wrap (every address here is below 2^48). */
static uint64_t page_up(const elf_view_t *v, uint64_t x) { return page_down(v, x + v->page - 1); }

/* The PT_LOAD whose memory holds [vaddr, vaddr + size); NULL when none does. */
static const Elf64_Phdr *load_holding(const elf_view_t *v, uint64_t vaddr, uint64_t size) {
  uint64_t end;
  if (!vlmc_add_u64(vaddr, size, &end)) return NULL;
  for (uint32_t i = 0; i < v->num_loads; ++i) {
    const Elf64_Phdr *p = &v->loads[i];
    if (vaddr >= p->p_vaddr && end <= p->p_vaddr + p->p_memsz) return p;
  }
  return NULL;
}

/* Finds a table's file bytes: it must lie in the file part of one PT_LOAD (the bytes that
 * are copied), so that reading it from the file and from the mapping agree. */
static vlmc_status_t locate_table(const elf_view_t *v, const char *what, table_t *t) {
  const Elf64_Phdr *p = load_holding(v, t->vaddr, t->size);
  if (!p || t->vaddr + t->size > p->p_vaddr + p->p_filesz)
    return MALFORMED(v, "%s (0x%llx, %llu bytes) is not inside a loaded segment's file bytes",
                     what, (unsigned long long)t->vaddr, (unsigned long long)t->size);
  t->offset = p->p_offset + (t->vaddr - p->p_vaddr);
  return NULL;
}

/* The file bytes from a table's start to the end of its segment's file part (hash tables
 * carry their own sizes). */
static vlmc_status_t locate_open_table(const elf_view_t *v, const char *what, table_t *t) {
  t->size = 0;
  VLMC_RETURN_IF_ERROR(locate_table(v, what, t));
  const Elf64_Phdr *p = load_holding(v, t->vaddr, 0);
  t->size = p->p_vaddr + p->p_filesz - t->vaddr;
  return NULL;
}

static uint32_t read_u32(const elf_view_t *v, uint64_t offset) {
  uint32_t x;
  memcpy(&x, v->data + offset, sizeof x);
  return x;
}

/* ---- the header ---- */

static vlmc_status_t check_identity(const elf_view_t *v, const Elf64_Ehdr *h) {
  if (memcmp(h->e_ident, ELFMAG, SELFMAG) != 0) return MALFORMED(v, "no ELF magic");
  if (h->e_ident[EI_CLASS] != ELFCLASS64) return MALFORMED(v, "not ELF64");
  if (h->e_ident[EI_DATA] != ELFDATA2LSB) return MALFORMED(v, "not little-endian");
  if (h->e_ident[EI_VERSION] != EV_CURRENT || h->e_version != EV_CURRENT)
    return MALFORMED(v, "ELF version %u", (unsigned)h->e_version);
  if (h->e_ident[EI_OSABI] != ELFOSABI_SYSV && h->e_ident[EI_OSABI] != ELFOSABI_GNU)
    return MALFORMED(v, "OS ABI %u (expected System V or GNU)", h->e_ident[EI_OSABI]);
  if (h->e_machine != EM_X86_64)
    return MALFORMED(v, "machine %u, not x86-64 (%u)", h->e_machine, EM_X86_64);
  if (h->e_type != ET_DYN) return MALFORMED(v, "type %u, not a shared object (ET_DYN)", h->e_type);
  return NULL;
}

static vlmc_status_t check_header_tables(const elf_view_t *v, const Elf64_Ehdr *h) {
  if (h->e_ehsize != sizeof(Elf64_Ehdr)) return MALFORMED(v, "header size %u", h->e_ehsize);
  if (h->e_phentsize != sizeof(Elf64_Phdr))
    return MALFORMED(v, "program header size %u", h->e_phentsize);
  if (h->e_phnum == 0 || h->e_phnum > MAX_PROGRAM_HEADERS)
    return MALFORMED(v, "%u program headers (1 to %d)", h->e_phnum, MAX_PROGRAM_HEADERS);
  if (!in_file(v, h->e_phoff, (uint64_t)h->e_phnum * sizeof(Elf64_Phdr)))
    return MALFORMED(v, "the program headers lie outside the file");
  if (h->e_shnum == 0) {
    /* e_shoff without e_shnum is extended numbering (the count in section 0). */
    if (h->e_shoff != 0) return MALFORMED(v, "extended section numbering");
    return NULL;
  }
  if (h->e_shentsize != sizeof(Elf64_Shdr))
    return MALFORMED(v, "section header size %u", h->e_shentsize);
  if (!in_file(v, h->e_shoff, (uint64_t)h->e_shnum * sizeof(Elf64_Shdr)))
    return MALFORMED(v, "the section headers lie outside the file");
  if (h->e_shstrndx != SHN_UNDEF && h->e_shstrndx >= h->e_shnum)
    return MALFORMED(v, "section name table %u of %u sections", h->e_shstrndx, h->e_shnum);
  return NULL;
}

static vlmc_status_t read_header(elf_view_t *v) {
  if (v->len < sizeof(Elf64_Ehdr))
    return MALFORMED(v, "%zu bytes, shorter than an ELF header", v->len);
  memcpy(&v->header, v->data, sizeof v->header);
  VLMC_RETURN_IF_ERROR(check_identity(v, &v->header));
  return check_header_tables(v, &v->header);
}

/* ---- program headers ---- */

static bool is_power_of_two(uint64_t x) { return x && !(x & (x - 1)); }

static vlmc_status_t check_load(const elf_view_t *v, uint32_t index, const Elf64_Phdr *p) {
  if ((p->p_flags & PF_W) && (p->p_flags & PF_X))
    return REFUSED(v, "program header %u (PT_LOAD) asks to be writable and executable (W+X); "
                   "refused", index);
  if (p->p_filesz > p->p_memsz)
    return MALFORMED(v, "program header %u (PT_LOAD) has more file bytes than memory", index);
  if (!in_file(v, p->p_offset, p->p_filesz))
    return MALFORMED(v, "program header %u (PT_LOAD) lies outside the file", index);
  if (p->p_align > 1 && (!is_power_of_two(p->p_align) || p->p_align > MAX_SEGMENT_ALIGN))
    return MALFORMED(v, "program header %u (PT_LOAD) has alignment 0x%llx", index,
                     (unsigned long long)p->p_align);
  if (p->p_vaddr >= VLMC_ELF_MAX_SPAN || p->p_memsz > VLMC_ELF_MAX_SPAN)
    return MALFORMED(v, "program header %u (PT_LOAD) reaches beyond %d MiB", index,
                     VLMC_ELF_MAX_SPAN >> 20);
  return NULL;
}

/* Loads come in address order and never share a page: each page gets one segment's
 * protection. */
static vlmc_status_t add_load(elf_view_t *v, uint32_t index, const Elf64_Phdr *p) {
  VLMC_RETURN_IF_ERROR(check_load(v, index, p));
  /* ld leaves an empty one where a segment's sections are all empty (kernels without
   * constants): nothing to map, nor a page to claim. */
  if (p->p_memsz == 0) return NULL;
  if (v->num_loads) {
    const Elf64_Phdr *prev = &v->loads[v->num_loads - 1];
    if (page_down(v, p->p_vaddr) < page_up(v, prev->p_vaddr + prev->p_memsz))
      return MALFORMED(v, "program header %u (PT_LOAD) overlaps the one before it or shares a "
                       "page with it", index);
  }
  v->loads[v->num_loads++] = *p;
  if (p->p_align > v->align) v->align = p->p_align;
  return NULL;
}

static vlmc_status_t add_program_header(elf_view_t *v, uint32_t index, const Elf64_Phdr *p) {
  switch (p->p_type) {
    case PT_LOAD: return add_load(v, index, p);
    case PT_INTERP:
      return REFUSED(v, "the kernels ask for a program interpreter (PT_INTERP); refused");
    case PT_TLS: return REFUSED(v, "the kernels have thread-local storage (PT_TLS); refused");
    case PT_DYNAMIC:
      if (v->has_dynamic) return MALFORMED(v, "two PT_DYNAMIC program headers");
      if (!in_file(v, p->p_offset, p->p_filesz))
        return MALFORMED(v, "program header %u (PT_DYNAMIC) lies outside the file", index);
      v->dynamic = *p;
      v->has_dynamic = true;
      return NULL;
    case PT_GNU_RELRO:
      if (v->has_relro) return MALFORMED(v, "two PT_GNU_RELRO program headers");
      v->relro = *p;
      v->has_relro = true;
      return NULL;
    default: return NULL; /* notes, the stack, eh_frame, properties: nothing to load */
  }
}

/* The span of the loads, and RELRO inside a writable one (it is made read-only after the
 * relocations: the GOT cannot be changed by a kernel afterwards). */
static vlmc_status_t check_layout(elf_view_t *v) {
  if (!v->num_loads) return MALFORMED(v, "no PT_LOAD program header");
  const Elf64_Phdr *last = &v->loads[v->num_loads - 1];
  v->lo = page_down(v, v->loads[0].p_vaddr);
  v->hi = page_up(v, last->p_vaddr + last->p_memsz);
  if (v->hi - v->lo > VLMC_ELF_MAX_SPAN)
    return MALFORMED(v, "the segments span %llu bytes, more than %d MiB",
                     (unsigned long long)(v->hi - v->lo), VLMC_ELF_MAX_SPAN >> 20);
  if (v->has_relro) {
    const Elf64_Phdr *p = load_holding(v, v->relro.p_vaddr, v->relro.p_memsz);
    if (!p || !(p->p_flags & PF_W))
      return MALFORMED(v, "PT_GNU_RELRO is not inside a writable PT_LOAD");
  }
  return NULL;
}

static vlmc_status_t read_program_headers(elf_view_t *v) {
  for (uint32_t i = 0; i < v->header.e_phnum; ++i) {
    Elf64_Phdr p;
    memcpy(&p, v->data + v->header.e_phoff + (uint64_t)i * sizeof p, sizeof p);
    VLMC_RETURN_IF_ERROR(add_program_header(v, i, &p));
  }
  return check_layout(v);
}

/* ---- the dynamic array ---- */

typedef struct {
  uint64_t init_array_size, fini_array_size, preinit_array_size;
  uint64_t rel_size, relr_size;
  uint64_t pltrel;
  bool has_pltrel, has_rel, has_relr, has_init_array, has_fini_array, has_preinit_array;
  bool seen[64]; /* the standard tags below 64 seen so far: a second one is refused */
} dynamic_t;

static const char *constructor_tag_name(int64_t tag) {
  switch (tag) {
    case DT_INIT: return "DT_INIT";
    case DT_FINI: return "DT_FINI";
    default: return NULL;
  }
}

static void set_address(table_t *t, uint64_t vaddr) {
  t->vaddr = vaddr;
  t->present = true;
}

/* The tags that record an address or a size; false for the rest. */
static bool record_table_tag(elf_view_t *v, dynamic_t *d, const Elf64_Dyn *e) {
  uint64_t x = e->d_un.d_val;
  switch (e->d_tag) {
    case DT_SYMTAB: set_address(&v->symtab, x); return true;
    case DT_STRTAB: set_address(&v->strtab, x); return true;
    case DT_STRSZ: v->strtab.size = x; return true;
    case DT_RELA: set_address(&v->rela, x); return true;
    case DT_RELASZ: v->rela.size = x; return true;
    case DT_JMPREL: set_address(&v->jmprel, x); return true;
    case DT_PLTRELSZ: v->jmprel.size = x; return true;
    case DT_HASH: set_address(&v->hash, x); return true;
    case DT_PLTREL:
      d->pltrel = x;
      d->has_pltrel = true;
      return true;
    case DT_INIT_ARRAY: d->has_init_array = true; return true;
    case DT_INIT_ARRAYSZ: d->init_array_size = x; return true;
    case DT_FINI_ARRAY: d->has_fini_array = true; return true;
    case DT_FINI_ARRAYSZ: d->fini_array_size = x; return true;
    case DT_PREINIT_ARRAY: d->has_preinit_array = true; return true;
    case DT_PREINIT_ARRAYSZ: d->preinit_array_size = x; return true;
    case DT_REL: d->has_rel = true; return true;
    case DT_RELSZ: d->rel_size = x; return true;
    case DT_RELR: d->has_relr = true; return true;
    case DT_RELRSZ: d->relr_size = x; return true;
    default: return false;
  }
}

static vlmc_status_t read_dynamic_entry(elf_view_t *v, dynamic_t *d, const Elf64_Dyn *e) {
  const char *ctor = constructor_tag_name(e->d_tag);
  if (ctor)
    return REFUSED(v, "the kernels have a %s (%s); refused",
                   e->d_tag == DT_INIT ? "constructor" : "destructor", ctor);
  if (e->d_tag == DT_TEXTREL ||
      (e->d_tag == DT_FLAGS && (e->d_un.d_val & DF_TEXTREL)))
    return REFUSED(v, "the kernels need text relocations (DT_TEXTREL); refused");
  if (e->d_tag == DT_FLAGS && (e->d_un.d_val & DF_STATIC_TLS))
    return REFUSED(v, "the kernels have thread-local storage (DF_STATIC_TLS); refused");
  if (e->d_tag == DT_RELAENT && e->d_un.d_val != sizeof(Elf64_Rela))
    return MALFORMED(v, "DT_RELAENT %llu", (unsigned long long)e->d_un.d_val);
  if (e->d_tag == DT_SYMENT && e->d_un.d_val != sizeof(Elf64_Sym))
    return MALFORMED(v, "DT_SYMENT %llu", (unsigned long long)e->d_un.d_val);
  if (e->d_tag == DT_GNU_HASH) {
    if (v->gnu_hash.present) return MALFORMED(v, "two DT_GNU_HASH entries");
    set_address(&v->gnu_hash, e->d_un.d_val);
    return NULL;
  }
  if (e->d_tag >= 0 && e->d_tag < 64 && record_table_tag(v, d, e)) {
    /* ld.so takes the last of two; a second one here is a forged image. */
    if (d->seen[e->d_tag])
      return MALFORMED(v, "dynamic tag %lld appears twice", (long long)e->d_tag);
    d->seen[e->d_tag] = true;
  }
  /* Everything else (DT_NEEDED, versions, DT_FLAGS_1, ...) only matters to ld.so. */
  return NULL;
}

/* What the whole array says, once it is read: no code to run at load, RELA only. */
static vlmc_status_t check_dynamic(const elf_view_t *v, const dynamic_t *d) {
  if (d->has_preinit_array && d->preinit_array_size)
    return REFUSED(v, "the kernels have a constructor (DT_PREINIT_ARRAY); refused");
  if (d->has_init_array && d->init_array_size)
    return REFUSED(v, "the kernels have a constructor (DT_INIT_ARRAY); refused");
  if (d->has_fini_array && d->fini_array_size)
    return REFUSED(v, "the kernels have a destructor (DT_FINI_ARRAY); refused");
  if (d->has_rel || d->rel_size)
    return REFUSED(v, "the kernels have REL relocations (DT_REL; x86-64 uses RELA); refused");
  if (d->has_relr || d->relr_size)
    return REFUSED(v, "the kernels have packed relocations (DT_RELR); refused");
  if (d->has_pltrel && d->pltrel != DT_RELA)
    return MALFORMED(v, "DT_PLTREL %llu (expected DT_RELA)", (unsigned long long)d->pltrel);
  return NULL;
}

static vlmc_status_t read_dynamic(elf_view_t *v) {
  if (!v->has_dynamic) return MALFORMED(v, "no PT_DYNAMIC program header");
  dynamic_t d;
  memset(&d, 0, sizeof d);
  uint64_t count = v->dynamic.p_filesz / sizeof(Elf64_Dyn);
  if (count > MAX_DYNAMIC_ENTRIES) count = MAX_DYNAMIC_ENTRIES;
  for (uint64_t i = 0; i < count; ++i) {
    Elf64_Dyn e;
    memcpy(&e, v->data + v->dynamic.p_offset + i * sizeof e, sizeof e);
    if (e.d_tag == DT_NULL) return check_dynamic(v, &d);
    VLMC_RETURN_IF_ERROR(read_dynamic_entry(v, &d, &e));
  }
  return MALFORMED(v, "the dynamic array has no DT_NULL within %llu entries",
                   (unsigned long long)count);
}

/* ---- symbols ---- */

/* DT_HASH's nchain is the number of symbols. */
static vlmc_status_t count_from_hash(const elf_view_t *v, uint64_t *out) {
  if (v->hash.size < 8) return MALFORMED(v, "DT_HASH is cut short");
  uint64_t nbucket = read_u32(v, v->hash.offset), nchain = read_u32(v, v->hash.offset + 4);
  if (8 + 4 * (nbucket + nchain) > v->hash.size) return MALFORMED(v, "DT_HASH is cut short");
  *out = nchain;
  return NULL;
}

/* DT_GNU_HASH does not store the count: it is one past the last symbol of the longest-indexed
 * chain (the chain's last entry has its low bit set). Symbols below symoffset are unhashed. */
static vlmc_status_t count_from_gnu_hash(const elf_view_t *v, uint64_t *out) {
  const table_t *t = &v->gnu_hash;
  if (t->size < 16) return MALFORMED(v, "DT_GNU_HASH is cut short");
  uint64_t nbuckets = read_u32(v, t->offset), symoffset = read_u32(v, t->offset + 4);
  uint64_t bloom_words = read_u32(v, t->offset + 8);
  uint64_t buckets = 16 + 8 * bloom_words, chains = buckets + 4 * nbuckets;
  if (chains > t->size) return MALFORMED(v, "DT_GNU_HASH is cut short");
  uint64_t last = 0;
  for (uint64_t i = 0; i < nbuckets; ++i) {
    uint64_t first = read_u32(v, t->offset + buckets + 4 * i);
    if (first && first < symoffset)
      return MALFORMED(v, "DT_GNU_HASH bucket %llu", (unsigned long long)i);
    if (first > last) last = first;
  }
  if (!last) {
    *out = symoffset;
    return NULL;
  }
  for (;; ++last) {
    uint64_t at = chains + 4 * (last - symoffset);
    if (last >= MAX_SYMBOLS || at + 4 > t->size) return MALFORMED(v, "DT_GNU_HASH is cut short");
    if (read_u32(v, t->offset + at) & 1) break;
  }
  *out = last + 1;
  return NULL;
}

static vlmc_status_t locate_symbols(elf_view_t *v) {
  if (!v->symtab.present || !v->strtab.present)
    return MALFORMED(v, "no dynamic symbol table (DT_SYMTAB, DT_STRTAB)");
  if (v->strtab.size == 0) return MALFORMED(v, "an empty string table (DT_STRSZ)");
  VLMC_RETURN_IF_ERROR(locate_table(v, "the string table", &v->strtab));
  if (v->hash.present) {
    VLMC_RETURN_IF_ERROR(locate_open_table(v, "DT_HASH", &v->hash));
    VLMC_RETURN_IF_ERROR(count_from_hash(v, &v->num_symbols));
  } else if (v->gnu_hash.present) {
    VLMC_RETURN_IF_ERROR(locate_open_table(v, "DT_GNU_HASH", &v->gnu_hash));
    VLMC_RETURN_IF_ERROR(count_from_gnu_hash(v, &v->num_symbols));
  } else {
    return MALFORMED(v, "no symbol hash table (DT_HASH or DT_GNU_HASH)");
  }
  if (v->num_symbols > MAX_SYMBOLS)
    return MALFORMED(v, "%llu symbols", (unsigned long long)v->num_symbols);
  v->symtab.size = v->num_symbols * sizeof(Elf64_Sym);
  return locate_table(v, "the symbol table", &v->symtab);
}

static Elf64_Sym read_symbol(const elf_view_t *v, uint64_t index) {
  Elf64_Sym s;
  memcpy(&s, v->data + v->symtab.offset + index * sizeof s, sizeof s);
  return s;
}

/* A symbol's name, NUL-terminated inside the string table; NULL when it is not. */
static const char *symbol_name(const elf_view_t *v, const Elf64_Sym *s) {
  if (s->st_name >= v->strtab.size) return NULL;
  const char *name = (const char *)v->data + v->strtab.offset + s->st_name;
  return memchr(name, '\0', v->strtab.size - s->st_name) ? name : NULL;
}

static vlmc_status_t check_import(const elf_view_t *v, uint64_t index, const char *name) {
  if (!*name) return MALFORMED(v, "undefined symbol %llu has no name", (unsigned long long)index);
  if (find_allowed_import(name)) return NULL;
  char shown[NAME_SHOWN + 4];
  printable(name, shown);
  return REFUSED(v, "the kernels import '%s', which is not on the allowlist of math and memory "
                 "functions; refused", shown);
}

/* Imports on the allowlist; defined symbols of no kind that runs code at load (an ifunc
 * resolver) or needs thread-local storage. */
static vlmc_status_t check_symbol(const elf_view_t *v, uint64_t index) {
  Elf64_Sym s = read_symbol(v, index);
  const char *name = symbol_name(v, &s);
  if (!name)
    return MALFORMED(v, "symbol %llu has no name in the string table", (unsigned long long)index);
  if (s.st_shndx == SHN_UNDEF) return check_import(v, index, name);
  char shown[NAME_SHOWN + 4];
  printable(name, shown);
  if (ELF64_ST_TYPE(s.st_info) == STT_GNU_IFUNC)
    return REFUSED(v, "symbol '%s' is an ifunc (its resolver would run at load); refused", shown);
  if (ELF64_ST_TYPE(s.st_info) == STT_TLS)
    return REFUSED(v, "symbol '%s' is thread-local (STT_TLS); refused", shown);
  return NULL;
}

static vlmc_status_t check_symbols(const elf_view_t *v) {
  for (uint64_t i = 1; i < v->num_symbols; ++i) VLMC_RETURN_IF_ERROR(check_symbol(v, i));
  return NULL;
}

/* ---- relocations ---- */

static const char *relocation_name(uint32_t type) {
  switch (type) {
    case R_X86_64_PC32: return "R_X86_64_PC32";
    case R_X86_64_COPY: return "R_X86_64_COPY";
    case R_X86_64_DTPMOD64: return "R_X86_64_DTPMOD64";
    case R_X86_64_DTPOFF64: return "R_X86_64_DTPOFF64";
    case R_X86_64_TPOFF64: return "R_X86_64_TPOFF64";
    case R_X86_64_IRELATIVE: return "R_X86_64_IRELATIVE";
    case R_X86_64_TLSDESC: return "R_X86_64_TLSDESC";
    default: return "unknown";
  }
}

/* A symbol's address at run time: an allowlisted function of this process, or a defined
 * symbol inside the span (base: where vaddr 0 is mapped; 0 when only checking). */
static vlmc_status_t symbol_address(const elf_view_t *v, uint64_t index, uintptr_t base,
                                    uintptr_t *out) {
  if (index == 0 || index >= v->num_symbols)
    return MALFORMED(v, "a relocation names symbol %llu of %llu", (unsigned long long)index,
                     (unsigned long long)v->num_symbols);
  Elf64_Sym s = read_symbol(v, index);
  const char *name = symbol_name(v, &s); /* checked by check_symbols */
  if (s.st_shndx == SHN_UNDEF) {
    const allowed_import_t *import = find_allowed_import(name);
    if (!import) return check_import(v, index, name);
    *out = (uintptr_t)import->address;
    return NULL;
  }
  if (s.st_shndx >= SHN_LORESERVE || s.st_value < v->lo || s.st_value > v->hi)
    return MALFORMED(v, "a relocation names symbol %llu, which is outside the segments",
                     (unsigned long long)index);
  *out = base + (uintptr_t)s.st_value;
  return NULL;
}

typedef struct {
  uint64_t vaddr; /* where the value goes */
  uint64_t value;
  bool write;
} fixup_t;

/* What one relocation writes where: checked the same way whether it is then applied or not. */
static vlmc_status_t resolve_relocation(const elf_view_t *v, const Elf64_Rela *r, uintptr_t base,
                                        fixup_t *out) {
  uint32_t type = ELF64_R_TYPE(r->r_info);
  uint64_t sym = ELF64_R_SYM(r->r_info);
  out->write = type != R_X86_64_NONE;
  if (!out->write) return NULL;
  if (type != R_X86_64_64 && type != R_X86_64_GLOB_DAT && type != R_X86_64_JUMP_SLOT &&
      type != R_X86_64_RELATIVE)
    return REFUSED(v, "relocation type %u (%s) is not one the kernels use; refused", type,
                   relocation_name(type));
  const Elf64_Phdr *p = load_holding(v, r->r_offset, sizeof(uint64_t));
  if (!p || !(p->p_flags & PF_W))
    return MALFORMED(v, "a relocation writes at 0x%llx, outside every writable segment",
                     (unsigned long long)r->r_offset);
  out->vaddr = r->r_offset;
  if (type == R_X86_64_RELATIVE) {
    out->value = base + (uint64_t)r->r_addend;
    return NULL;
  }
  uintptr_t address = 0;
  VLMC_RETURN_IF_ERROR(symbol_address(v, sym, base, &address));
  out->value = type == R_X86_64_64 ? address + (uint64_t)r->r_addend : address;
  return NULL;
}

static vlmc_status_t locate_relocations(elf_view_t *v, table_t *t, const char *what) {
  if (!t->present) {
    if (t->size) return MALFORMED(v, "%s has a size but no address", what);
    return NULL;
  }
  if (t->size % sizeof(Elf64_Rela))
    return MALFORMED(v, "%s is %llu bytes, not whole entries", what, (unsigned long long)t->size);
  return locate_table(v, what, t);
}

static Elf64_Rela read_relocation(const elf_view_t *v, const table_t *t, uint64_t index) {
  Elf64_Rela r;
  memcpy(&r, v->data + t->offset + index * sizeof r, sizeof r);
  return r;
}

/* Resolves every relocation of both tables; with `map` (the mapping of the span) it also
 * writes them. */
static vlmc_status_t for_each_relocation(const elf_view_t *v, uint8_t *map) {
  const table_t *tables[2] = {&v->rela, &v->jmprel};
  uintptr_t base = map ? (uintptr_t)map - (uintptr_t)v->lo : 0;
  for (int t = 0; t < 2; ++t) {
    if (!tables[t]->present) continue;
    for (uint64_t i = 0; i < tables[t]->size / sizeof(Elf64_Rela); ++i) {
      Elf64_Rela r = read_relocation(v, tables[t], i);
      fixup_t f = {0, 0, false};
      VLMC_RETURN_IF_ERROR(resolve_relocation(v, &r, base, &f));
      if (map && f.write) memcpy(map + (f.vaddr - v->lo), &f.value, sizeof f.value);
    }
  }
  return NULL;
}

/* ---- the parse ---- */

static vlmc_status_t parse_view(const char *origin, const void *data, size_t len, elf_view_t *v) {
  memset(v, 0, sizeof *v);
  v->origin = origin;
  v->data = data;
  v->len = len;
  long page = sysconf(_SC_PAGESIZE);
  v->page = page > 0 && is_power_of_two((uint64_t)page) ? (uint64_t)page : 4096;
  v->align = v->page;
  VLMC_RETURN_IF_ERROR(read_header(v));
  VLMC_RETURN_IF_ERROR(read_program_headers(v));
  VLMC_RETURN_IF_ERROR(read_dynamic(v));
  VLMC_RETURN_IF_ERROR(locate_symbols(v));
  VLMC_RETURN_IF_ERROR(check_symbols(v));
  VLMC_RETURN_IF_ERROR(locate_relocations(v, &v->rela, "DT_RELA"));
  VLMC_RETURN_IF_ERROR(locate_relocations(v, &v->jmprel, "DT_JMPREL"));
  return for_each_relocation(v, NULL);
}

vlmc_status_t vlmc_elf_check(const char *origin, const void *data, size_t len) {
  elf_view_t *v = malloc(sizeof *v);
  if (!v) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_status_t st = parse_view(origin, data, len, v);
  free(v);
  return st;
}

/* ---- the image ---- */

typedef struct {
  uint32_t name; /* offset into the image's copy of the string table */
  vlmc_elf_fn_t fn;
} export_t;

struct vlmc_elf_image_s {
  uint8_t *map;
  size_t map_len;
  char *strings; /* a copy of the string table: the bytes need not outlive the image */
  export_t *exports;
  size_t num_exports;
};

/* An anonymous read-write mapping of the span, its start a multiple of v->align (more than
 * a page only for a segment that asks: map more, trim both ends). */
static vlmc_status_t map_span(const elf_view_t *v, uint8_t **out) {
  size_t span = v->hi - v->lo, extra = v->align - v->page;
  uint8_t *raw = mmap(NULL, span + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
  if (raw == MAP_FAILED)
    return fail(v, VLMC_OUT_OF_MEMORY, "cannot map %zu bytes for the kernels: %s", span,
                strerror(errno));
  uintptr_t start = ((uintptr_t)raw + v->align - 1) & ~(uintptr_t)(v->align - 1);
  size_t head = start - (uintptr_t)raw, tail = extra - head;
  if (head) munmap(raw, head);
  if (tail) munmap((uint8_t *)start + span, tail);
  *out = (uint8_t *)start;
  return NULL;
}

static void copy_segments(const elf_view_t *v, uint8_t *map) {
  for (uint32_t i = 0; i < v->num_loads; ++i) {
    const Elf64_Phdr *p = &v->loads[i];
    if (p->p_filesz) memcpy(map + (p->p_vaddr - v->lo), v->data + p->p_offset, p->p_filesz);
    /* bss: the anonymous mapping is zero already */
  }
}

static int protection_of(uint32_t flags) {
  return (flags & PF_R ? PROT_READ : 0) | (flags & PF_W ? PROT_WRITE : 0) |
         (flags & PF_X ? PROT_EXEC : 0);
}

/* Pages of no segment get no access; each segment its own flags (never W and X: check_load);
 * RELRO read-only, as ld.so leaves it (rounded down at both ends, as ld.so does). */
static vlmc_status_t protect_segments(const elf_view_t *v, uint8_t *map) {
  int failed = mprotect(map, v->hi - v->lo, PROT_NONE);
  for (uint32_t i = 0; !failed && i < v->num_loads; ++i) {
    const Elf64_Phdr *p = &v->loads[i];
    uint64_t from = page_down(v, p->p_vaddr), to = page_up(v, p->p_vaddr + p->p_memsz);
    failed = mprotect(map + (from - v->lo), to - from, protection_of(p->p_flags));
  }
  if (!failed && v->has_relro) {
    uint64_t from = page_down(v, v->relro.p_vaddr);
    uint64_t to = page_down(v, v->relro.p_vaddr + v->relro.p_memsz);
    if (to > from) failed = mprotect(map + (from - v->lo), to - from, PROT_READ);
  }
  if (failed)
    return fail(v, VLMC_IO_ERROR, "cannot protect the kernels' pages: %s", strerror(errno));
  return NULL;
}

/* A defined function inside an executable segment: what the kernel table may name. */
static bool is_entry_point(const elf_view_t *v, const Elf64_Sym *s) {
  unsigned bind = ELF64_ST_BIND(s->st_info);
  if (s->st_shndx == SHN_UNDEF || s->st_shndx >= SHN_LORESERVE) return false;
  if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || (bind != STB_GLOBAL && bind != STB_WEAK))
    return false;
  const Elf64_Phdr *p = load_holding(v, s->st_value, s->st_size ? s->st_size : 1);
  return p && (p->p_flags & PF_X);
}

static vlmc_status_t collect_exports(const elf_view_t *v, const uint8_t *map,
                                     vlmc_elf_image_t *image) {
  image->strings = malloc(v->strtab.size);
  image->exports = calloc(v->num_symbols ? v->num_symbols : 1, sizeof *image->exports);
  if (!image->strings || !image->exports)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  memcpy(image->strings, v->data + v->strtab.offset, v->strtab.size);
  for (uint64_t i = 1; i < v->num_symbols; ++i) {
    Elf64_Sym s = read_symbol(v, i);
    if (!is_entry_point(v, &s)) continue;
    export_t *e = &image->exports[image->num_exports++];
    e->name = s.st_name;
    e->fn = (vlmc_elf_fn_t)(uintptr_t)(map + (s.st_value - v->lo));
  }
  return NULL;
}

static vlmc_status_t map_image(const elf_view_t *v, vlmc_elf_image_t *image) {
  VLMC_RETURN_IF_ERROR(map_span(v, &image->map));
  image->map_len = v->hi - v->lo;
  copy_segments(v, image->map);
  VLMC_RETURN_IF_ERROR(for_each_relocation(v, image->map));
  VLMC_RETURN_IF_ERROR(protect_segments(v, image->map));
  return collect_exports(v, image->map, image);
}

vlmc_status_t vlmc_elf_load(const char *origin, const void *data, size_t len,
                            vlmc_elf_image_t **out) {
  elf_view_t *v = malloc(sizeof *v);
  vlmc_elf_image_t *image = calloc(1, sizeof *image);
  vlmc_status_t st = v && image ? parse_view(origin, data, len, v)
                                : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
#if !defined(__x86_64__)
  if (!st) st = fail(v, VLMC_UNSUPPORTED, "x86-64 kernels cannot run on this machine");
#endif
  if (!st) st = map_image(v, image);
  free(v);
  if (st) {
    vlmc_elf_unload(image);
    return st;
  }
  *out = image;
  return NULL;
}

bool vlmc_elf_symbol(const vlmc_elf_image_t *image, const char *name, vlmc_elf_fn_t *out) {
  for (size_t i = 0; i < image->num_exports; ++i) {
    if (strcmp(image->strings + image->exports[i].name, name) != 0) continue;
    *out = image->exports[i].fn;
    return true;
  }
  return false;
}

void vlmc_elf_unload(vlmc_elf_image_t *image) {
  if (!image) return;
  if (image->map) munmap(image->map, image->map_len);
  free(image->strings);
  free(image->exports);
  free(image);
}
