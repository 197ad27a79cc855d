#include "runtime/params.h"

#include <stdlib.h>
#include <string.h>

#include "frontend/checkpoint.h"
#include "support/hash.h"

struct vlmc_params_s {
  const vlmc_artifact_t *artifact;
  const vlmc_manifest_t *manifest;
  const vlmc_artifact_section_t *section; /* inline */
  vlmc_st_archive_t *external;            /* external */
  const void **data;                      /* per manifest param, once resolved */
  bool *verified;
};

bool vlmc_ir_dtype_from_st(vlmc_st_dtype_t st, vlmc_dtype_t *out) {
  switch (st) {
    case VLMC_ST_F32: *out = VLMC_DTYPE_F32; return true;
    case VLMC_ST_F16: *out = VLMC_DTYPE_F16; return true;
    case VLMC_ST_BF16: *out = VLMC_DTYPE_BF16; return true;
    case VLMC_ST_F64: *out = VLMC_DTYPE_F64; return true;
    case VLMC_ST_I64: *out = VLMC_DTYPE_I64; return true;
    case VLMC_ST_I32: *out = VLMC_DTYPE_I32; return true;
    case VLMC_ST_I8: *out = VLMC_DTYPE_I8; return true;
    case VLMC_ST_U8: *out = VLMC_DTYPE_U8; return true;
    case VLMC_ST_BOOL: *out = VLMC_DTYPE_BOOL; return true;
    default: return false;
  }
}

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
  }
  if (!p || !p->data || !p->verified) {
    vlmc_params_destroy(p);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  p->artifact = artifact;
  p->manifest = manifest;
  vlmc_status_t status =
      manifest->params_external
          ? vlmc_st_archive_open(external_dir, &p->external)
          : vlmc_artifact_require(artifact, "params", "the inline parameters", &p->section);
  if (status) {
    vlmc_params_destroy(p);
    return status;
  }
  *out = p;
  return NULL;
}

void vlmc_params_destroy(vlmc_params_t *p) {
  if (!p) return;
  vlmc_st_archive_destroy(p->external);
  free(p->data);
  free(p->verified);
  free(p);
}

static vlmc_status_t resolve_inline(vlmc_params_t *p, const vlmc_manifest_param_t *mp,
                                    const void **out) {
  uint64_t end;
  if (__builtin_add_overflow(mp->offset, mp->nbytes, &end) || end > p->section->size)
    return vlmc_status_make(VLMC_PARSE_ERROR,
                            "%s: manifest: parameter '%s' bytes [%llu, +%llu) lie outside the "
                            "params section (%llu bytes)",
                            vlmc_artifact_path(p->artifact), mp->name,
                            (unsigned long long)mp->offset, (unsigned long long)mp->nbytes,
                            (unsigned long long)p->section->size);
  *out = p->section->data + mp->offset;
  return NULL;
}

static vlmc_status_t resolve_external(vlmc_params_t *p, const vlmc_manifest_param_t *mp,
                                      const void **out) {
  const vlmc_st_tensor_t *t = vlmc_st_archive_find(p->external, mp->name);
  char other[512];
  if (!t && vlmc_checkpoint_alternate_name(mp->name, other, sizeof other))
    t = vlmc_st_archive_find(p->external, other);
  if (!t)
    return vlmc_status_make(VLMC_NOT_FOUND, "--params: tensor '%s' (expected in %s) not found",
                            mp->name, mp->file ? mp->file : "the checkpoint");
  vlmc_dtype_t dtype;
  bool same = vlmc_ir_dtype_from_st(t->dtype, &dtype) && dtype == mp->dtype &&
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
  return NULL;
}

static vlmc_status_t resolve(vlmc_params_t *p, size_t index) {
  const vlmc_manifest_param_t *mp = &p->manifest->params[index];
  if (!p->data[index])
    VLMC_RETURN_IF_ERROR(p->external ? resolve_external(p, mp, &p->data[index])
                                     : resolve_inline(p, mp, &p->data[index]));
  if (p->verified[index]) return NULL;
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
  for (size_t i = 0; i < p->manifest->num_params; ++i) VLMC_RETURN_IF_ERROR(resolve(p, i));
  return NULL;
}
