#include "support/float16.h"

#include <string.h>

static uint32_t f32_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  return x;
}

static float f32_from_bits(uint32_t x) {
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

/* Rounds `value` >> shift to nearest, ties to even. */
static uint32_t shift_round_even(uint32_t value, uint32_t shift) {
  uint32_t kept = value >> shift, rest = value & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1))) ++kept;
  return kept;
}

uint16_t vlmc_f32_to_f16(float value) {
  uint32_t x = f32_bits(value);
  uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0));
  int32_t e = (int32_t)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    /* Subnormal f16 (or zero): the value in units of 2^-24, rounded. Below 2^-25 it is 0. */
    if (e < -10) return (uint16_t)sign;
    return (uint16_t)(sign | shift_round_even(mant | 0x800000u, (uint32_t)(14 - e)));
  }
  /* A carry out of the mantissa moves into the exponent, up to infinity: that is right. */
  return (uint16_t)(sign | shift_round_even(((uint32_t)e << 23) | mant, 13));
}

float vlmc_f16_to_f32(uint16_t bits) {
  uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu, mant = bits & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    float magnitude = (float)mant * 0x1p-24f; /* exact: at most 11 significant bits */
    return sign ? -magnitude : magnitude;
  }
  return f32_from_bits(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t vlmc_f32_to_bf16(float value) {
  uint32_t x = f32_bits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float vlmc_bf16_to_f32(uint16_t bits) { return f32_from_bits((uint32_t)bits << 16); }

float vlmc_round_f16(float value) { return vlmc_f16_to_f32(vlmc_f32_to_f16(value)); }
float vlmc_round_bf16(float value) { return vlmc_bf16_to_f32(vlmc_f32_to_bf16(value)); }

