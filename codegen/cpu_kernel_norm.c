/* PLACEHOLDER: being written; every template here refuses until it is. */
#include "codegen/cpu_kernels.h"

vlmc_status_t vlmc_cpu_kernel_rms_norm(vlmc_cpu_emit_t *e) {
  vlmc_cpu_emit_fail(e, "no cpu kernel for 'rms_norm' yet");
  return NULL;
}
vlmc_status_t vlmc_cpu_kernel_layer_norm(vlmc_cpu_emit_t *e) {
  vlmc_cpu_emit_fail(e, "no cpu kernel for 'layer_norm' yet");
  return NULL;
}
vlmc_status_t vlmc_cpu_kernel_softmax(vlmc_cpu_emit_t *e) {
  vlmc_cpu_emit_fail(e, "no cpu kernel for 'softmax' yet");
  return NULL;
}
