/* Overflow-checked size arithmetic. Every size that comes from a file (a tensor shape,
 * a header length, an offset) goes through these before it is used. Each returns false
 * on overflow and leaves *out unspecified. */
#ifndef VLMC_SUPPORT_CHECKED_MATH_H
#define VLMC_SUPPORT_CHECKED_MATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline bool vlmc_add_size(size_t a, size_t b, size_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
static inline bool vlmc_mul_size(size_t a, size_t b, size_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline bool vlmc_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
static inline bool vlmc_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline bool vlmc_mul_i64(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline bool vlmc_add_i64(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}

#endif
