/* From a kernel's MLIR text (a gpu.module with one gpu.func, emit.h) to a validated SPIR-V
 * module, in process: the MLIR C API parses and converts it
 * (convert-math-to-spirv, convert-gpu-to-spirv, spirv-lower-abi-attrs, spirv-update-vce),
 * the push-constant block loses the descriptor binding lower-abi-attrs gives it (Vulkan
 * forbids one), the spirv.module moves into the gpu.module and gpu-module-to-binary
 * serializes it; SPIRV-Tools then validates it under Vulkan 1.1 rules. */
#ifndef VLMC_CODEGEN_TARGETS_VULKAN_LOWER_H
#define VLMC_CODEGEN_TARGETS_VULKAN_LOWER_H

#include <stddef.h>
#include <stdint.h>

#include "support/status.h"

typedef struct vlmc_vk_lowerer_s vlmc_vk_lowerer_t;

/* dump_dir: NULL, or a folder that receives NAME.gpu.mlir (as written; not
 * NAME.mlir, which the cpu target writes into the same folder), NAME.spirv.mlir (the
 * spirv.module as serialized), NAME.spv and NAME.spvasm (its disassembly) for every kernel. */
vlmc_status_t vlmc_vk_lowerer_create(const char *dump_dir, vlmc_vk_lowerer_t **out);
void vlmc_vk_lowerer_destroy(vlmc_vk_lowerer_t *lowerer);

/* Lowers and validates kernel `name` (its gpu.func is @name); *out_words is malloc'd.
 * A module spirv-val rejects is an error starting "spirv-val: ". */
vlmc_status_t vlmc_vk_lowerer_lower(vlmc_vk_lowerer_t *lowerer, const char *name,
                                    const char *mlir, uint32_t **out_words, size_t *out_count);

/* The Vulkan features a SPIR-V module needs, from its OpCapability instructions, as bits
 * (artifact/vulkan_abi.h), and bits (of one or more modules, or'd) as the table's list
 * ("shaderInt64,subgroupArithmetic"; "" for none). */
uint32_t vlmc_vk_feature_bits(const uint32_t *words, size_t count);
void vlmc_vk_feature_list(uint32_t bits, char *out, size_t size);

#endif
