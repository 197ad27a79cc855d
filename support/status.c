#include "support/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vlmc_status_s {
  vlmc_status_code_t code;
  char *message;
};

/* Used when even the status allocation fails: a status must always be returnable. */
static struct vlmc_status_s out_of_memory_status = {VLMC_OUT_OF_MEMORY, "out of memory"};

static char *format_message(const char *fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (n < 0) n = 0;
  char *text = malloc((size_t)n + 1);
  if (!text) return NULL;
  vsnprintf(text, (size_t)n + 1, fmt, ap);
  return text;
}

vlmc_status_t vlmc_status_makev(vlmc_status_code_t code, const char *fmt, va_list ap) {
  struct vlmc_status_s *status = malloc(sizeof *status);
  if (!status) return &out_of_memory_status;
  status->code = code == VLMC_OK ? VLMC_INTERNAL : code;
  status->message = format_message(fmt, ap);
  if (!status->message) {
    free(status);
    return &out_of_memory_status;
  }
  return status;
}

vlmc_status_t vlmc_status_make(vlmc_status_code_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlmc_status_t status = vlmc_status_makev(code, fmt, ap);
  va_end(ap);
  return status;
}

vlmc_status_t vlmc_status_annotate(vlmc_status_t status, const char *fmt, ...) {
  if (!status || status == &out_of_memory_status) return status;
  va_list ap;
  va_start(ap, fmt);
  char *prefix = format_message(fmt, ap);
  va_end(ap);
  if (!prefix) return status;
  size_t a = strlen(prefix), b = strlen(status->message);
  char *joined = malloc(a + b + 1);
  if (joined) {
    memcpy(joined, prefix, a);
    memcpy(joined + a, status->message, b + 1);
    free(status->message);
    status->message = joined;
  }
  free(prefix);
  return status;
}

vlmc_status_code_t vlmc_status_code(vlmc_status_t status) {
  return status ? status->code : VLMC_OK;
}

const char *vlmc_status_message(vlmc_status_t status) {
  return status ? status->message : "OK";
}

const char *vlmc_status_code_name(vlmc_status_code_t code) {
  switch (code) {
    case VLMC_OK: return "ok";
    case VLMC_INVALID_ARGUMENT: return "invalid argument";
    case VLMC_PARSE_ERROR: return "parse error";
    case VLMC_IO_ERROR: return "i/o error";
    case VLMC_NOT_FOUND: return "not found";
    case VLMC_OUT_OF_RANGE: return "out of range";
    case VLMC_UNSUPPORTED: return "unsupported";
    case VLMC_OUT_OF_MEMORY: return "out of memory";
    case VLMC_INTERNAL: return "internal error";
  }
  return "unknown";
}

void vlmc_status_free(vlmc_status_t status) {
  if (!status || status == &out_of_memory_status) return;
  free(status->message);
  free(status);
}

int vlmc_status_report(vlmc_status_t status) {
  if (!status) return 0;
  fprintf(stderr, "error: %s\n", status->message);
  vlmc_status_free(status);
  return 1;
}
