/* IEEE binary16 (f16) and bfloat16 (bf16) from and to f32: the one implementation the
 * safetensors reader, the reference executor's low-precision emulation, the quantized blocks and
 * the random-checkpoint tool share. The narrowing conversions round to nearest, ties to even,
 * overflow to infinity (f16: anything at or above 65520) and keep a NaN a (quiet) NaN. */
#ifndef VLMC_SUPPORT_FLOAT16_H
#define VLMC_SUPPORT_FLOAT16_H

#include <stdint.h>

uint16_t vlmc_f32_to_f16(float value);
float vlmc_f16_to_f32(uint16_t bits);
uint16_t vlmc_f32_to_bf16(float value);
float vlmc_bf16_to_f32(uint16_t bits);
/* value rounded to f16 / bf16 and back: how the executor emulates low-precision storage. */
float vlmc_round_f16(float value);
float vlmc_round_bf16(float value);

#endif
