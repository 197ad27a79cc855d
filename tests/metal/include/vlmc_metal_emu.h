/* The Metal emulation's thread context (tests/metal/README.md), shared by the executor
 * (tests/metal/emu.c, C) and every kernel's translation unit (C++, through the stand-in
 * <metal_stdlib>). The executor runs one threadgroup at a time, each of its threads a fiber
 * of its own stack (a barrier yields to the next thread); lane = thread index % 32, SIMD
 * group = thread index / 32. */
#ifndef VLMC_METAL_EMU_H
#define VLMC_METAL_EMU_H

#include <stdint.h>
#include <string.h>

#define VLMC_METAL_SIMD_WIDTH 32

/* What one thread of the grid is: its Metal position builtins ([3] each; scalars in [0]) and
 * the barriers and SIMD-group scratch it shares with its threadgroup. */
typedef struct {
  uint32_t threadgroups_per_grid[3];
  uint32_t threadgroup_position_in_grid[3];
  uint32_t thread_position_in_threadgroup[3];
  uint32_t thread_position_in_grid[3];
  uint32_t threads_per_threadgroup[3];
  uint32_t thread_index_in_threadgroup[3];
  uint32_t simdgroup_index_in_threadgroup[3];
  uint32_t simdgroups_per_threadgroup[3];
  uint32_t thread_index_in_simdgroup[3];
  uint32_t threads_per_simdgroup[3];
  uint32_t simd_active;             /* lanes this SIMD group has (the last may be partial) */
  /* Waits until every thread of the barrier has reached it (the executor's). */
  void (*wait)(void *barrier);
  void *group_barrier; /* every thread of the threadgroup */
  void *simd_barrier;  /* every lane of this thread's SIMD group */
  unsigned char *simd_slots; /* 2 x 32 x 8 bytes: this SIMD group's exchange, in two halves */
  uint32_t *simd_round;      /* this thread's count of SIMD-group exchanges (its half: the parity) */
  unsigned char *simd_matrix; /* 2 x 2 x 64 floats: this SIMD group's matrix exchange */
} vlmc_metal_thread_t;

/* A kernel's trampoline (generated per translation unit): calls the kernel with the buffers
 * at their [[buffer(n)]] indices and the thread's builtins. */
typedef void (*vlmc_metal_entry_fn)(void *const *buffers, const vlmc_metal_thread_t *self);

#ifdef __cplusplus
/* The running thread's context in a kernel's translation unit (set by its trampoline). Every
 * thread of a threadgroup shares one OS thread, so a wait, during which the others run,
 * puts it back. */
static thread_local const vlmc_metal_thread_t *vlmc_metal_self;

inline void vlmc_metal_wait(void *barrier) {
  const vlmc_metal_thread_t *me = vlmc_metal_self;
  me->wait(barrier);
  vlmc_metal_self = me;
}
inline void vlmc_metal_threadgroup_barrier() { vlmc_metal_wait(vlmc_metal_self->group_barrier); }
inline void vlmc_metal_simd_barrier() { vlmc_metal_wait(vlmc_metal_self->simd_barrier); }
inline uint32_t vlmc_metal_simd_lane() { return vlmc_metal_self->thread_index_in_simdgroup[0]; }

/* The SIMD group's reduction of x over its lanes, in lane order: 0 sum, 1 max, 2 min, 3 lane
 * 0's value. Every lane writes its slot of this round's half, waits for the others and
 * combines. One wait a call: the halves alternate, and no lane writes a half again before
 * every lane has passed the next wait, i.e. has read it. */
template <class T> inline T vlmc_metal_simd_reduce(T x, int op) {
  static_assert(sizeof(T) <= 8, "a SIMD slot holds 8 bytes");
  const vlmc_metal_thread_t *s = vlmc_metal_self;
  uint32_t lanes = s->simd_active;
  unsigned char *half = s->simd_slots + 8 * VLMC_METAL_SIMD_WIDTH * (*s->simd_round & 1);
  ++*s->simd_round;
  memcpy(half + 8 * s->thread_index_in_simdgroup[0], &x, sizeof x);
  vlmc_metal_wait(s->simd_barrier);
  T r;
  memcpy(&r, half, sizeof r);
  for (uint32_t i = 1; op != 3 && i < lanes; ++i) {
    T v;
    memcpy(&v, half + 8 * i, sizeof v);
    r = op == 0 ? r + v : op == 1 ? (v > r ? v : r) : (v < r ? v : r);
  }
  return r;
}

/* Lane l's two elements of an 8x8 SIMD-group matrix: (row, col) and (row, col + 1). Apple
 * does not document the layout; this is the one MLX's steel kernels rely on when they fill
 * thread_elements() by hand (mlx/backend/metal/kernels/steel/gemm/mma.h, MMAFrag). */
inline void vlmc_metal_frag_coord(uint32_t lane, int *row, int *col) {
  int qid = (int)lane / 4;
  *row = (qid & 4) + ((int)lane / 2) % 4;
  *col = (qid & 2) * 2 + ((int)lane % 2) * 2;
}

/* d = a * b + c over the SIMD group's 8x8 matrices, each lane holding two elements of each:
 * every lane writes its elements of a and b to this round's half of the exchange, waits for
 * the others, and computes its own two elements of d in f32, k in order (Metal does not say
 * in which order its hardware sums). One wait a call, as vlmc_metal_simd_reduce. */
inline void vlmc_metal_simd_matmul(const float a[2], const float b[2], const float c[2],
                                   float d[2]) {
  const vlmc_metal_thread_t *s = vlmc_metal_self;
  float *half = (float *)(s->simd_matrix + 2 * 64 * sizeof(float) * (*s->simd_round & 1));
  float *ma = half, *mb = half + 64;
  ++*s->simd_round;
  int row, col;
  vlmc_metal_frag_coord(s->thread_index_in_simdgroup[0], &row, &col);
  for (int i = 0; i < 2; ++i) {
    ma[row * 8 + col + i] = a[i];
    mb[row * 8 + col + i] = b[i];
  }
  vlmc_metal_wait(s->simd_barrier);
  for (int i = 0; i < 2; ++i) {
    float acc = c[i];
    for (int k = 0; k < 8; ++k) acc = __builtin_fmaf(ma[row * 8 + k], mb[k * 8 + col + i], acc);
    d[i] = acc;
  }
}
#endif

#endif
