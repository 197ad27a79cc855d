/* MLIR gpu kernel -> SPIR-V words, validated (codegen/targets/vulkan/lower.h). */
#define _GNU_SOURCE
#include "codegen/targets/vulkan/lower.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <mlir-c/BuiltinAttributes.h>
#include <mlir-c/Diagnostics.h>
#include <mlir-c/Dialect/GPU.h>
#include <mlir-c/IR.h>
#include <mlir-c/Pass.h>
#include <mlir-c/RegisterEverything.h>
#include <spirv-tools/libspirv.h>

#include "artifact/vulkan_abi.h"
#include "support/file.h"
#include "support/strbuf.h"

/* convert-math-to-spirv first: convert-gpu-to-spirv does not take math.fma / math.rsqrt. */
static const char kConvert[] =
    "builtin.module(convert-math-to-spirv,convert-gpu-to-spirv,"
    "spirv.module(spirv-lower-abi-attrs,spirv-update-vce))";
/* Serialization uses the spirv.module's own (trimmed) version and capabilities. */
static const char kSerialize[] =
    "builtin.module(spirv-attach-target{ver=v1.3 caps=Shader},gpu-module-to-binary)";

struct vlmc_vk_lowerer_s {
  MlirContext mlir;
  spv_context spirv;
  char *dump_dir;
};

vlmc_status_t vlmc_vk_lowerer_create(const char *dump_dir, vlmc_vk_lowerer_t **out) {
  vlmc_vk_lowerer_t *l = calloc(1, sizeof *l);
  if (!l) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (dump_dir) {
    l->dump_dir = strdup(dump_dir);
    if (!l->dump_dir || (mkdir(dump_dir, 0777) != 0 && errno != EEXIST)) {
      vlmc_status_t st = vlmc_status_make(VLMC_IO_ERROR, "--dump-kernels %s: %s", dump_dir,
                                          strerror(errno));
      vlmc_vk_lowerer_destroy(l);
      return st;
    }
  }
  l->spirv = spvContextCreate(SPV_ENV_VULKAN_1_1);
  if (!l->spirv) {
    vlmc_vk_lowerer_destroy(l);
    return vlmc_status_make(VLMC_INTERNAL, "SPIRV-Tools made no Vulkan 1.1 context");
  }
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirRegisterAllDialects(registry);
  l->mlir = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  mlirRegisterAllPasses();
  *out = l;
  return NULL;
}

void vlmc_vk_lowerer_destroy(vlmc_vk_lowerer_t *l) {
  if (!l) return;
  if (l->mlir.ptr) mlirContextDestroy(l->mlir);
  if (l->spirv) spvContextDestroy(l->spirv);
  free(l->dump_dir);
  free(l);
}

/* ---- helpers ---- */

static void collect_text(MlirStringRef part, void *user) {
  vlmc_strbuf_append(user, part.data, part.length);
}

static MlirLogicalResult on_diagnostic(MlirDiagnostic diagnostic, void *user) {
  vlmc_strbuf_t *text = user;
  if (text->len) vlmc_strbuf_puts(text, "; ");
  mlirLocationPrint(mlirDiagnosticGetLocation(diagnostic), collect_text, text);
  vlmc_strbuf_puts(text, ": ");
  mlirDiagnosticPrint(diagnostic, collect_text, text);
  return mlirLogicalResultSuccess();
}

static vlmc_status_t dump(const vlmc_vk_lowerer_t *l, const char *name, const char *suffix,
                          const void *data, size_t len) {
  if (!l->dump_dir) return NULL;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s%s", l->dump_dir, name, suffix);
  return vlmc_file_write_all(path, data, len);
}

static vlmc_status_t dump_op(const vlmc_vk_lowerer_t *l, const char *name, const char *suffix,
                             MlirOperation op) {
  if (!l->dump_dir) return NULL;
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  mlirOperationPrint(op, collect_text, &text);
  vlmc_strbuf_putc(&text, '\n');
  vlmc_status_t st = dump(l, name, suffix, text.data ? text.data : "", text.len);
  vlmc_strbuf_deinit(&text);
  return st;
}

static bool op_is(MlirOperation op, const char *name) {
  MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
  return n.length == strlen(name) && !memcmp(n.data, name, n.length);
}

/* The first op named `name` directly in the module's body, or a null op. */
static MlirOperation top_op(MlirModule module, const char *name) {
  MlirBlock body = mlirModuleGetBody(module);
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op))
    if (op_is(op, name)) return op;
  return (MlirOperation){NULL};
}

static vlmc_status_t run_pipeline(vlmc_vk_lowerer_t *l, MlirModule module, const char *pipeline,
                                  const char *what, const char *name, vlmc_strbuf_t *diag) {
  MlirPassManager pm = mlirPassManagerCreate(l->mlir);
  vlmc_strbuf_t err;
  vlmc_strbuf_init(&err);
  vlmc_status_t st = NULL;
  if (mlirLogicalResultIsFailure(mlirParsePassPipeline(mlirPassManagerGetAsOpPassManager(pm),
                                                       mlirStringRefCreateFromCString(pipeline),
                                                       collect_text, &err)))
    st = vlmc_status_make(VLMC_INTERNAL, "the vulkan %s pipeline does not parse: %s", what,
                          vlmc_strbuf_cstr(&err));
  else if (mlirLogicalResultIsFailure(mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module))))
    st = vlmc_status_make(VLMC_INTERNAL, "kernel %s: %s failed: %s", name, what,
                          vlmc_strbuf_cstr(diag));
  vlmc_strbuf_deinit(&err);
  mlirPassManagerDestroy(pm);
  return st;
}

/* Whether a spirv.GlobalVariable lives in the PushConstant storage class (its type says). */
static bool is_push_constant(MlirOperation op) {
  MlirAttribute type = mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString("type"));
  if (mlirAttributeIsNull(type)) return false;
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  mlirAttributePrint(type, collect_text, &text);
  bool push = strstr(vlmc_strbuf_cstr(&text), "PushConstant") != NULL;
  vlmc_strbuf_deinit(&text);
  return push;
}

/* spirv-lower-abi-attrs binds every interface variable, the push-constant block too, which
 * Vulkan forbids (VUID-StandaloneSpirv-DescriptorSet-06491): unbind it. */
static void unbind_push_constants(MlirOperation spirv_module) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(spirv_module, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    if (!op_is(op, "spirv.GlobalVariable") || !is_push_constant(op)) continue;
    mlirOperationRemoveAttributeByName(op, mlirStringRefCreateFromCString("binding"));
    mlirOperationRemoveAttributeByName(op, mlirStringRefCreateFromCString("descriptor_set"));
  }
}

/* Attribute `key` of op as text (empty when absent). */
static void attribute_text(MlirOperation op, const char *key, vlmc_strbuf_t *out) {
  MlirAttribute a = mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString(key));
  if (!mlirAttributeIsNull(a)) mlirAttributePrint(a, collect_text, out);
}

/* Whether the module reads a subgroup builtin (SubgroupId, NumSubgroups, ...). */
static bool reads_subgroup_builtin(MlirOperation spirv_module) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(spirv_module, 0));
  bool found = false;
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !found && !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    if (!op_is(op, "spirv.GlobalVariable")) continue;
    vlmc_strbuf_t text;
    vlmc_strbuf_init(&text);
    attribute_text(op, "built_in", &text);
    found = strstr(vlmc_strbuf_cstr(&text), "Subgroup") != NULL;
    vlmc_strbuf_deinit(&text);
  }
  return found;
}

/* spirv-update-vce (MLIR 19) derives the capabilities from ops and types, not from builtins:
 * a kernel that reads SubgroupId but runs no subgroup operation (the cooperative-matrix
 * linear) would declare no GroupNonUniform, which SPIR-V requires of that builtin. */
static vlmc_status_t require_group_non_uniform(MlirOperation spirv_module, const char *name) {
  if (!reads_subgroup_builtin(spirv_module)) return NULL;
  vlmc_strbuf_t vce;
  vlmc_strbuf_init(&vce);
  attribute_text(spirv_module, "vce_triple", &vce);
  const char *text = vlmc_strbuf_cstr(&vce), *caps = strchr(text, '[');
  vlmc_status_t st = NULL;
  if (!caps) {
    st = vlmc_status_make(VLMC_INTERNAL, "kernel %s: spirv.module has no vce triple", name);
  } else if (!strstr(text, "GroupNonUniform")) {
    vlmc_strbuf_t fixed;
    vlmc_strbuf_init(&fixed);
    vlmc_strbuf_append(&fixed, text, (size_t)(caps - text) + 1);
    vlmc_strbuf_printf(&fixed, "GroupNonUniform, %s", caps + 1);
    MlirContext ctx = mlirOperationGetContext(spirv_module);
    MlirAttribute a = mlirAttributeParseGet(ctx, mlirStringRefCreateFromCString(vlmc_strbuf_cstr(&fixed)));
    if (mlirAttributeIsNull(a))
      st = vlmc_status_make(VLMC_INTERNAL, "kernel %s: cannot add GroupNonUniform to %s", name, text);
    else
      mlirOperationSetAttributeByName(spirv_module, mlirStringRefCreateFromCString("vce_triple"), a);
    vlmc_strbuf_deinit(&fixed);
  }
  vlmc_strbuf_deinit(&vce);
  return st;
}

/* Whether the spirv.module is SPIR-V 1.4 or newer (its vce triple says). */
static bool is_spirv_1_4_or_newer(MlirOperation spirv_module) {
  vlmc_strbuf_t vce;
  vlmc_strbuf_init(&vce);
  attribute_text(spirv_module, "vce_triple", &vce);
  const char *v = strstr(vlmc_strbuf_cstr(&vce), "v1.");
  bool newer = v && v[3] >= '4' && v[3] <= '9';
  vlmc_strbuf_deinit(&vce);
  return newer;
}

/* From SPIR-V 1.4 on, an entry point's interface lists every global variable its code uses,
 * storage buffers, workgroup memory and push constants too, not only Input/Output; MLIR 19's
 * lowering lists the builtins alone at any version. NVIDIA's driver (H200, 580.159) ran such
 * a 1.6 kernel (the cooperative-matrix linear) without writing any output. The module holds
 * one kernel, so every global variable belongs in its interface. */
static vlmc_status_t list_globals_in_interface(MlirOperation spirv_module, const char *name) {
  if (!is_spirv_1_4_or_newer(spirv_module)) return NULL;
  MlirContext ctx = mlirOperationGetContext(spirv_module);
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(spirv_module, 0));
  enum { MAX_GLOBALS = 256 };
  MlirAttribute globals[MAX_GLOBALS];
  intptr_t n = 0;
  MlirOperation entry = {NULL};
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    if (op_is(op, "spirv.EntryPoint")) entry = op;
    if (!op_is(op, "spirv.GlobalVariable")) continue;
    MlirAttribute sym = mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString("sym_name"));
    if (mlirAttributeIsNull(sym) || !mlirAttributeIsAString(sym) || n == MAX_GLOBALS)
      return vlmc_status_make(VLMC_INTERNAL, "kernel %s: a global variable without a name, or "
                              "more than %d", name, MAX_GLOBALS);
    globals[n++] = mlirFlatSymbolRefAttrGet(ctx, mlirStringAttrGetValue(sym));
  }
  if (mlirOperationIsNull(entry))
    return vlmc_status_make(VLMC_INTERNAL, "kernel %s: spirv.module has no entry point", name);
  mlirOperationSetAttributeByName(entry, mlirStringRefCreateFromCString("interface"),
                                  mlirArrayAttrGet(ctx, n, globals));
  return NULL;
}

/* convert-gpu-to-spirv leaves the spirv.module beside the gpu.module; gpu-module-to-binary
 * serializes the one inside it. */
static vlmc_status_t fix_up(MlirModule module, const char *name) {
  MlirOperation spv = top_op(module, "spirv.module"), gpu = top_op(module, "gpu.module");
  if (mlirOperationIsNull(spv) || mlirOperationIsNull(gpu))
    return vlmc_status_make(VLMC_INTERNAL, "kernel %s: the conversion made no spirv.module", name);
  VLMC_RETURN_IF_ERROR(require_group_non_uniform(spv, name));
  VLMC_RETURN_IF_ERROR(list_globals_in_interface(spv, name));
  unbind_push_constants(spv);
  mlirOperationRemoveFromParent(spv);
  mlirBlockInsertOwnedOperation(mlirRegionGetFirstBlock(mlirOperationGetRegion(gpu, 0)), 0, spv);
  return NULL;
}

/* The words of the gpu.binary the serialization left. */
static vlmc_status_t binary_words(MlirModule module, const char *name, uint32_t **out_words,
                                  size_t *out_count) {
  MlirOperation bin = top_op(module, "gpu.binary");
  MlirAttribute objects = mlirOperationIsNull(bin)
                              ? (MlirAttribute){NULL}
                              : mlirOperationGetAttributeByName(
                                    bin, mlirStringRefCreateFromCString("objects"));
  if (mlirAttributeIsNull(objects) || !mlirAttributeIsAArray(objects) ||
      mlirArrayAttrGetNumElements(objects) < 1 ||
      !mlirAttributeIsAGPUObjectAttr(mlirArrayAttrGetElement(objects, 0)))
    return vlmc_status_make(VLMC_INTERNAL, "kernel %s: serialization gave no gpu.binary", name);
  MlirStringRef bytes = mlirGPUObjectAttrGetObject(mlirArrayAttrGetElement(objects, 0));
  if (bytes.length < 20 || bytes.length % 4)
    return vlmc_status_make(VLMC_INTERNAL, "kernel %s: SPIR-V of %zu bytes", name, bytes.length);
  uint32_t *words = malloc(bytes.length);
  if (!words) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  memcpy(words, bytes.data, bytes.length);
  *out_words = words;
  *out_count = bytes.length / 4;
  return NULL;
}

static vlmc_status_t validate(vlmc_vk_lowerer_t *l, const uint32_t *words, size_t count) {
  spv_diagnostic diag = NULL;
  spv_result_t r = spvValidateBinary(l->spirv, words, count, &diag);
  vlmc_status_t st = NULL;
  if (r != SPV_SUCCESS)
    st = vlmc_status_make(VLMC_INTERNAL, "spirv-val: %s",
                          diag && diag->error ? diag->error : "the module is invalid");
  spvDiagnosticDestroy(diag);
  return st;
}

static vlmc_status_t dump_disassembly(vlmc_vk_lowerer_t *l, const char *name,
                                      const uint32_t *words, size_t count) {
  if (!l->dump_dir) return NULL;
  spv_text text = NULL;
  spv_diagnostic diag = NULL;
  vlmc_status_t st = NULL;
  if (spvBinaryToText(l->spirv, words, count,
                      SPV_BINARY_TO_TEXT_OPTION_INDENT | SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES,
                      &text, &diag) != SPV_SUCCESS)
    st = vlmc_status_make(VLMC_INTERNAL, "kernel %s: spirv-dis: %s", name,
                          diag && diag->error ? diag->error : "?");
  else
    st = dump(l, name, ".spvasm", text->str, text->length);
  spvTextDestroy(text);
  spvDiagnosticDestroy(diag);
  return st;
}

/* ---- one kernel ---- */

enum { OP_CAPABILITY = 17, CAP_COOPERATIVE_MATRIX = 6022 };

/* Whether the module declares `capability` (the words come from our own serializer). */
static bool uses_capability(const uint32_t *words, size_t count, uint32_t capability) {
  for (size_t at = 5; words && at < count;) {
    uint32_t length = words[at] >> 16, opcode = words[at] & 0xFFFF;
    if (length == 0) break;
    if (opcode == OP_CAPABILITY && length >= 2 && at + 1 < count && words[at + 1] == capability) return true;
    at += length;
  }
  return false;
}

vlmc_status_t vlmc_vk_lowerer_lower(vlmc_vk_lowerer_t *l, const char *name, const char *mlir,
                                    uint32_t **out_words, size_t *out_count) {
  *out_words = NULL;
  *out_count = 0;
  VLMC_RETURN_IF_ERROR(dump(l, name, ".gpu.mlir", mlir, strlen(mlir)));
  vlmc_strbuf_t diag;
  vlmc_strbuf_init(&diag);
  MlirDiagnosticHandlerID handler = mlirContextAttachDiagnosticHandler(l->mlir, on_diagnostic, &diag, NULL);
  vlmc_status_t st = NULL;
  MlirModule module = mlirModuleCreateParse(l->mlir, mlirStringRefCreateFromCString(mlir));
  if (mlirModuleIsNull(module))
    st = vlmc_status_make(VLMC_INTERNAL, "kernel %s: MLIR does not parse the generated text: %s",
                          name, vlmc_strbuf_cstr(&diag));
  if (!st) st = run_pipeline(l, module, kConvert, "conversion to SPIR-V", name, &diag);
  if (!st) st = fix_up(module, name);
  if (!st) st = dump_op(l, name, ".spirv.mlir", mlirModuleGetOperation(module));
  if (!st) st = run_pipeline(l, module, kSerialize, "SPIR-V serialization", name, &diag);
  if (!st) st = binary_words(module, name, out_words, out_count);
  mlirContextDetachDiagnosticHandler(l->mlir, handler);
  vlmc_strbuf_deinit(&diag);
  if (!mlirModuleIsNull(module)) mlirModuleDestroy(module);
  /* SPIRV-Tools 2023.1 (Debian 12) reads no KHR cooperative-matrix module (MLIR_GPU.md): such
   * kernels go unvalidated here; the runtime's own check (spirv_check.c) still walks them. */
  bool coop = uses_capability(*out_words, *out_count, CAP_COOPERATIVE_MATRIX);
  if (!st) st = dump(l, name, ".spv", *out_words, *out_count * 4);
  if (!st && !coop) st = dump_disassembly(l, name, *out_words, *out_count);
  if (!st && !coop) st = validate(l, *out_words, *out_count);
  if (st) {
    free(*out_words);
    *out_words = NULL;
    *out_count = 0;
  }
  return st;
}

/* ---- features ---- */

/* The features of the capabilities a module declares, from the ABI's table (the backend
 * checks modules against the same one). */
uint32_t vlmc_vk_feature_bits(const uint32_t *words, size_t count) {
  uint32_t used = 0;
  for (size_t at = 5; at < count;) {
    uint32_t length = words[at] >> 16, opcode = words[at] & 0xFFFF;
    if (length == 0) break;
    if (opcode == OP_CAPABILITY && length >= 2 && at + 1 < count) {
      const vlmc_vk_capability_t *cap = vlmc_vk_capability(words[at + 1]);
      if (cap) used |= cap->feature;
    }
    at += length;
  }
  return used;
}

void vlmc_vk_feature_list(uint32_t bits, char *out, size_t size) {
  size_t len = 0;
  if (size) out[0] = '\0';
  for (unsigned bit = 0; bit < VLMC_VK_NUM_FEATURES; ++bit) {
    if (!((bits >> bit) & 1)) continue;
    int n = snprintf(out + len, size > len ? size - len : 0, "%s%s", len ? "," : "",
                     vlmc_vk_feature_name(bit));
    if (n > 0) len += (size_t)n;
  }
}
