/* A small string -> pointer hash map living in an arena (symbol, parameter and value-name
 * lookups). Linear probing; the table doubles at half load. */
#include <string.h>

#include "ir/internal.h"
#include "support/checked_math.h"

typedef struct {
  const char *key;
  size_t len;
  void *value;
} strmap_entry_t;

struct vlmc_ir_strmap_s {
  vlmc_arena_t *arena;
  strmap_entry_t *entries;
  size_t capacity; /* a power of two */
  size_t count;
};

static uint64_t hash_bytes(const char *key, size_t len) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < len; ++i) {
    h ^= (unsigned char)key[i];
    h *= 1099511628211ull;
  }
  return h;
}

vlmc_ir_strmap_t *vlmc_ir_strmap_create(vlmc_arena_t *arena) {
  vlmc_ir_strmap_t *map = VLMC_ARENA_NEW(arena, vlmc_ir_strmap_t);
  if (!map) return NULL;
  map->arena = arena;
  map->capacity = 16;
  map->entries = VLMC_ARENA_NEW_ARRAY(arena, strmap_entry_t, map->capacity);
  return map->entries ? map : NULL;
}

static strmap_entry_t *strmap_slot(strmap_entry_t *entries, size_t capacity, const char *key,
                                   size_t len) {
  size_t mask = capacity - 1;
  for (size_t i = hash_bytes(key, len) & mask;; i = (i + 1) & mask) {
    strmap_entry_t *e = &entries[i];
    if (!e->key || (e->len == len && memcmp(e->key, key, len) == 0)) return e;
  }
}

static bool strmap_grow(vlmc_ir_strmap_t *map) {
  size_t capacity;
  if (!vlmc_mul_size(map->capacity, 2, &capacity)) return false;
  strmap_entry_t *entries = VLMC_ARENA_NEW_ARRAY(map->arena, strmap_entry_t, capacity);
  if (!entries) return false;
  for (size_t i = 0; i < map->capacity; ++i) {
    strmap_entry_t *old = &map->entries[i];
    if (old->key) *strmap_slot(entries, capacity, old->key, old->len) = *old;
  }
  map->entries = entries;
  map->capacity = capacity;
  return true;
}

bool vlmc_ir_strmap_put(vlmc_ir_strmap_t *map, const char *key, size_t len, void *value) {
  if ((map->count + 1) * 2 > map->capacity && !strmap_grow(map)) return false;
  strmap_entry_t *e = strmap_slot(map->entries, map->capacity, key, len);
  if (!e->key) {
    e->key = key;
    e->len = len;
    map->count++;
  }
  e->value = value;
  return true;
}

void *vlmc_ir_strmap_get(const vlmc_ir_strmap_t *map, const char *key, size_t len) {
  return strmap_slot(map->entries, map->capacity, key, len)->value;
}

bool vlmc_ir_grow(vlmc_arena_t *arena, void **data, uint32_t *capacity, uint32_t need,
                  size_t elem, size_t align) {
  if (need <= *capacity) return true;
  uint32_t cap = *capacity ? *capacity : 8;
  while (cap < need) {
    if (cap > UINT32_MAX / 2) return false;
    cap *= 2;
  }
  void *grown = vlmc_arena_alloc_array(arena, cap, elem, align);
  if (!grown) return false;
  if (*data && *capacity) memcpy(grown, *data, (size_t)*capacity * elem);
  *data = grown;
  *capacity = cap;
  return true;
}
