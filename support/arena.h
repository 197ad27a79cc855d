/* A bump allocator that owns everything allocated from it (QBE's pool, IREE's arena).
 * IR modules, parsed configs and similar trees live in one arena and are freed at once;
 * nothing allocated here is ever freed individually. All size arithmetic is checked. */
#ifndef VLMC_SUPPORT_ARENA_H
#define VLMC_SUPPORT_ARENA_H

#include <stddef.h>

typedef struct vlmc_arena_block_s vlmc_arena_block_t;

typedef struct {
  vlmc_arena_block_t *head;
  size_t bytes_allocated; /* total handed out, for statistics */
} vlmc_arena_t;

void vlmc_arena_init(vlmc_arena_t *arena);
void vlmc_arena_deinit(vlmc_arena_t *arena);

/* Returns zeroed memory aligned to `align` (a power of two), or NULL when out of memory. */
void *vlmc_arena_alloc(vlmc_arena_t *arena, size_t size, size_t align);
/* count * size with overflow checking; NULL on overflow or out of memory. */
void *vlmc_arena_alloc_array(vlmc_arena_t *arena, size_t count, size_t size, size_t align);
char *vlmc_arena_strndup(vlmc_arena_t *arena, const char *text, size_t len);
char *vlmc_arena_strdup(vlmc_arena_t *arena, const char *text);

#define VLMC_ARENA_NEW(arena, type) ((type *)vlmc_arena_alloc((arena), sizeof(type), _Alignof(type)))
#define VLMC_ARENA_NEW_ARRAY(arena, type, count) \
  ((type *)vlmc_arena_alloc_array((arena), (count), sizeof(type), _Alignof(type)))

#endif
