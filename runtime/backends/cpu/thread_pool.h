/* A small persistent thread pool: the cpu backend splits each kernel's work range over it,
 * hundreds of times per decoded token, so workers are started once and wait between jobs
 * (a thread start per dispatch would cost more than a small kernel). */
#ifndef VLMC_RUNTIME_BACKENDS_CPU_THREAD_POOL_H
#define VLMC_RUNTIME_BACKENDS_CPU_THREAD_POOL_H

#include <stdint.h>

#include "support/status.h"

typedef struct vlmc_thread_pool_s vlmc_thread_pool_t;

/* fn(arg, begin, end) for one chunk of [0, total). */
typedef void (*vlmc_pool_fn)(void *arg, int64_t begin, int64_t end);

/* `threads` workers in all, the caller's thread included (1: no extra threads). */
vlmc_status_t vlmc_thread_pool_create(uint32_t threads, vlmc_thread_pool_t **out);
void vlmc_thread_pool_destroy(vlmc_thread_pool_t *pool);
uint32_t vlmc_thread_pool_size(const vlmc_thread_pool_t *pool);
/* Splits [0, total) into `chunks` contiguous pieces of nearly equal size and runs them on the
 * pool (the caller runs one); returns when all are done. chunks is clamped to [1, total]. */
void vlmc_thread_pool_run(vlmc_thread_pool_t *pool, int64_t total, uint32_t chunks,
                          vlmc_pool_fn fn, void *arg);

#endif
