/* One status type for the whole project (IREE's iree_status_t in spirit).
 *
 * A vlmc_status_t is NULL for success; otherwise it owns a code and a message that
 * already says where and what ("config.json: vision_config.depth: expected a positive
 * integer"). Libraries return statuses and never exit() or abort() on bad input;
 * broken internal invariants are assert()s instead. */
#ifndef VLMC_SUPPORT_STATUS_H
#define VLMC_SUPPORT_STATUS_H

#include <stdarg.h>

typedef enum {
  VLMC_OK = 0,
  VLMC_INVALID_ARGUMENT, /* the caller (or the user on the command line) asked for nonsense */
  VLMC_PARSE_ERROR,      /* malformed text or binary input */
  VLMC_IO_ERROR,         /* open/read/write/mmap failed */
  VLMC_NOT_FOUND,        /* a named thing (tensor, key, pass) does not exist */
  VLMC_OUT_OF_RANGE,     /* a size, offset or index outside what is allowed */
  VLMC_UNSUPPORTED,      /* valid input that vlmc does not handle (yet) */
  VLMC_OUT_OF_MEMORY,
  VLMC_INTERNAL,         /* a pass or kernel failed in a way that is our bug */
} vlmc_status_code_t;

typedef struct vlmc_status_s *vlmc_status_t;

#if defined(__GNUC__)
#define VLMC_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#define VLMC_MUST_USE __attribute__((warn_unused_result))
#else
#define VLMC_PRINTF(fmt_index, first_arg)
#define VLMC_MUST_USE
#endif

/* Creates an error status with a printf-formatted message. code must not be VLMC_OK. */
vlmc_status_t vlmc_status_make(vlmc_status_code_t code, const char *fmt, ...) VLMC_PRINTF(2, 3);
vlmc_status_t vlmc_status_makev(vlmc_status_code_t code, const char *fmt, va_list ap);

/* Prefixes the message with context ("model.safetensors: " + message). Consumes and
 * returns status; passes NULL through unchanged so it can wrap any call. */
vlmc_status_t vlmc_status_annotate(vlmc_status_t status, const char *fmt, ...) VLMC_PRINTF(2, 3);

vlmc_status_code_t vlmc_status_code(vlmc_status_t status);
/* Borrowed; "OK" for NULL. */
const char *vlmc_status_message(vlmc_status_t status);
const char *vlmc_status_code_name(vlmc_status_code_t code);
void vlmc_status_free(vlmc_status_t status);

/* Prints "error: <message>" to stderr, frees the status and returns 1 (0 for OK), so that a
 * tool's main can end with `return vlmc_status_report(status);`. */
int vlmc_status_report(vlmc_status_t status);

#define VLMC_RETURN_IF_ERROR(expr)        \
  do {                                    \
    vlmc_status_t vlmc_status_tmp_ = (expr); \
    if (vlmc_status_tmp_) return vlmc_status_tmp_; \
  } while (0)

#endif
