#include "support/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "support/checked_math.h"

struct vlmc_arena_block_s {
  vlmc_arena_block_t *next;
  size_t capacity;
  size_t used;
  _Alignas(max_align_t) unsigned char data[];
};

enum { ARENA_BLOCK_SIZE = 64 * 1024 };

void vlmc_arena_init(vlmc_arena_t *arena) {
  arena->head = NULL;
  arena->bytes_allocated = 0;
}

void vlmc_arena_deinit(vlmc_arena_t *arena) {
  vlmc_arena_block_t *block = arena->head;
  while (block) {
    vlmc_arena_block_t *next = block->next;
    free(block);
    block = next;
  }
  arena->head = NULL;
  arena->bytes_allocated = 0;
}

static vlmc_arena_block_t *arena_new_block(vlmc_arena_t *arena, size_t min_capacity) {
  size_t capacity = min_capacity > ARENA_BLOCK_SIZE ? min_capacity : ARENA_BLOCK_SIZE;
  size_t total;
  if (!vlmc_add_size(sizeof(vlmc_arena_block_t), capacity, &total)) return NULL;
  vlmc_arena_block_t *block = malloc(total);
  if (!block) return NULL;
  block->capacity = capacity;
  block->used = 0;
  block->next = arena->head;
  arena->head = block;
  return block;
}

void *vlmc_arena_alloc(vlmc_arena_t *arena, size_t size, size_t align) {
  if (align == 0) align = 1;
  vlmc_arena_block_t *block = arena->head;
  size_t offset = 0;
  if (block) offset = (block->used + align - 1) & ~(align - 1);
  if (!block || offset > block->capacity || size > block->capacity - offset) {
    size_t need;
    if (!vlmc_add_size(size, align, &need)) return NULL;
    block = arena_new_block(arena, need);
    if (!block) return NULL;
    offset = 0;
  }
  void *out = block->data + offset;
  block->used = offset + size;
  arena->bytes_allocated += size;
  memset(out, 0, size);
  return out;
}

void *vlmc_arena_alloc_array(vlmc_arena_t *arena, size_t count, size_t size, size_t align) {
  size_t total;
  if (!vlmc_mul_size(count, size, &total)) return NULL;
  return vlmc_arena_alloc(arena, total, align);
}

char *vlmc_arena_strndup(vlmc_arena_t *arena, const char *text, size_t len) {
  size_t total;
  if (!vlmc_add_size(len, 1, &total)) return NULL;
  char *copy = vlmc_arena_alloc(arena, total, 1);
  if (!copy) return NULL;
  memcpy(copy, text, len);
  copy[len] = '\0';
  return copy;
}

char *vlmc_arena_strdup(vlmc_arena_t *arena, const char *text) {
  return vlmc_arena_strndup(arena, text, strlen(text));
}
