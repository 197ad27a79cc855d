/* PLACEHOLDER: being written; every template here refuses until it is. */
#include "codegen/cpu_kernels.h"

vlmc_status_t vlmc_cpu_kernel_gather(vlmc_cpu_emit_t *e) {
  vlmc_cpu_emit_fail(e, "no cpu kernel for 'gather' yet");
  return NULL;
}
vlmc_status_t vlmc_cpu_kernel_embedding(vlmc_cpu_emit_t *e) {
  vlmc_cpu_emit_fail(e, "no cpu kernel for 'embedding' yet");
  return NULL;
}
vlmc_status_t vlmc_cpu_kernel_scatter_rows(vlmc_cpu_emit_t *e) {
  vlmc_cpu_emit_fail(e, "no cpu kernel for 'scatter_rows' yet");
  return NULL;
}
vlmc_status_t vlmc_cpu_kernel_slice(vlmc_cpu_emit_t *e) {
  vlmc_cpu_emit_fail(e, "no cpu kernel for 'slice' yet");
  return NULL;
}
vlmc_status_t vlmc_cpu_kernel_concat(vlmc_cpu_emit_t *e) {
  vlmc_cpu_emit_fail(e, "no cpu kernel for 'concat' yet");
  return NULL;
}
vlmc_status_t vlmc_cpu_kernel_transpose(vlmc_cpu_emit_t *e) {
  vlmc_cpu_emit_fail(e, "no cpu kernel for 'transpose' yet");
  return NULL;
}
vlmc_status_t vlmc_cpu_kernel_kv_cache_append(vlmc_cpu_emit_t *e) {
  vlmc_cpu_emit_fail(e, "no cpu kernel for 'kv_cache_append' yet");
  return NULL;
}
vlmc_status_t vlmc_cpu_kernel_argmax(vlmc_cpu_emit_t *e) {
  vlmc_cpu_emit_fail(e, "no cpu kernel for 'argmax' yet");
  return NULL;
}
