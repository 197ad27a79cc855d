#define _GNU_SOURCE
#include "runtime/params.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "artifact/validate.h"
#include "frontend/checkpoint.h"
#include "support/file.h"
#include "support/hash.h"

struct vlmc_params_s {
  const vlmc_artifact_t *artifact;
  const vlmc_manifest_t *manifest;
  const vlmc_artifact_section_t *section; /* inline */
  vlmc_st_archive_t *external;            /* external */
  const void **data;                      /* per manifest param, once resolved */
  size_t *first;                          /* per param: the entry whose bytes it shares
                                             (vlmc_manifest_param_aliases), itself if none */
  bool *verified;
  bool resident;                          /* copy each weight into anonymous memory */
  void **copies;                          /* per param: its resident copy, or NULL */
  const char **file;                      /* per param, once resolved: the file holding it */
  uint64_t *file_offset;                  /*   and where, or file NULL (memory only) */
  size_t *copy_bytes;                     /* per param: the copy's mapping length */
  size_t resident_bytes;
};

/* Large copies go in their own mapping, asked to use huge pages (fewer TLB misses while a
 * decode step streams every weight); small ones are plain allocations. */
enum { HUGE_COPY_BYTES = 1 << 21 };

vlmc_status_t vlmc_params_open(const vlmc_artifact_t *artifact, const vlmc_manifest_t *manifest,
                               const char *external_dir, vlmc_params_t **out) {
  *out = NULL;
  const char *path = vlmc_artifact_path(artifact);
  if (manifest->params_external && !external_dir)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "%s: the parameters are external (compiled with --params external): "
                            "give the checkpoint folder with --params DIR", path);
  if (!manifest->params_external && external_dir)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "%s: the parameters are inline; --params %s is not needed", path,
                            external_dir);
  vlmc_params_t *p = calloc(1, sizeof *p);
  size_t n = manifest->num_params ? manifest->num_params : 1;
  if (p) {
    p->data = calloc(n, sizeof *p->data);
    p->verified = calloc(n, sizeof *p->verified);
    p->copies = calloc(n, sizeof *p->copies);
    p->copy_bytes = calloc(n, sizeof *p->copy_bytes);
    p->file = calloc(n, sizeof *p->file);
    p->file_offset = calloc(n, sizeof *p->file_offset);
    p->first = calloc(n, sizeof *p->first);
  }
  if (!p || !p->data || !p->verified || !p->copies || !p->copy_bytes || !p->file ||
      !p->file_offset || !p->first) {
    vlmc_params_destroy(p);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  p->artifact = artifact;
  p->manifest = manifest;
  vlmc_status_t status = vlmc_manifest_param_aliases(manifest, p->first);
  if (!status && manifest->params_external)
    status = vlmc_st_archive_open(external_dir, &p->external);
  else if (!status)
    status = vlmc_artifact_require(artifact, "params", "the inline parameters", &p->section);
  if (status) {
    vlmc_params_destroy(p);
    return status;
  }
  *out = p;
  return NULL;
}

void vlmc_params_destroy(vlmc_params_t *p) {
  if (!p) return;
  for (size_t i = 0; p->copies && i < p->manifest->num_params; ++i) {
    if (!p->copies[i]) continue;
    if (p->copy_bytes[i] >= HUGE_COPY_BYTES) munmap(p->copies[i], p->copy_bytes[i]);
    else free(p->copies[i]);
  }
  vlmc_st_archive_destroy(p->external);
  free(p->data);
  free(p->verified);
  free(p->copies);
  free(p->copy_bytes);
  free(p->file);
  free(p->file_offset);
  free(p->first);
  free(p);
}

void vlmc_params_set_resident(vlmc_params_t *p, bool resident) { p->resident = resident; }
bool vlmc_params_resident(const vlmc_params_t *p) { return p->resident; }
size_t vlmc_params_resident_bytes(const vlmc_params_t *p) { return p->resident_bytes; }

/* Drops the process's pages of [data, data + bytes) of a read-only file mapping (whole pages
 * only): the copy replaces them, the page cache keeps the file, and the resident set stays
 * about one copy of the weights. */
static void release_mapped(const void *data, size_t bytes) {
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return;
  uintptr_t begin = ((uintptr_t)data + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
  uintptr_t end = ((uintptr_t)data + bytes) & ~((uintptr_t)page - 1);
  if (end > begin) madvise((void *)begin, end - begin, MADV_DONTNEED);
}

/* Maps the file pages of [data, data + bytes) in one call before they are read: faulting
 * them in one 4 KiB page at a time made copying a 3B model's weights take ~10 s. A hint:
 * older kernels without MADV_POPULATE_READ (Linux 5.14) just fault as usual. */
static void populate_mapped(const void *data, size_t bytes) {
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return;
  uintptr_t begin = (uintptr_t)data & ~((uintptr_t)page - 1);
  uintptr_t end = ((uintptr_t)data + bytes + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
  if (end > begin) madvise((void *)begin, end - begin, MADV_POPULATE_READ);
}

/* Reads the bytes with pread: the kernel copies from its page cache without mapping each
 * page into this process (13 GB/s here, against ~0.3-1 GB/s faulting a mapping). False when
 * there is no file or it cannot be read; the caller then copies from the mapping. */
static bool read_from_file(const char *path, uint64_t offset, void *out, size_t bytes) {
  if (!path) return false;
  int fd;
  uint64_t size;
  vlmc_status_t st = vlmc_file_open_regular(path, &fd, &size); /* never blocks on a FIFO */
  if (st) {
    vlmc_status_free(st);
    return false;
  }
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = pread(fd, (char *)out + done, bytes - done, (off_t)(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += (size_t)n;
  }
  close(fd);
  return done == bytes;
}

/* Replaces p->data[index] by a copy in anonymous memory (see vlmc_params_set_resident). */
static vlmc_status_t make_resident(vlmc_params_t *p, size_t index, size_t bytes) {
  void *copy;
  if (bytes >= HUGE_COPY_BYTES) {
    copy = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED) copy = NULL;
    else madvise(copy, bytes, MADV_HUGEPAGE); /* a hint: fine if refused */
  } else {
    copy = malloc(bytes ? bytes : 1);
  }
  if (!copy)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory copying parameter '%s' (%zu bytes)",
                            p->manifest->params[index].name, bytes);
  if (!read_from_file(p->file[index], p->file_offset[index], copy, bytes)) {
    populate_mapped(p->data[index], bytes);
    memcpy(copy, p->data[index], bytes);
  }
  release_mapped(p->data[index], bytes);
  p->copies[index] = copy;
  p->copy_bytes[index] = bytes;
  p->data[index] = copy;
  return NULL;
}

static vlmc_status_t resolve_inline(vlmc_params_t *p, const vlmc_manifest_param_t *mp,
                                    const void **out, const char **file, uint64_t *offset) {
  uint64_t end;
  if (__builtin_add_overflow(mp->offset, mp->nbytes, &end) || end > p->section->size)
    return vlmc_status_make(VLMC_PARSE_ERROR,
                            "%s: manifest: parameter '%s' bytes [%llu, +%llu) lie outside the "
                            "params section (%llu bytes)",
                            vlmc_artifact_path(p->artifact), mp->name,
                            (unsigned long long)mp->offset, (unsigned long long)mp->nbytes,
                            (unsigned long long)p->section->size);
  *out = p->section->data + mp->offset;
  if (vlmc_artifact_is_file(p->artifact)) {
    *file = vlmc_artifact_path(p->artifact);
    *offset = p->section->offset + mp->offset;
  }
  return NULL;
}

static vlmc_status_t resolve_external(vlmc_params_t *p, const vlmc_manifest_param_t *mp,
                                      const void **out, const char **file, uint64_t *offset) {
  const vlmc_st_tensor_t *t = vlmc_st_archive_find(p->external, mp->name);
  char other[512];
  for (int k = 0; !t && vlmc_checkpoint_alternate_name_at(mp->name, k, other, sizeof other); ++k)
    t = vlmc_st_archive_find(p->external, other);
  if (!t)
    return vlmc_status_make(VLMC_NOT_FOUND, "--params: tensor '%s' (expected in %s) not found",
                            mp->name, mp->file ? mp->file : "the checkpoint");
  vlmc_dtype_t dtype;
  bool same = vlmc_st_dtype_to_ir(t->dtype, &dtype) && dtype == mp->dtype &&
              (uint32_t)t->rank == mp->rank && t->nbytes == mp->nbytes;
  for (uint32_t i = 0; same && i < mp->rank; ++i) same = t->shape[i] == mp->shape[i];
  if (!same)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "--params: tensor '%s' in %s is %s with %zu bytes; the artifact was "
                            "compiled for %s with %llu bytes (a different checkpoint?)",
                            mp->name, vlmc_st_archive_shard_path(p->external, t->shard),
                            vlmc_st_dtype_name(t->dtype), t->nbytes,
                            vlmc_dtype_info(mp->dtype)->name, (unsigned long long)mp->nbytes);
  *out = t->data;
  if (vlmc_st_archive_file_offset(p->external, t, offset))
    *file = vlmc_st_archive_shard_path(p->external, t->shard);
  return NULL;
}

static vlmc_status_t resolve(vlmc_params_t *p, size_t index);

/* An alias (the same bytes as an earlier entry) takes that entry's bytes, copy and checksum
 * verification: 1,000 names for one tensor hold one resident copy, checked once. */
static vlmc_status_t share_alias(vlmc_params_t *p, size_t index, size_t first) {
  if (p->verified[index]) return NULL;
  VLMC_RETURN_IF_ERROR(resolve(p, first));
  const vlmc_manifest_param_t *mp = &p->manifest->params[index];
  const vlmc_manifest_param_t *fp = &p->manifest->params[first];
  if (mp->checksum != fp->checksum)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: parameter '%s' is the same bytes as '%s' but "
                            "its checksum %016llx differs (%016llx): the artifact is damaged",
                            vlmc_artifact_path(p->artifact), mp->name, fp->name,
                            (unsigned long long)mp->checksum, (unsigned long long)fp->checksum);
  p->data[index] = p->data[first];
  p->verified[index] = true;
  return NULL;
}

static vlmc_status_t resolve(vlmc_params_t *p, size_t index) {
  if (p->first[index] != index) return share_alias(p, index, p->first[index]);
  const vlmc_manifest_param_t *mp = &p->manifest->params[index];
  if (!p->data[index])
    VLMC_RETURN_IF_ERROR(p->external ? resolve_external(p, mp, &p->data[index], &p->file[index],
                                                        &p->file_offset[index])
                                     : resolve_inline(p, mp, &p->data[index], &p->file[index],
                                                      &p->file_offset[index]));
  if (p->verified[index]) return NULL;
  /* The checksum is taken of the bytes the kernels will read: the copy, when there is one. */
  if (p->resident && !p->copies[index])
    VLMC_RETURN_IF_ERROR(make_resident(p, index, (size_t)mp->nbytes));
  uint64_t actual = vlmc_xxh64(p->data[index], (size_t)mp->nbytes, 0);
  if (actual != mp->checksum)
    return vlmc_status_make(VLMC_PARSE_ERROR,
                            "%s: parameter '%s': checksum %016llx, expected %016llx: %s",
                            p->external ? "--params" : vlmc_artifact_path(p->artifact), mp->name,
                            (unsigned long long)actual, (unsigned long long)mp->checksum,
                            p->external ? "the checkpoint differs from the one compiled"
                                        : "the artifact is damaged");
  p->verified[index] = true;
  return NULL;
}

vlmc_status_t vlmc_params_get(vlmc_params_t *p, const char *name, vlmc_param_view_t *out) {
  const vlmc_manifest_param_t *mp = vlmc_manifest_find_param(p->manifest, name);
  if (!mp)
    return vlmc_status_make(VLMC_NOT_FOUND, "%s: the program uses parameter '%s', which the "
                            "manifest does not list", vlmc_artifact_path(p->artifact), name);
  size_t index = (size_t)(mp - p->manifest->params);
  VLMC_RETURN_IF_ERROR(resolve(p, index));
  out->data = p->data[index];
  out->dtype = mp->dtype;
  out->rank = mp->rank;
  out->shape = mp->shape;
  out->nbytes = mp->nbytes;
  return NULL;
}

vlmc_status_t vlmc_params_verify_all(vlmc_params_t *p) {
  return vlmc_params_verify_all_threads(p, 1);
}

typedef struct {
  vlmc_params_t *p;
  uint32_t worker, workers;
  vlmc_status_t status;
  pthread_t thread;
  _Atomic uint64_t *done;       /* bytes verified by all workers */
  uint64_t total;
  vlmc_params_progress_fn progress; /* worker 0 only; NULL: none */
  void *progress_ctx;
} verify_job_t;

/* Worker w takes every workers-th parameter that is not an alias: sizes vary, so
 * interleaving balances better than halves. Workers touch disjoint entries; the aliases,
 * which read their first entry's, are linked after, and resident_bytes summed. */
static void *verify_some(void *arg) {
  verify_job_t *j = arg;
  for (size_t i = j->worker; !j->status && i < j->p->manifest->num_params; i += j->workers) {
    if (j->p->first[i] != i) continue;
    j->status = resolve(j->p, i);
    uint64_t done = atomic_fetch_add(j->done, j->p->manifest->params[i].nbytes) +
                    j->p->manifest->params[i].nbytes;
    if (j->progress) j->progress(j->progress_ctx, done, j->total);
  }
  return NULL;
}

vlmc_status_t vlmc_params_verify_all_threads(vlmc_params_t *p, uint32_t threads) {
  return vlmc_params_verify_all_progress(p, threads, NULL, NULL);
}

vlmc_status_t vlmc_params_verify_all_progress(vlmc_params_t *p, uint32_t threads,
                                              vlmc_params_progress_fn fn, void *ctx) {
  _Atomic uint64_t done = 0;
  uint64_t total = 0;
  for (size_t i = 0; i < p->manifest->num_params; ++i)
    if (p->first[i] == i) total += p->manifest->params[i].nbytes;
  if (threads < 1) threads = 1;
  if (threads > 16) threads = 16;
  verify_job_t jobs[16];
  uint32_t started = 0;
  for (uint32_t w = 0; w < threads; ++w) {
    jobs[w] = (verify_job_t){.p = p, .worker = w, .workers = threads, .done = &done,
                             .total = total, .progress = w ? NULL : fn, .progress_ctx = ctx};
    if (w > 0 && pthread_create(&jobs[w].thread, NULL, verify_some, &jobs[w]) != 0) break;
    started = w + 1;
  }
  if (started < threads) /* fewer threads than asked: the caller's thread takes the rest */
    for (uint32_t w = started; w < threads; ++w) jobs[w].status = NULL;
  verify_some(&jobs[0]);
  for (uint32_t w = 1; w < started; ++w) pthread_join(jobs[w].thread, NULL);
  for (uint32_t w = started; w < threads; ++w) verify_some(&jobs[w]);
  vlmc_status_t first = NULL;
  for (uint32_t w = 0; w < threads; ++w) {
    if (!first) first = jobs[w].status;
    else vlmc_status_free(jobs[w].status);
  }
  for (size_t i = 0; !first && i < p->manifest->num_params; ++i)
    if (p->first[i] != i) first = resolve(p, i);
  p->resident_bytes = 0;
  for (size_t i = 0; i < p->manifest->num_params; ++i) p->resident_bytes += p->copy_bytes[i];
  return first;
}
