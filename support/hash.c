#include "support/hash.h"

#include <string.h>

static const uint64_t P1 = 0x9E3779B185EBCA87ULL;
static const uint64_t P2 = 0xC2B2AE3D27D4EB4FULL;
static const uint64_t P3 = 0x165667B19E3779F9ULL;
static const uint64_t P4 = 0x85EBCA77C2B2AE63ULL;
static const uint64_t P5 = 0x27D4EB2F165667C5ULL;

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* Little-endian loads regardless of host order and alignment. */
static uint64_t read64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
static uint32_t read32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t round64(uint64_t acc, uint64_t input) {
  acc += input * P2;
  acc = rotl(acc, 31);
  return acc * P1;
}

static uint64_t merge_round(uint64_t acc, uint64_t val) {
  acc ^= round64(0, val);
  return acc * P1 + P4;
}

static uint64_t finalize(uint64_t h, const unsigned char *p, size_t len) {
  while (len >= 8) {
    h ^= round64(0, read64(p));
    h = rotl(h, 27) * P1 + P4;
    p += 8;
    len -= 8;
  }
  if (len >= 4) {
    h ^= (uint64_t)read32(p) * P1;
    h = rotl(h, 23) * P2 + P3;
    p += 4;
    len -= 4;
  }
  while (len > 0) {
    h ^= (*p) * P5;
    h = rotl(h, 11) * P1;
    ++p;
    --len;
  }
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

void vlmc_xxh64_init(vlmc_xxh64_state_t *state, uint64_t seed) {
  memset(state, 0, sizeof *state);
  state->seed = seed;
  state->v[0] = seed + P1 + P2;
  state->v[1] = seed + P2;
  state->v[2] = seed;
  state->v[3] = seed - P1;
}

static void consume_stripe(uint64_t v[4], const unsigned char *p) {
  v[0] = round64(v[0], read64(p));
  v[1] = round64(v[1], read64(p + 8));
  v[2] = round64(v[2], read64(p + 16));
  v[3] = round64(v[3], read64(p + 24));
}

void vlmc_xxh64_update(vlmc_xxh64_state_t *state, const void *data, size_t len) {
  const unsigned char *p = data;
  state->total_len += len;
  if (state->buffered + len < 32) {
    if (len) memcpy(state->buffer + state->buffered, p, len);
    state->buffered += len;
    return;
  }
  if (state->buffered) {
    size_t fill = 32 - state->buffered;
    memcpy(state->buffer + state->buffered, p, fill);
    consume_stripe(state->v, state->buffer);
    p += fill;
    len -= fill;
    state->buffered = 0;
  }
  while (len >= 32) {
    consume_stripe(state->v, p);
    p += 32;
    len -= 32;
  }
  if (len) memcpy(state->buffer, p, len);
  state->buffered = len;
}

uint64_t vlmc_xxh64_digest(const vlmc_xxh64_state_t *state) {
  uint64_t h;
  if (state->total_len >= 32) {
    const uint64_t *v = state->v;
    h = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18);
    for (int i = 0; i < 4; ++i) h = merge_round(h, v[i]);
  } else {
    h = state->seed + P5;
  }
  h += state->total_len;
  return finalize(h, state->buffer, state->buffered);
}

uint64_t vlmc_xxh64(const void *data, size_t len, uint64_t seed) {
  vlmc_xxh64_state_t state;
  vlmc_xxh64_init(&state, seed);
  vlmc_xxh64_update(&state, data, len);
  return vlmc_xxh64_digest(&state);
}
