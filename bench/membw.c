/* Memory read bandwidth, with one thread and with every core: what decode of a large model is
 * bound by (each generated token reads every weight once). bench/cpu_backend.sh builds and runs
 * it (cc -O3 -march=native -pthread bench/membw.c -o membw).
 *
 *   membw [MIB] [PASSES] [THREADS]     (defaults: 8 x the last-level cache, at least 1024 MiB;
 *                                       5 passes; every online core)
 *
 * One buffer of MIB MiB, far larger than any cache, cut into one slice per thread. The size
 * matters: the development VM reports a 533 MB L3, and a 1 GiB buffer, half of which stays in
 * it, read at 63 GB/s where 4 and 8 GiB read at 34 and 29 GB/s (what decode streams at). Each thread
 * writes its own slice first (first touch: its pages land on its memory node), then in every
 * pass sums it with a plain integer-add reduction (-O3 -march=native turns it into wide vector
 * loads and adds). All threads start a pass together behind a barrier and a pass lasts until
 * the last one is done; the figure is the bytes of the buffer over the best pass. The one-thread
 * figure is one thread reading the whole buffer; passes of the two kinds alternate, so that a
 * busy machine slows both alike. One core alone cannot keep enough loads in flight to saturate
 * the memory system on most machines, which is why its figure (or a single-threaded memcpy's)
 * can be half of what all cores read together.
 *
 * Prints two lines on stdout (GB = 1e9 bytes), e.g.
 *   read bandwidth, 1 thread: 14.21 GB/s
 *   read bandwidth, 2 threads: 27.95 GB/s
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  uint64_t *data;
  size_t count; /* elements */
  uint64_t sum;
} slice_t;

static pthread_barrier_t start_barrier, end_barrier;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A plain reduction: integer adds reassociate freely, so -O3 vectorises it (vpaddq on 256-
 * or 512-bit loads, several accumulators when unrolled) without -ffast-math. */
static uint64_t sum_slice(const uint64_t *restrict p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; ++i) s += p[i];
  return s;
}

static void fill_slice(uint64_t *p, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = i * 0x9E3779B97F4A7C15ull;
}

static int writing; /* this round fills (first touch) instead of summing */

/* One round on one slice, between the two barriers that every thread waits on. */
static void round_body(slice_t *s) {
  pthread_barrier_wait(&start_barrier);
  if (writing)
    fill_slice(s->data, s->count);
  else
    s->sum += sum_slice(s->data, s->count);
  pthread_barrier_wait(&end_barrier);
}

static void *worker(void *arg) {
  round_body(arg);
  return NULL;
}

/* One round with `threads` threads over the whole buffer, each on its own slice (the same
 * slices every time, so a thread reads what it first touched); returns its seconds, from
 * the start barrier to the end one. The calling thread is thread 0 and holds the clock. */
static double one_round(uint64_t *buf, size_t count, int threads, uint64_t *checksum) {
  slice_t *slices = calloc((size_t)threads, sizeof *slices);
  pthread_t *ids = calloc((size_t)threads, sizeof *ids);
  if (!slices || !ids) {
    fprintf(stderr, "membw: out of memory\n");
    exit(1);
  }
  size_t per = count / (size_t)threads / 8 * 8;
  for (int t = 0; t < threads; ++t) {
    slices[t].data = buf + (size_t)t * per;
    slices[t].count = t == threads - 1 ? count - (size_t)t * per : per;
  }
  pthread_barrier_init(&start_barrier, NULL, (unsigned)threads);
  pthread_barrier_init(&end_barrier, NULL, (unsigned)threads);
  for (int t = 1; t < threads; ++t)
    if (pthread_create(&ids[t], NULL, worker, &slices[t]) != 0) {
      fprintf(stderr, "membw: cannot start thread %d\n", t);
      exit(1);
    }
  /* The clock starts when thread 0 leaves the start barrier (all threads are there) and stops
   * when it leaves the end barrier (all threads are done). */
  slice_t *s = &slices[0];
  pthread_barrier_wait(&start_barrier);
  double t0 = now_s();
  if (writing)
    fill_slice(s->data, s->count);
  else
    s->sum += sum_slice(s->data, s->count);
  pthread_barrier_wait(&end_barrier);
  double dt = now_s() - t0;
  for (int t = 1; t < threads; ++t) pthread_join(ids[t], NULL);
  for (int t = 0; t < threads; ++t) *checksum += slices[t].sum;
  pthread_barrier_destroy(&start_barrier);
  pthread_barrier_destroy(&end_barrier);
  free(slices);
  free(ids);
  return dt;
}

int main(int argc, char **argv) {
  long llc = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
  llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
  long fallback = llc > 0 ? 8 * (llc >> 20) : 1024;
  long mib = argc > 1 ? atol(argv[1]) : (fallback > 1024 ? fallback : 1024);
  int passes = argc > 2 ? atoi(argv[2]) : 5;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = argc > 3 ? atoi(argv[3]) : (int)(cores > 0 ? cores : 1);
  if (mib < 1 || passes < 1 || threads < 1 || threads > 1024) {
    fprintf(stderr, "usage: membw [MIB] [PASSES] [THREADS]\n");
    return 2;
  }
  size_t count = (size_t)mib << 20 >> 3;
  uint64_t *buf = NULL;
  if (posix_memalign((void **)&buf, 4096, count * sizeof *buf) != 0) {
    fprintf(stderr, "membw: cannot allocate %ld MiB\n", mib);
    return 1;
  }
  uint64_t checksum = 0;
  writing = 1; /* first touch, by the threads that will read each slice */
  one_round(buf, count, threads, &checksum);
  writing = 0;
  /* The two kinds of pass alternate, so that a busy machine slows both alike. */
  double best_all = 1e30, best_one = 1e30;
  for (int p = 0; p < passes; ++p) {
    double t = one_round(buf, count, threads, &checksum);
    if (t < best_all) best_all = t;
    t = one_round(buf, count, 1, &checksum);
    if (t < best_one) best_one = t;
  }
  double bytes = (double)count * sizeof *buf;
  printf("read bandwidth, 1 thread: %.2f GB/s\n", bytes / best_one / 1e9);
  printf("read bandwidth, %d threads: %.2f GB/s\n", threads, bytes / best_all / 1e9);
  fprintf(stderr, "membw: %ld MiB buffer, best of %d passes each (checksum %llx)\n", mib, passes,
          (unsigned long long)checksum);
  free(buf);
  return 0;
}
