/* XXH64 (the xxHash 64-bit algorithm), one-shot and streaming. Used for the per-section
 * checksums of artifacts and for identifying external parameters: fast enough (several GB/s)
 * to verify weights, and it catches every single flipped byte. */
#ifndef VLMC_SUPPORT_HASH_H
#define VLMC_SUPPORT_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint64_t total_len;
  uint64_t v[4];
  unsigned char buffer[32];
  size_t buffered;
  uint64_t seed;
} vlmc_xxh64_state_t;

uint64_t vlmc_xxh64(const void *data, size_t len, uint64_t seed);

void vlmc_xxh64_init(vlmc_xxh64_state_t *state, uint64_t seed);
void vlmc_xxh64_update(vlmc_xxh64_state_t *state, const void *data, size_t len);
uint64_t vlmc_xxh64_digest(const vlmc_xxh64_state_t *state);

#endif
