/* MLIR text -> LLVM dialect -> LLVM IR -> object -> shared object (codegen/targets/cpu/lower.h). */
#define _GNU_SOURCE
#include "codegen/targets/cpu/lower.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <mlir-c/Diagnostics.h>
#include <mlir-c/IR.h>
#include <mlir-c/Pass.h>
#include <mlir-c/RegisterEverything.h>
#include <mlir-c/Target/LLVMIR.h>

#include "codegen/targets/cpu/machine.h"
#include "support/file.h"
#include "support/strbuf.h"

extern char **environ;

/* Loops and vectors to the LLVM dialect. math-to-llvm takes what LLVM has intrinsics for
 * (exp, sqrt, cos, ...); math-to-libm the rest (erf, tanh) as calls into libm. */
static const char kPipeline[] =
    "builtin.module(convert-scf-to-cf,convert-vector-to-llvm,convert-math-to-llvm,"
    "convert-math-to-libm,expand-strided-metadata,lower-affine,finalize-memref-to-llvm,"
    "convert-arith-to-llvm,convert-index-to-llvm,convert-func-to-llvm,convert-cf-to-llvm,"
    "reconcile-unrealized-casts)";

struct vlmc_cpu_lowerer_s {
  MlirContext mlir;
  LLVMTargetMachineRef machine;
  char *triple, *cpu, *features;
  char *dump_dir;
  char *work_dir;  /* objects, before linking */
  char **objects;
  size_t num_objects;
  vlmc_cpu_machine_t machine_info; /* what the templates size their tiles from */
  bool isa_512;                    /* the cpu has AVX-512 (what its registers hold) */
};

/* ---- setup ---- */

static vlmc_status_t pick_cpu(const char *want, char **cpu, char **features) {
  if (!want || !strcmp(want, "portable")) {
    *cpu = strdup("x86-64");
    *features = strdup("");
  } else if (!strcmp(want, "x86-64-v2") || !strcmp(want, "x86-64-v3") ||
             !strcmp(want, "x86-64-v4")) {
    *cpu = strdup(want);
    *features = strdup("");
  } else if (!strcmp(want, "native")) {
    char *name = LLVMGetHostCPUName(), *feat = LLVMGetHostCPUFeatures();
    *cpu = strdup(name);
    *features = strdup(feat);
    LLVMDisposeMessage(name);
    LLVMDisposeMessage(feat);
  } else {
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "--cpu %s: expected native, x86-64-v2, x86-64-v3, x86-64-v4 or portable", want);
  }
  if (!*cpu || !*features) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  return NULL;
}

/* The machine table row: for native, this host's caches too (sysconf; 0 where the C library
 * does not know, then the defaults). A named level assumes no particular machine. */
static vlmc_cpu_machine_t machine_for(const char *want, const char *cpu, const char *features) {
  int64_t l1d = 0, l2 = 0;
  if (want && !strcmp(want, "native")) {
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
    l1d = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  }
  return vlmc_cpu_machine_for(cpu, features, l1d, l2);
}

static vlmc_status_t make_machine(vlmc_cpu_lowerer_t *l) {
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  l->triple = LLVMGetDefaultTargetTriple();
  LLVMTargetRef target;
  char *error = NULL;
  if (LLVMGetTargetFromTriple(l->triple, &target, &error)) {
    vlmc_status_t st = vlmc_status_make(VLMC_UNSUPPORTED, "LLVM has no target for %s: %s",
                                        l->triple, error ? error : "?");
    LLVMDisposeMessage(error);
    return st;
  }
  l->machine = LLVMCreateTargetMachine(target, l->triple, l->cpu, l->features,
                                       LLVMCodeGenLevelAggressive, LLVMRelocPIC,
                                       LLVMCodeModelDefault);
  if (!l->machine) return vlmc_status_make(VLMC_INTERNAL, "LLVM made no target machine");
  return NULL;
}

vlmc_status_t vlmc_cpu_lowerer_create(const char *cpu, const char *dump_dir,
                                      vlmc_cpu_lowerer_t **out) {
  vlmc_cpu_lowerer_t *l = calloc(1, sizeof *l);
  if (!l) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_status_t st = pick_cpu(cpu, &l->cpu, &l->features);
  if (!st) st = make_machine(l);
  if (!st && dump_dir) {
    l->dump_dir = strdup(dump_dir);
    if (mkdir(dump_dir, 0777) != 0 && errno != EEXIST)
      st = vlmc_status_make(VLMC_IO_ERROR, "--dump-kernels %s: %s", dump_dir, strerror(errno));
  }
  if (!st) {
    const char *tmp = getenv("TMPDIR");
    vlmc_strbuf_t dir;
    vlmc_strbuf_init(&dir);
    vlmc_strbuf_printf(&dir, "%s/vlmc-kernels-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    l->work_dir = vlmc_strbuf_take(&dir);
    if (!l->work_dir || !mkdtemp(l->work_dir))
      st = vlmc_status_make(VLMC_IO_ERROR, "cannot make a temporary folder for kernel objects: %s",
                            strerror(errno));
  }
  if (st) {
    vlmc_cpu_lowerer_destroy(l);
    return st;
  }
  l->machine_info = machine_for(cpu, l->cpu, l->features);
  l->isa_512 = l->machine_info.vector_width == 16;
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirRegisterAllDialects(registry);
  l->mlir = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  mlirRegisterAllLLVMTranslations(l->mlir);
  mlirRegisterAllPasses();
  *out = l;
  return NULL;
}

void vlmc_cpu_lowerer_destroy(vlmc_cpu_lowerer_t *l) {
  if (!l) return;
  for (size_t i = 0; i < l->num_objects; ++i) {
    unlink(l->objects[i]);
    free(l->objects[i]);
  }
  free(l->objects);
  if (l->work_dir) {
    char so[4096];
    snprintf(so, sizeof so, "%s/kernels.so", l->work_dir);
    unlink(so);
    rmdir(l->work_dir);
  }
  if (l->mlir.ptr) mlirContextDestroy(l->mlir);
  if (l->machine) LLVMDisposeTargetMachine(l->machine);
  if (l->triple) LLVMDisposeMessage(l->triple);
  free(l->cpu);
  free(l->features);
  free(l->dump_dir);
  free(l->work_dir);
  free(l);
}

int vlmc_cpu_lowerer_vector_width(const vlmc_cpu_lowerer_t *l) {
  return l->machine_info.vector_width;
}
const vlmc_cpu_machine_t *vlmc_cpu_lowerer_machine(const vlmc_cpu_lowerer_t *l) {
  return &l->machine_info;
}

vlmc_status_t vlmc_cpu_lowerer_set_vector_width(vlmc_cpu_lowerer_t *l, const char *lanes) {
  int width = 0;
  if (lanes && (!strcmp(lanes, "4") || !strcmp(lanes, "8") || !strcmp(lanes, "16"))) width = atoi(lanes);
  if (!width)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "cpu option vector-width=%s: expected 4, 8 or 16", lanes ? lanes : "");
  /* The tile table of a machine of that width, so that the kernel text is the one such a
   * machine gets; only the instruction selection (LLVM's) differs. */
  l->machine_info.vector_width = width;
  l->machine_info.vector_registers = width == 16 ? 32 : 16;
  l->machine_info.bf16_dot = l->machine_info.bf16_dot && width == 16;
  return NULL;
}
const char *vlmc_cpu_lowerer_cpu(const vlmc_cpu_lowerer_t *l) { return l->cpu; }

/* ---- one kernel ---- */

static void collect_text(MlirStringRef part, void *user) {
  vlmc_strbuf_append(user, part.data, part.length);
}

typedef struct {
  vlmc_strbuf_t text;
} diagnostics_t;

static MlirLogicalResult on_diagnostic(MlirDiagnostic diagnostic, void *user) {
  diagnostics_t *d = user;
  if (d->text.len) vlmc_strbuf_puts(&d->text, "; ");
  mlirLocationPrint(mlirDiagnosticGetLocation(diagnostic), collect_text, &d->text);
  vlmc_strbuf_puts(&d->text, ": ");
  mlirDiagnosticPrint(diagnostic, collect_text, &d->text);
  return mlirLogicalResultSuccess();
}

static vlmc_status_t dump(const vlmc_cpu_lowerer_t *l, const char *name, const char *suffix,
                          const char *data, size_t len) {
  if (!l->dump_dir) return NULL;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s%s", l->dump_dir, name, suffix);
  return vlmc_file_write_all(path, data, len);
}

static vlmc_status_t dump_module(const vlmc_cpu_lowerer_t *l, const char *name, const char *suffix,
                                 MlirModule module) {
  if (!l->dump_dir) return NULL;
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  mlirOperationPrint(mlirModuleGetOperation(module), collect_text, &text);
  vlmc_status_t st = dump(l, name, suffix, text.data ? text.data : "", text.len);
  vlmc_strbuf_deinit(&text);
  return st;
}

/* Parses and lowers to the LLVM dialect; errors carry MLIR's diagnostics. */
static vlmc_status_t lower_to_llvm_dialect(vlmc_cpu_lowerer_t *l, const char *name,
                                           const char *mlir, MlirModule *out) {
  diagnostics_t diag;
  vlmc_strbuf_init(&diag.text);
  MlirDiagnosticHandlerID handler =
      mlirContextAttachDiagnosticHandler(l->mlir, on_diagnostic, &diag, NULL);
  vlmc_status_t st = NULL;
  MlirModule module = mlirModuleCreateParse(l->mlir, mlirStringRefCreateFromCString(mlir));
  if (mlirModuleIsNull(module)) {
    st = vlmc_status_make(VLMC_INTERNAL, "kernel %s: MLIR does not parse the generated text: %s",
                          name, vlmc_strbuf_cstr(&diag.text));
  } else {
    MlirPassManager pm = mlirPassManagerCreate(l->mlir);
    MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
    vlmc_strbuf_t err;
    vlmc_strbuf_init(&err);
    if (mlirLogicalResultIsFailure(mlirParsePassPipeline(
            opm, mlirStringRefCreateFromCString(kPipeline), collect_text, &err)))
      st = vlmc_status_make(VLMC_INTERNAL, "the cpu lowering pipeline does not parse: %s",
                            vlmc_strbuf_cstr(&err));
    else if (mlirLogicalResultIsFailure(
                 mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module))))
      st = vlmc_status_make(VLMC_INTERNAL, "kernel %s: lowering to the LLVM dialect failed: %s",
                            name, vlmc_strbuf_cstr(&diag.text));
    vlmc_strbuf_deinit(&err);
    mlirPassManagerDestroy(pm);
  }
  mlirContextDetachDiagnosticHandler(l->mlir, handler);
  vlmc_strbuf_deinit(&diag.text);
  if (st && !mlirModuleIsNull(module)) mlirModuleDestroy(module);
  if (!st) *out = module;
  return st;
}

/* void NAME(ptr buffers, ptr counts, i64 lo, i64 hi): unpacks the arrays into the lowered
 * function's memref descriptors (allocated = aligned = buffer, offset 0, size = count,
 * stride 1) and calls it. */
static vlmc_status_t add_entry_point(LLVMModuleRef module, const char *name) {
  char body_name[512];
  snprintf(body_name, sizeof body_name, "%s_body", name);
  LLVMValueRef body = LLVMGetNamedFunction(module, body_name);
  if (!body) return vlmc_status_make(VLMC_INTERNAL, "kernel %s: no function %s", name, body_name);
  unsigned num_params = LLVMCountParams(body);
  if (num_params < 2 || (num_params - 2) % 5)
    return vlmc_status_make(VLMC_INTERNAL, "kernel %s: unexpected lowered signature (%u params)",
                            name, num_params);
  unsigned num_buffers = (num_params - 2) / 5;
  LLVMContextRef ctx = LLVMGetModuleContext(module);
  LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0), i64 = LLVMInt64TypeInContext(ctx);
  LLVMTypeRef params[4] = {ptr, ptr, i64, i64};
  LLVMTypeRef fn_type = LLVMFunctionType(LLVMVoidTypeInContext(ctx), params, 4, 0);
  LLVMValueRef fn = LLVMAddFunction(module, name, fn_type);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
  LLVMValueRef *args = calloc(num_params, sizeof *args);
  if (!args) {
    LLVMDisposeBuilder(b);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  for (unsigned i = 0; i < num_buffers; ++i) {
    LLVMValueRef at = LLVMConstInt(i64, i, 0);
    LLVMValueRef p = LLVMBuildLoad2(b, ptr, LLVMBuildGEP2(b, ptr, LLVMGetParam(fn, 0), &at, 1, ""), "");
    LLVMValueRef n = LLVMBuildLoad2(b, i64, LLVMBuildGEP2(b, i64, LLVMGetParam(fn, 1), &at, 1, ""), "");
    args[5 * i + 0] = p;
    args[5 * i + 1] = p;
    args[5 * i + 2] = LLVMConstInt(i64, 0, 0);
    args[5 * i + 3] = n;
    args[5 * i + 4] = LLVMConstInt(i64, 1, 0);
  }
  args[num_params - 2] = LLVMGetParam(fn, 2);
  args[num_params - 1] = LLVMGetParam(fn, 3);
  LLVMBuildCall2(b, LLVMGlobalGetValueType(body), body, args, num_params, "");
  LLVMBuildRetVoid(b);
  free(args);
  LLVMDisposeBuilder(b);
  /* The body is only reached through the entry point: let O3 inline it away. */
  LLVMSetLinkage(body, LLVMInternalLinkage);
  return NULL;
}

static vlmc_status_t optimize(vlmc_cpu_lowerer_t *l, LLVMModuleRef module, const char *name) {
  LLVMSetTarget(module, l->triple);
  LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(l->machine);
  char *layout_text = LLVMCopyStringRepOfTargetData(layout);
  LLVMSetDataLayout(module, layout_text);
  LLVMDisposeMessage(layout_text);
  LLVMDisposeTargetData(layout);
  /* MLIR's functions carry no target attributes: give every defined one the machine's, so
   * that O3 vectorises for it. */
  for (LLVMValueRef f = LLVMGetFirstFunction(module); f; f = LLVMGetNextFunction(f)) {
    if (LLVMIsDeclaration(f)) continue;
    LLVMContextRef ctx = LLVMGetModuleContext(module);
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(ctx, "target-cpu", 10, l->cpu,
                                                      (unsigned)strlen(l->cpu)));
    if (l->features[0])
      LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                              LLVMCreateStringAttribute(ctx, "target-features", 15, l->features,
                                                        (unsigned)strlen(l->features)));
    /* The templates write 512-bit vectors on purpose: keep LLVM from splitting them into
     * 256-bit halves on CPUs it tunes for 256 (prefer-vector-width, e.g. skylake-avx512). */
    if (l->isa_512) {
      LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                              LLVMCreateStringAttribute(ctx, "prefer-vector-width", 19, "512", 3));
      LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                              LLVMCreateStringAttribute(ctx, "min-legal-vector-width", 22, "512", 3));
    }
  }
  LLVMPassBuilderOptionsRef options = LLVMCreatePassBuilderOptions();
  LLVMErrorRef err = LLVMRunPasses(module, "default<O3>", l->machine, options);
  LLVMDisposePassBuilderOptions(options);
  if (err) {
    char *msg = LLVMGetErrorMessage(err);
    vlmc_status_t st = vlmc_status_make(VLMC_INTERNAL, "kernel %s: LLVM O3 failed: %s", name, msg);
    LLVMDisposeErrorMessage(msg);
    return st;
  }
  return NULL;
}

static vlmc_status_t emit(vlmc_cpu_lowerer_t *l, LLVMModuleRef module, const char *name,
                          LLVMCodeGenFileType kind, LLVMMemoryBufferRef *out) {
  char *error = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(l->machine, module, kind, &error, out)) {
    vlmc_status_t st = vlmc_status_make(VLMC_INTERNAL, "kernel %s: LLVM code generation failed: %s",
                                        name, error ? error : "?");
    LLVMDisposeMessage(error);
    return st;
  }
  return NULL;
}

static vlmc_status_t write_object(vlmc_cpu_lowerer_t *l, LLVMModuleRef module, const char *name) {
  LLVMMemoryBufferRef object;
  VLMC_RETURN_IF_ERROR(emit(l, module, name, LLVMObjectFile, &object));
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.o", l->work_dir, name);
  vlmc_status_t st = vlmc_file_write_all(path, LLVMGetBufferStart(object), LLVMGetBufferSize(object));
  LLVMDisposeMemoryBuffer(object);
  if (st) return st;
  char **grown = realloc(l->objects, (l->num_objects + 1) * sizeof *grown);
  if (!grown) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  l->objects = grown;
  l->objects[l->num_objects] = strdup(path);
  if (!l->objects[l->num_objects]) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  l->num_objects++;
  return NULL;
}

static vlmc_status_t dump_llvm(vlmc_cpu_lowerer_t *l, LLVMModuleRef module, const char *name) {
  if (!l->dump_dir) return NULL;
  char *ir = LLVMPrintModuleToString(module);
  vlmc_status_t st = dump(l, name, ".ll", ir, strlen(ir));
  LLVMDisposeMessage(ir);
  LLVMMemoryBufferRef assembly;
  if (!st) st = emit(l, module, name, LLVMAssemblyFile, &assembly);
  if (!st) {
    st = dump(l, name, ".s", LLVMGetBufferStart(assembly), LLVMGetBufferSize(assembly));
    LLVMDisposeMemoryBuffer(assembly);
  }
  return st;
}

vlmc_status_t vlmc_cpu_lowerer_add(vlmc_cpu_lowerer_t *l, const char *name, const char *mlir) {
  VLMC_RETURN_IF_ERROR(dump(l, name, ".mlir", mlir, strlen(mlir)));
  MlirModule module;
  VLMC_RETURN_IF_ERROR(lower_to_llvm_dialect(l, name, mlir, &module));
  vlmc_status_t st = dump_module(l, name, ".lowered.mlir", module);
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef llvm = NULL;
  if (!st) {
    llvm = mlirTranslateModuleToLLVMIR(mlirModuleGetOperation(module), ctx);
    if (!llvm) st = vlmc_status_make(VLMC_INTERNAL, "kernel %s: translation to LLVM IR failed", name);
  }
  mlirModuleDestroy(module);
  if (!st) st = add_entry_point(llvm, name);
  if (!st) st = optimize(l, llvm, name);
  if (!st) st = dump_llvm(l, llvm, name);
  if (!st) st = write_object(l, llvm, name);
  if (llvm) LLVMDisposeModule(llvm);
  LLVMContextDispose(ctx);
  return st;
}

/* ---- linking ---- */

/* The kernels' shared object for the runtime's own ELF loader
 * (runtime/backends/cpu/elf_loader.h): no constructors, imports from libm and memset/memcpy
 * only (-lm stays: the kernels call expf, erff, tanhf, sincos, fmaf, ...). */
static vlmc_status_t run_linker(const vlmc_cpu_lowerer_t *l, const char *so_path) {
  const char *cc = getenv("VLMC_CC");
  if (!cc || !*cc) cc = "cc";
  size_t argc = l->num_objects + 8;
  char **argv = calloc(argc, sizeof *argv);
  if (!argv) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  size_t n = 0;
  argv[n++] = (char *)cc;
  argv[n++] = "-shared";
  /* No crt files: crtbegin's frame_dummy and __do_global_dtors_aux come with DT_INIT_ARRAY,
   * DT_FINI_ARRAY and crti's DT_INIT/DT_FINI, which the runtime's loader refuses (nothing of
   * an artifact runs at load), plus imports (__cxa_finalize, __gmon_start__) it does not
   * allow. The kernels need none of it. */
  argv[n++] = "-nostartfiles";
  argv[n++] = "-o";
  argv[n++] = (char *)so_path;
  for (size_t i = 0; i < l->num_objects; ++i) argv[n++] = l->objects[i];
  argv[n++] = "-lm";
  argv[n] = NULL;
  pid_t pid;
  int rc = posix_spawnp(&pid, cc, NULL, NULL, argv, environ);
  free(argv);
  if (rc != 0)
    return vlmc_status_make(VLMC_UNSUPPORTED,
                            "cannot run the linker '%s' (%s): linking cpu kernels needs a C "
                            "compiler driver; set VLMC_CC", cc, strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return vlmc_status_make(VLMC_INTERNAL, "'%s -shared' failed linking %zu kernel objects "
                            "(status %d)", cc, l->num_objects, status);
  return NULL;
}

vlmc_status_t vlmc_cpu_lowerer_link(vlmc_cpu_lowerer_t *l, unsigned char **out_so,
                                    size_t *out_len) {
  char so_path[4096];
  snprintf(so_path, sizeof so_path, "%s/kernels.so", l->work_dir);
  VLMC_RETURN_IF_ERROR(run_linker(l, so_path));
  char *data = NULL;
  size_t len = 0;
  vlmc_status_t st = vlmc_file_read_all(so_path, &data, &len);
  unlink(so_path);
  if (st) return st;
  *out_so = (unsigned char *)data;
  *out_len = len;
  return NULL;
}
