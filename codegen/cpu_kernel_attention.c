/* PLACEHOLDER: being written; every template here refuses until it is. */
#include "codegen/cpu_kernels.h"

vlmc_status_t vlmc_cpu_kernel_attention(vlmc_cpu_emit_t *e) {
  vlmc_cpu_emit_fail(e, "no cpu kernel for 'attention' yet");
  return NULL;
}
