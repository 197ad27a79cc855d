/* The persistent thread pool (runtime/backends/cpu/thread_pool.h): one job at a time, chunks handed out
 * through a counter under the pool's mutex (jobs are ~10 us to seconds; the lock is not the
 * bottleneck). */
#include "runtime/backends/cpu/thread_pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

struct vlmc_thread_pool_s {
  pthread_mutex_t lock;
  pthread_cond_t wake, done;
  pthread_t *workers;
  uint32_t num_workers; /* extra threads (size - 1) */
  uint64_t generation;  /* bumped per job */
  bool stopping;
  /* The current job. */
  vlmc_pool_fn fn;
  void *arg;
  int64_t total;
  uint32_t chunks, next_chunk, finished;
};

static void chunk_range(const vlmc_thread_pool_t *p, uint32_t c, int64_t *begin, int64_t *end) {
  *begin = p->total * (int64_t)c / (int64_t)p->chunks;
  *end = p->total * (int64_t)(c + 1) / (int64_t)p->chunks;
}

/* Runs chunks until none is left; called with the lock held, returns with it held. */
static void work_locked(vlmc_thread_pool_t *p) {
  while (p->next_chunk < p->chunks) {
    uint32_t c = p->next_chunk++;
    int64_t begin, end;
    chunk_range(p, c, &begin, &end);
    vlmc_pool_fn fn = p->fn;
    void *arg = p->arg;
    pthread_mutex_unlock(&p->lock);
    fn(arg, begin, end);
    pthread_mutex_lock(&p->lock);
    if (++p->finished == p->chunks) pthread_cond_signal(&p->done);
  }
}

static void *worker_main(void *arg) {
  vlmc_thread_pool_t *p = arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->stopping && p->generation == seen) pthread_cond_wait(&p->wake, &p->lock);
    if (p->stopping) break;
    seen = p->generation;
    work_locked(p);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

vlmc_status_t vlmc_thread_pool_create(uint32_t threads, vlmc_thread_pool_t **out) {
  vlmc_thread_pool_t *p = calloc(1, sizeof *p);
  if (!p) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  uint32_t extra = threads > 1 ? threads - 1 : 0;
  p->workers = calloc(extra ? extra : 1, sizeof *p->workers);
  if (!p->workers) {
    vlmc_thread_pool_destroy(p);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  for (uint32_t i = 0; i < extra; ++i) {
    if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) {
      vlmc_thread_pool_destroy(p);
      return vlmc_status_make(VLMC_INTERNAL, "cannot start worker thread %u of %u", i + 1, extra);
    }
    p->num_workers++;
  }
  *out = p;
  return NULL;
}

void vlmc_thread_pool_destroy(vlmc_thread_pool_t *p) {
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  p->stopping = true;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  for (uint32_t i = 0; i < p->num_workers; ++i) pthread_join(p->workers[i], NULL);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->lock);
  free(p->workers);
  free(p);
}

uint32_t vlmc_thread_pool_size(const vlmc_thread_pool_t *p) { return p->num_workers + 1; }

void vlmc_thread_pool_run(vlmc_thread_pool_t *p, int64_t total, uint32_t chunks,
                          vlmc_pool_fn fn, void *arg) {
  if (total <= 0) return;
  if (chunks < 1) chunks = 1;
  if ((int64_t)chunks > total) chunks = (uint32_t)total;
  if (chunks == 1 || p->num_workers == 0) {
    fn(arg, 0, total);
    return;
  }
  pthread_mutex_lock(&p->lock);
  p->fn = fn;
  p->arg = arg;
  p->total = total;
  p->chunks = chunks;
  p->next_chunk = 0;
  p->finished = 0;
  p->generation++;
  pthread_cond_broadcast(&p->wake);
  work_locked(p);
  while (p->finished < p->chunks) pthread_cond_wait(&p->done, &p->lock);
  pthread_mutex_unlock(&p->lock);
}
