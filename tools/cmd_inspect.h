/* What `vlmc inspect` reads from an artifact, shared by its text report (cmd_inspect.c) and its
 * JSON one (cmd_inspect_json.c, --json), so that the two say the same things. */
#ifndef VLMC_TOOLS_CMD_INSPECT_H
#define VLMC_TOOLS_CMD_INSPECT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "artifact/artifact.h"
#include "artifact/kernel_table.h"
#include "artifact/manifest.h"
#include "ir/ir.h"
#include "support/status.h"

enum { INSPECT_MAX_WEIGHT_GROUPS = 16 };

/* Quantized weights of one (bits, group, scale dtype), as packed words + scales + biases. */
typedef struct {
  int64_t bits, group;
  vlmc_dtype_t scale_dtype;
  uint64_t tensors, weights, bytes;
} inspect_weight_group_t;

/* The weights by storage: each quantized group, and the float parameters that are not part of
 * one, by dtype. */
typedef struct {
  inspect_weight_group_t groups[INSPECT_MAX_WEIGHT_GROUPS];
  size_t num_groups;
  uint64_t plain_weights[VLMC_DTYPE_COUNT], plain_bytes[VLMC_DTYPE_COUNT];
} inspect_weight_storage_t;

/* The manifest's parameters: element count, and tensors and bytes by stored dtype. */
typedef struct {
  uint64_t elements;
  uint64_t tensors[VLMC_DTYPE_COUNT], bytes[VLMC_DTYPE_COUNT];
} inspect_param_totals_t;

void inspect_param_totals(const vlmc_manifest_t *m, inspect_param_totals_t *out);

/* false when out of memory. */
bool inspect_weight_storage(const vlmc_module_t *module, const vlmc_manifest_t *m,
                            inspect_weight_storage_t *out);

/* The artifact's program, parsed (and verified when `verify`); the caller destroys *out. */
vlmc_status_t inspect_parse_program(const vlmc_artifact_t *a, bool verify, vlmc_module_t **out);

/* The section lookup the backends' check takes (ctx: the artifact). */
const void *inspect_find_section(void *ctx, const char *name, size_t *out_size);

/* A target's kernel table (sections kernels.TARGET and kernels.TARGET.json) and how many
 * dispatches use each kernel (*out_uses, malloc'd). VLMC_NOT_FOUND, saying so, when the
 * artifact has no code for `target`; on success the caller deinits *t and frees *out_uses. */
vlmc_status_t inspect_kernel_table(const vlmc_artifact_t *a, const char *path, const char *target,
                                   const vlmc_artifact_section_t **out_code,
                                   vlmc_kernel_table_t *t, uint32_t **out_uses);

/* Each backend whose sections the artifact carries checks them against the program, as it
 * would at open, without running anything from the artifact; `report` hears each verdict
 * (st NULL: loadable; the status is freed after the call). */
typedef void (*inspect_check_report_fn)(void *ctx, const char *backend, vlmc_status_t st);
void inspect_backend_checks(const vlmc_artifact_t *a, const char *path, const vlmc_module_t *module,
                            inspect_check_report_fn report, void *ctx);

/* --verify: the validation vlmc-run runs at open, then every checksum in the file (each inline
 * parameter's included); `report` (may be NULL) gets a line per stage passed. */
vlmc_status_t inspect_verify(const vlmc_artifact_t *a, FILE *report);

/* --json: the whole report as one JSON document on stdout (docs/cli.md); with `verify`, its
 * "verify" key holds the verdict and the status returned is the verification's. */
vlmc_status_t inspect_json(const vlmc_artifact_t *a, const char *path, const vlmc_manifest_t *m,
                           bool verify);

#endif
