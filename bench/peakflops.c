/* Peak arithmetic throughput of this CPU, with one thread and with every core: the roof that
 * compute-bound kernels (prefill and vision matmuls, long attention) are measured against in
 * bench/cpu_backend.sh. Build with the CPU's own flags:
 *
 *   cc -O2 -march=native -pthread bench/peakflops.c -o peakflops && ./peakflops [THREADS]
 *
 * Three kernels, each a loop of independent multiply-adds on registers only (no memory
 * traffic), 16 accumulators with different starting values (equal ones were merged into one
 * chain by the compiler: until 2026-12-02 this measured one FMA's latency and credited 10, so
 * the roofs it printed before then were not peaks) to cover the latency on two pipes:
 *   f32 FMA, 256-bit   (AVX2 + FMA: vfmadd231ps ymm, 8 lanes x 2 flops)
 *   f32 FMA, 512-bit   (AVX-512F: vfmadd231ps zmm, 16 lanes x 2 flops)
 *   bf16 dot, 512-bit  (AVX512_BF16: vdpbf16ps zmm, 16 f32 lanes x 2 bf16 products x 2 flops)
 * Each kernel's code is compiled for its own feature (target attributes), and run only when
 * the CPU reports it (cpuid via __builtin_cpu_supports); a missing feature prints a line that
 * says so instead of a figure. A GFLOP/s figure is the best of several timed rounds; with
 * several threads, all start a round together behind a barrier and the round lasts until the
 * last one is done.
 *
 * Prints one line per kernel and thread count on stdout, e.g.
 *   peak f32 fma 256-bit, 1 thread: 147.2 GFLOP/s
 *   peak f32 fma 512-bit, 2 threads: 290.5 GFLOP/s
 *   peak bf16 dot 512-bit: not measured: the CPU has no avx512bf16
 * (bench/cpu_backend.sh parses these lines.)
 */
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { ROUNDS = 5 };
static const long ITERS = 20 * 1000 * 1000; /* ~0.1-0.3 s a round at a few GHz */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Each kernel runs `iters` steps of 16 independent multiply-adds and returns a value that
 * depends on every accumulator, so that none of the work can be dropped. 16 chains cover a
 * 4-5 cycle FMA latency and vdpbf16ps's longer one on two pipes. */
#define STEP16(op)                                                                             \
  a0 = op(a0, x, y); a1 = op(a1, x, y); a2 = op(a2, x, y); a3 = op(a3, x, y);                    \
  a4 = op(a4, x, y); a5 = op(a5, x, y); a6 = op(a6, x, y); a7 = op(a7, x, y);                    \
  a8 = op(a8, x, y); a9 = op(a9, x, y); a10 = op(a10, x, y); a11 = op(a11, x, y);                \
  a12 = op(a12, x, y); a13 = op(a13, x, y); a14 = op(a14, x, y); a15 = op(a15, x, y)
/* 16 accumulators with different starting values: equal ones would be one chain to the
 * compiler (it merged them, and the loop measured one multiply-add's latency, credited 16). */
#define ACCUMULATORS16(T, SET1)                                                                \
  T a0 = SET1(0.f), a1 = SET1(1.f), a2 = SET1(2.f), a3 = SET1(3.f), a4 = SET1(4.f),              \
    a5 = SET1(5.f), a6 = SET1(6.f), a7 = SET1(7.f), a8 = SET1(8.f), a9 = SET1(9.f),              \
    a10 = SET1(10.f), a11 = SET1(11.f), a12 = SET1(12.f), a13 = SET1(13.f), a14 = SET1(14.f),    \
    a15 = SET1(15.f)
/* The sum of the 16 accumulators (ADD: the vector add of the kernel's width). */
#define SUM16(ADD)                                                                             \
  ADD(ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7))),                          \
      ADD(ADD(ADD(a8, a9), ADD(a10, a11)), ADD(ADD(a12, a13), ADD(a14, a15))))

__attribute__((target("avx2,fma"))) static float fma256(long iters) {
  __m256 x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(0.9999999f);
  ACCUMULATORS16(__m256, _mm256_set1_ps);
  for (long i = 0; i < iters; ++i) {
    STEP16(_mm256_fmadd_ps);
  }
  return _mm256_cvtss_f32(SUM16(_mm256_add_ps));
}

__attribute__((target("avx512f"))) static float fma512(long iters) {
  __m512 x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
  ACCUMULATORS16(__m512, _mm512_set1_ps);
  for (long i = 0; i < iters; ++i) {
    STEP16(_mm512_fmadd_ps);
  }
  return _mm512_reduce_add_ps(SUM16(_mm512_add_ps));
}

/* vdpbf16ps's operand order differs from the FMA's (acc, a, b): the same macro shape. */
#define DPBF16(acc, a, b) _mm512_dpbf16_ps(acc, a, b)

__attribute__((target("avx512f,avx512bf16"))) static float dot512bf16(long iters) {
  __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3f80);
  ACCUMULATORS16(__m512, _mm512_set1_ps);
  for (long i = 0; i < iters; ++i) {
    STEP16(DPBF16);
  }
  return _mm512_reduce_add_ps(SUM16(_mm512_add_ps));
}

typedef struct {
  const char *name;
  const char *feature; /* what __builtin_cpu_supports must say, for the "missing" line */
  int available;
  float (*run)(long iters);
  double flops_per_step; /* 16 instructions x lanes x flops per lane */
} kernel_t;

typedef struct {
  const kernel_t *kernel;
  float result;
} job_t;

static pthread_barrier_t start_barrier, end_barrier;

static void *worker(void *arg) {
  job_t *job = arg;
  pthread_barrier_wait(&start_barrier);
  job->result = job->kernel->run(ITERS);
  pthread_barrier_wait(&end_barrier);
  return NULL;
}

/* One round of `kernel` on `threads` threads; the seconds from the start barrier to the end
 * one, as seen by the calling thread (thread 0). */
static double one_round(const kernel_t *kernel, int threads, float *sink) {
  pthread_t *ids = calloc((size_t)threads, sizeof *ids);
  job_t *jobs = calloc((size_t)threads, sizeof *jobs);
  if (!ids || !jobs) {
    fprintf(stderr, "peakflops: out of memory\n");
    exit(1);
  }
  pthread_barrier_init(&start_barrier, NULL, (unsigned)threads);
  pthread_barrier_init(&end_barrier, NULL, (unsigned)threads);
  for (int t = 0; t < threads; ++t) jobs[t].kernel = kernel;
  for (int t = 1; t < threads; ++t)
    if (pthread_create(&ids[t], NULL, worker, &jobs[t]) != 0) {
      fprintf(stderr, "peakflops: cannot start thread %d\n", t);
      exit(1);
    }
  pthread_barrier_wait(&start_barrier);
  double t0 = now_s();
  jobs[0].result = kernel->run(ITERS);
  pthread_barrier_wait(&end_barrier);
  double dt = now_s() - t0;
  for (int t = 1; t < threads; ++t) pthread_join(ids[t], NULL);
  for (int t = 0; t < threads; ++t) *sink += jobs[t].result;
  pthread_barrier_destroy(&start_barrier);
  pthread_barrier_destroy(&end_barrier);
  free(ids);
  free(jobs);
  return dt;
}

static void measure(const kernel_t *k, int threads, float *sink) {
  if (!k->available) {
    printf("peak %s, %d thread%s: not measured: the CPU has no %s\n", k->name, threads,
           threads == 1 ? "" : "s", k->feature);
    return;
  }
  double best = 1e30;
  for (int r = 0; r < ROUNDS; ++r) {
    double t = one_round(k, threads, sink);
    if (t < best) best = t;
  }
  double flops = k->flops_per_step * (double)ITERS * threads;
  printf("peak %s, %d thread%s: %.1f GFLOP/s\n", k->name, threads, threads == 1 ? "" : "s",
         flops / best / 1e9);
  fflush(stdout);
}

int main(int argc, char **argv) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = argc > 1 ? atoi(argv[1]) : (int)(cores > 0 ? cores : 1);
  if (argc > 2 || threads < 1 || threads > 1024) {
    fprintf(stderr, "usage: peakflops [THREADS]\n");
    return 2;
  }
  __builtin_cpu_init();
  kernel_t kernels[] = {
      {"f32 fma 256-bit", "avx2+fma",
       __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), fma256, 16.0 * 8 * 2},
      {"f32 fma 512-bit", "avx512f", __builtin_cpu_supports("avx512f"), fma512, 16.0 * 16 * 2},
      {"bf16 dot 512-bit", "avx512bf16",
       __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16"), dot512bf16,
       16.0 * 16 * 4},
  };
  float sink = 0;
  for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; ++k) {
    measure(&kernels[k], 1, &sink);
    if (threads > 1) measure(&kernels[k], threads, &sink);
  }
  fprintf(stderr, "peakflops: best of %d rounds of %ld steps each (checksum %g)\n", ROUNDS,
          ITERS, (double)sink);
  return 0;
}
