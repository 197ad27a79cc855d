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
 * loads and adds), reading its slice as 1, 2, 4 or 8 interleaved streams (the slice cut into
 * that many parts, one cache line of each in turn): one sequential stream per thread can read
 * far less than the memory system delivers (here 47 GB/s against 73-77 GB/s with four), so the
 * roof is the best of them. All threads start a pass together behind a barrier and a pass lasts
 * until the last one is done; each figure is the bytes of the buffer over the best pass of its
 * kind. The one-thread figure is one thread reading the whole buffer; all kinds of pass
 * alternate, so that a busy machine slows them alike. One core alone cannot keep enough loads
 * in flight to saturate the memory system on most machines, which is why its figure (or a
 * single-threaded memcpy's) can be half of what all cores read together.
 *
 * Prints one line per stream count, then the best of each on two lines (bench/cpu_backend.sh
 * reads those two; GB = 1e9 bytes), e.g.
 *   streams 1 per thread: 1 thread 24.10 GB/s, 2 threads 47.02 GB/s
 *   ...
 *   read bandwidth, 1 thread: 30.52 GB/s (best: 4 streams)
 *   read bandwidth, 2 threads: 75.13 GB/s (best: 4 streams per thread)
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

/* A plain reduction over `streams` equal parts of the slice, read interleaved: one cache
 * line (8 words) from each part in turn. One sequential stream per thread leaves the hardware
 * prefetchers and the core's miss buffers under-used on many machines (here: 47 GB/s with 2
 * threads, against 73-77 GB/s with four streams each), and a decode GEMV that reads several
 * weight rows at once is that access pattern. Integer adds reassociate freely, so -O3
 * vectorises the inner loop (wide vector loads and adds) without -ffast-math; `streams` is a
 * constant at each call (sum_slice's switch), so the loops over it unroll. */
static inline __attribute__((always_inline)) uint64_t
sum_streams(const uint64_t *restrict p, size_t n, int streams) {
  size_t part = n / (size_t)streams / 8 * 8;
  uint64_t s = 0;
  for (size_t i = 0; i < part; i += 8)
    for (int k = 0; k < streams; ++k)
      for (size_t j = 0; j < 8; ++j) s += p[(size_t)k * part + i + j];
  for (size_t i = part * (size_t)streams; i < n; ++i) s += p[i]; /* the remainder */
  return s;
}

static uint64_t sum_slice(const uint64_t *restrict p, size_t n, int streams) {
  switch (streams) {
  case 1: return sum_streams(p, n, 1);
  case 2: return sum_streams(p, n, 2);
  case 4: return sum_streams(p, n, 4);
  case 8: return sum_streams(p, n, 8);
  default: return sum_streams(p, n, streams);
  }
}

static void fill_slice(uint64_t *p, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = i * 0x9E3779B97F4A7C15ull;
}

static int writing; /* this round fills (first touch) instead of summing */
static int streams = 1; /* interleaved streams per thread in this round */

/* One round on one slice, between the two barriers that every thread waits on. */
static void round_body(slice_t *s) {
  pthread_barrier_wait(&start_barrier);
  if (writing)
    fill_slice(s->data, s->count);
  else
    s->sum += sum_slice(s->data, s->count, streams);
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
    s->sum += sum_slice(s->data, s->count, streams);
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
  /* Every (streams, threads) kind of pass in turn, `passes` times over, so that a busy machine
   * slows all alike; each kind keeps its best pass. */
  static const int stream_counts[] = {1, 2, 4, 8};
  enum { KINDS = sizeof stream_counts / sizeof stream_counts[0] };
  double best_all[KINDS], best_one[KINDS];
  for (int k = 0; k < KINDS; ++k) best_all[k] = best_one[k] = 1e30;
  for (int p = 0; p < passes; ++p)
    for (int k = 0; k < KINDS; ++k) {
      streams = stream_counts[k];
      double t = one_round(buf, count, threads, &checksum);
      if (t < best_all[k]) best_all[k] = t;
      t = one_round(buf, count, 1, &checksum);
      if (t < best_one[k]) best_one[k] = t;
    }
  double bytes = (double)count * sizeof *buf;
  int top_all = 0, top_one = 0;
  for (int k = 0; k < KINDS; ++k) {
    printf("streams %d per thread: 1 thread %.2f GB/s, %d threads %.2f GB/s\n", stream_counts[k],
           bytes / best_one[k] / 1e9, threads, bytes / best_all[k] / 1e9);
    if (best_all[k] < best_all[top_all]) top_all = k;
    if (best_one[k] < best_one[top_one]) top_one = k;
  }
  printf("read bandwidth, 1 thread: %.2f GB/s (best: %d streams)\n",
         bytes / best_one[top_one] / 1e9, stream_counts[top_one]);
  printf("read bandwidth, %d threads: %.2f GB/s (best: %d streams per thread)\n", threads,
         bytes / best_all[top_all] / 1e9, stream_counts[top_all]);
  fprintf(stderr, "membw: %ld MiB buffer, best of %d passes each (checksum %llx)\n", mib, passes,
          (unsigned long long)checksum);
  free(buf);
  return 0;
}
