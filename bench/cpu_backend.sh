#!/usr/bin/env bash
# The cpu backend against the reference interpreter and against the machine, in one run: for
# the tiny demo model (assets/shapes-vl) and for a 3B-shaped checkpoint with random weights,
# image encode time at 448x448, prefill tokens/s for a 512-token prompt, decode tokens/s and
# peak memory, per backend, with the cpu/ref speed-ups; then the machine's roofs (read
# bandwidth, bench/membw.c, the best of 1-8 streams per thread; peak f32 FMA and bf16 dot
# GFLOP/s, bench/peakflops.c), the decode roofline they imply (bytes of weights read per
# generated token over the bandwidth), each hot kernel class's fraction of its roof, and, only
# when --llama-bench is given, llama.cpp measured in this same run on the same weights (no
# figure from elsewhere is printed). Not a timed test: run it by hand (the 3B takes a while).
#
#   bench/cpu_backend.sh [--build DIR] [--backends "ref cpu"] [--models "tiny 3b"]
#                        [--threads N] [--runs N] [--runs-3b N] [--prefill-tokens N]
#                        [--decode-tokens N]
#                        [--ref-prefill-tokens N] [--full] [--checkpoint-3b DIR]
#                        [--profile-tokens N] [--no-encode] [--precision P]
#                        [--llama-bench PATH [--gguf PATH | --gguf-py DIR]]
#
#   --build DIR              build folder (default build-bench, Release; configured and built
#                            here when needed: vlmc and vlmc-run)
#   --backends LIST          backends to measure (default "ref cpu"); an artifact is compiled
#                            with --target ref,cpu --cpu native, and when the cpu target cannot
#                            compile the model yet ("no cpu kernel for ..."), with --target ref,
#                            the cpu column then saying why it is empty
#   --models LIST            tiny, 3b and/or 3b-q4 (default "tiny 3b"); 3b-q4 is the same 3B
#                            checkpoint compiled with --quantize q4 (docs/quantization.md),
#                            measured on cpu only (ref would hold every weight in f32), in the
#                            same run as 3b: its roofline counts the bytes of the quantized
#                            weights (vlmc inspect's "weights by storage")
#   --threads N              vlmc-run --threads and membw's thread count (default $(nproc))
#   --runs N                 tiny model: runs per figure (default 3); each figure is their median
#   --runs-3b N              3B on cpu: runs per figure (default 3), and llama-bench's repetitions
#                            (-r N); the 3B on ref runs once
#   --prefill-tokens N       prompt length for prefill (default 512)
#   --decode-tokens N        decode steps measured (default 32; one more is fed, see below)
#   --ref-prefill-tokens N   3B on ref: a shorter prompt (default 64; ~1 s per token there, so
#                            512 tokens take ~10 minutes). The cpu backend is then also run at
#                            that length, and speed-ups only divide figures of the same length
#   --full                   3B on ref at full length, and its 448x448 encode (several minutes;
#                            skipped otherwise)
#   --checkpoint-3b DIR      use this 3B-shaped checkpoint instead of making one
#   --profile-tokens N       prompt length of the profiled prefill (default 64)
#   --no-encode              no image encode runs (the 3B's take minutes on 2 busy cores)
#   --precision P            vlmc compile --precision (default f32); bf16-matmul rounds each
#                            linear's input to bf16 and, on a CPU with AVX512_BF16, runs the
#                            linears as bf16 dot products (the arithmetic llama.cpp uses for
#                            bf16 weights)
#   --llama-bench PATH       llama.cpp's llama-bench: run in this same script on the 3B's
#                            weights (-t THREADS -p 64 -n DECODE, --runs-3b repetitions) and compared;
#                            without it no llama.cpp figure is printed
#   --gguf PATH              the GGUF llama-bench runs (it must hold the same weights as
#                            --checkpoint-3b for the comparison to mean anything), or
#   --llama-model NAME       the vlmc model llama.cpp is compared with: 3b (default; a bf16
#                            GGUF) or 3b-q4 (give --gguf a Q4_0 GGUF of the same checkpoint,
#                            made by llama.cpp's llama-quantize from the bf16 one)
#   --gguf-py DIR            llama.cpp's gguf-py folder: the 3B checkpoint is written as a bf16
#                            GGUF here (bench/make_gguf.py, ~6 GB more under $TMPDIR)
#
# How each figure is measured (vlmc-run --stats, --threads N, token ids, no tokenizer needed):
#   encode   one image (tests/fixtures/images/square_448.png, 256 merged patches) with the ids
#            <|vision_start|> <|image_pad|>x256 <|vision_end|> and 3 text ids, -n 1: "image
#            encode" in ms (preprocessing included);
#   prefill  P random ids (1000..30000, a fixed seed; no image): "prefill P tokens in T ms";
#   decode   in the same process, a second chat turn (-i) of 32 more random ids: a later turn's
#            tokens go through the decode function one call per token, exactly as generated
#            tokens do, so "prefill 33 tokens in T ms" of turn 2 (the first turn's last answer
#            token, then the 32 ids) is 33 decode steps at a context of P+1..P+33. Feeding ids
#            rather than generating them means an early end-of-sequence (the tiny model says
#            a few tokens and stops) cannot cut the measurement short; it leaves out only the
#            greedy argmax over the logits;
#   peak     "peak memory" (peak RSS; mapped weights count once touched), the largest over a
#            backend's runs, and its ratio to the checkpoint's bytes of weights.
# Each vlmc-run is a fresh process; the load time is not part of any figure. Before a model's
# runs, one untimed vlmc-run --load-only reads the artifact into the page cache: a first load
# from the disk right after the compile left the first prefill 1.3-3x slower (the kernel
# still reclaiming and compacting memory around it), which a figure of one run cannot absorb.
# A figure is the median of its runs (min..max beside it when there are several); llama.cpp's
# is the median of llama-bench's repetitions, the same statistic.
#
# Roofs (the machine, measured first): bench/membw.c's read bandwidth, the best of 1, 2, 4 and
# 8 interleaved streams per thread; bench/peakflops.c's peak f32 FMA (256- and 512-bit, where
# the CPU has them) and bf16 dot (vdpbf16ps, AVX512_BF16) GFLOP/s, 1 thread and all.
# Per-kernel fractions of them: three more cpu runs per model with VLMC_CPU_PROFILE=1 (the
# backend's time per kernel, by template): a prefill of --profile-tokens ids (-n 1: no decode
# step), a decode (1 id, then the 32+1 decode steps of turn 2: every step reads every weight),
# and the image encode. Work per kernel class comes from the checkpoint's shapes: matmul
# ("linear" kernels) flops = 2 x rows x weight elements (rows: the prompt's tokens, the last
# one only for the lm_head, the image's patches in the vision tower, a quarter of them in its
# merger), bytes in decode = the weights read per token x steps; attention flops = 4 x
# head_dim x heads x (query, key) pairs (causal in the text model, 8x8-patch windows or the
# whole image in the vision tower; exact for square_448.png's 32x32 patches). A matmul in
# decode is measured against the bandwidth, prefill and vision matmuls and attention against
# the f32 FMA peak (vlmc computes in f32) and, where measured, the bf16 dot peak.
#
# Reading the output: per model, one table with rows encode / prefill / decode / peak memory,
# columns ref, cpu, and cpu/ref (speed-up for times and rates: >1 means cpu is faster; for
# memory, cpu's peak over ref's). Rows are per prompt length, so every ratio divides figures of
# the same length. Then: bandwidth, bytes per decoded token (the checkpoint's text-model
# tensors, not visual.*; the embedding table only when it is also the lm_head, as a lookup
# reads one row of it), the roofline tokens/s = all-core bandwidth / those bytes, each
# backend's decode as a fraction of it; the peaks; per model, the cpu kernel time by phase
# (prefill, decode, vision) and class (matmul, attention, other), each with its share, its
# rate and its fraction of the roof; then llama.cpp's prefill and decode tok/s with vlmc's and
# their ratio (>1: vlmc is faster), or a line saying it was not measured.
#
# Needs ~16 GB free under $TMPDIR for the 3B checkpoint and artifact. Everything goes to a
# temporary folder, removed at the end (KEEP=1 keeps it, with every run's log).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=build-bench
BACKENDS="ref cpu"
MODELS="tiny 3b"
THREADS=$(nproc)
RUNS=3
RUNS_3B=3
PREFILL=512
DECODE=32
REF_PREFILL_3B=64
FULL=0
CKPT_3B=
JOBS=${JOBS:-2}
PY=/usr/bin/python3
IMAGE=tests/fixtures/images/square_448.png
# Another config can stand in for the 3B one (a small one, to try the script quickly); the
# labels still say 3B.
CONFIG_3B=${CONFIG_3B:-tests/fixtures/configs/qwen2_5_vl_3b_config.json}
# llama.cpp's prefill figure is for a 64-token prompt (llama-bench -p 64): the cpu backend's
# 3B is also measured at that length, and profiled there.
LLAMA_PREFILL_TOKENS=64
PROFILE_TOKENS=64
ENCODE=1
LLAMA_BENCH=
GGUF=
GGUF_PY=
PRECISION=f32
LLAMA_MODEL=3b

help() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
usage() {
  help | sed -n '/^  bench/,/^$/p' >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --backends) BACKENDS=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --runs-3b) RUNS_3B=$2; shift 2 ;;
    --prefill-tokens) PREFILL=$2; shift 2 ;;
    --decode-tokens) DECODE=$2; shift 2 ;;
    --ref-prefill-tokens) REF_PREFILL_3B=$2; shift 2 ;;
    --full) FULL=1; shift ;;
    --checkpoint-3b) CKPT_3B=$2; shift 2 ;;
    --profile-tokens) PROFILE_TOKENS=$2; shift 2 ;;
    --no-encode) ENCODE=0; shift ;;
    --precision) PRECISION=$2; shift 2 ;;
    --llama-bench) LLAMA_BENCH=$2; shift 2 ;;
    --gguf) GGUF=$2; shift 2 ;;
    --gguf-py) GGUF_PY=$2; shift 2 ;;
    --llama-model) LLAMA_MODEL=$2; shift 2 ;;
    -h|--help) help; exit 0 ;;
    *) usage ;;
  esac
done
for b in $BACKENDS; do
  case $b in ref|cpu) ;; *) echo "unknown backend '$b' (ref, cpu)" >&2; exit 2 ;; esac
done
for m in $MODELS; do
  case $m in tiny|3b|3b-q4) ;; *) echo "unknown model '$m' (tiny, 3b, 3b-q4)" >&2; exit 2 ;; esac
done
[ "$FULL" = 1 ] && REF_PREFILL_3B=$PREFILL

step() { printf '== %s\n' "$*" >&2; }
has() { [[ " $1 " == *" $2 "* ]]; } # has LIST WORD
if [ -n "$LLAMA_BENCH" ]; then
  [ -x "$LLAMA_BENCH" ] || { echo "--llama-bench $LLAMA_BENCH: not an executable" >&2; exit 2; }
  [ -n "$GGUF$GGUF_PY" ] || { echo "--llama-bench needs --gguf PATH or --gguf-py DIR" >&2; exit 2; }
  [ -z "$GGUF" ] || [ -f "$GGUF" ] || { echo "--gguf $GGUF: no such file" >&2; exit 2; }
  [ -z "$GGUF_PY" ] || [ -d "$GGUF_PY/gguf" ] ||
    { echo "--gguf-py $GGUF_PY: no gguf package folder in it" >&2; exit 2; }
  case $LLAMA_MODEL in 3b|3b-q4) ;; *) echo "--llama-model: 3b or 3b-q4" >&2; exit 2 ;; esac
  has "$MODELS" "$LLAMA_MODEL" ||
    { echo "--llama-bench compares on $LLAMA_MODEL: add it to --models" >&2; exit 2; }
  [ "$LLAMA_MODEL" = 3b ] || [ -n "$GGUF" ] ||
    { echo "--llama-model $LLAMA_MODEL needs --gguf (a Q4_0 GGUF of the checkpoint)" >&2; exit 2; }
fi
if [ -z "$LLAMA_BENCH" ] && [ -n "$GGUF$GGUF_PY" ]; then
  echo "--gguf and --gguf-py need --llama-bench" >&2; exit 2
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/vlmc-cpu-bench.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then step "work folder $WORK (kept)"; else trap 'rm -rf "$WORK"' EXIT; fi
RESULTS=$WORK/results.tsv
: >"$RESULTS"

step "build ($BUILD, Release: vlmc vlmc-run)"
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$WORK/configure.log" 2>&1 ||
    { cat "$WORK/configure.log" >&2; exit 1; }
fi
ninja -C "$BUILD" -j"$JOBS" vlmc vlmc-run >"$WORK/build.log" 2>&1 ||
  { tail -30 "$WORK/build.log" >&2; exit 1; }
VLMC=$ROOT/$BUILD/tools/vlmc
RUN=$ROOT/$BUILD/tools/vlmc-run
case $BUILD in /*) VLMC=$BUILD/tools/vlmc; RUN=$BUILD/tools/vlmc-run ;; esac

# Bandwidth first, before the machine's page cache fills with weights.
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
# 4 GiB: far more than the last-level cache (a 1 GiB buffer read partly from a 533 MB L3 once
# over-reported by 2x, see membw.c).
step "memory read bandwidth (bench/membw.c: 4 GiB, 1..8 streams, 1 thread and $THREADS threads)"
cc -O3 -march=native -pthread -o "$WORK/membw" bench/membw.c
"$WORK/membw" 4096 3 "$THREADS" >"$WORK/membw.txt"
sed 's/^/   /' "$WORK/membw.txt" >&2
step "peak arithmetic (bench/peakflops.c: f32 FMA, bf16 dot; 1 thread and $THREADS threads)"
cc -O2 -march=native -pthread -o "$WORK/peakflops" bench/peakflops.c
"$WORK/peakflops" "$THREADS" >"$WORK/peakflops.txt"
sed 's/^/   /' "$WORK/peakflops.txt" >&2

# ids FILE COUNT SEED: COUNT random ids in 1000..30000 (plain text tokens), as a JSON list.
ids() {
  $PY - "$1" "$2" "$3" <<'EOF'
import json, random, sys
r = random.Random(int(sys.argv[3]))
json.dump([r.randrange(1000, 30000) for _ in range(int(sys.argv[2]))], open(sys.argv[1], "w"))
EOF
}

# encode_ids CKPT FILE: the image prompt's ids for CKPT's config and preprocessor settings:
# <|vision_start|>, one <|image_pad|> per merged patch of $IMAGE (as `vlmc preprocess` sizes
# it), <|vision_end|>, three text ids.
encode_ids() {
  local ckpt=$1 out=$2 pp=()
  read -r -a pp < <($PY - "$ckpt" <<'EOF'
import json, os, sys
p = os.path.join(sys.argv[1], "preprocessor_config.json")
c = json.load(open(p)) if os.path.exists(p) else {}
lo = c.get("min_pixels", c.get("size", {}).get("shortest_edge"))
hi = c.get("max_pixels", c.get("size", {}).get("longest_edge"))
print(" ".join(([f"--min-pixels {lo}"] if lo else []) + ([f"--max-pixels {hi}"] if hi else [])))
EOF
)
  "$VLMC" preprocess --image "$IMAGE" "${pp[@]}" -o "$WORK/pixels.safetensors" >/dev/null
  $PY - "$ckpt/config.json" "$WORK/pixels.safetensors" "$out" "$IMAGE" <<'EOF'
import json, struct, sys
import numpy as np
c = json.load(open(sys.argv[1]))
v = c.get("vision_config", {})
merge = v.get("spatial_merge_size", 2)
f = open(sys.argv[2], "rb")
n = struct.unpack("<Q", f.read(8))[0]
h = json.loads(f.read(n))
lo, hi = h["image_grid_thw"]["data_offsets"]
f.seek(8 + n + lo)
t, gh, gw = np.frombuffer(f.read(hi - lo), dtype="<i8")[:3]
tokens = int(t * gh * gw) // (merge * merge)
ids = [c.get("vision_start_token_id", 151652)] + [c.get("image_token_id", 151655)] * tokens
ids += [c.get("vision_end_token_id", 151653), 1000, 2000, 3000]
json.dump(ids, open(sys.argv[3], "w"))
print("   %s: %d image tokens" % (sys.argv[4], tokens), file=sys.stderr)
EOF
}

# compile_model NAME CKPT: NAME.vlmc with the requested backends' code; sets TARGETS to the
# backends it carries, and records them (a cpu compile that fails leaves a ref-only artifact,
# and the reason).
compile_model() {
  local name=$1 ckpt=$2 targets quantize=()
  targets=$(for b in ref cpu; do has "$BACKENDS" $b && echo $b; done | paste -sd, -)
  if [ "${name%-q4}" != "$name" ]; then quantize=(--quantize q4); targets=cpu; fi
  TARGETS=${targets//,/ }
  step "compile $name (--target $targets --cpu native --precision $PRECISION ${quantize[*]})"
  if "$VLMC" compile "$ckpt" -o "$WORK/$name.vlmc" --target "$targets" --cpu native \
       --precision "$PRECISION" "${quantize[@]}" >"$WORK/$name.compile.log" 2>&1; then
    printf '%s\tartifact\t%s\t%s\n' "$name" "$targets" "$(stat -c %s "$WORK/$name.vlmc")" \
      >>"$RESULTS"
    if [ ${#quantize[@]} -gt 0 ]; then
      # the bytes a decode step reads: the quantized weights (every one is the text model's)
      printf '%s\tqbytes\t%s\n' "$name" "$("$VLMC" inspect "$WORK/$name.vlmc" |
        awk '/^  q[0-9]+ g[0-9]+ /{s += $(NF-1)} END{print s+0}')" >>"$RESULTS"
    fi
    return 0
  fi
  local why
  why=$(grep -m1 -i 'error' "$WORK/$name.compile.log" || tail -1 "$WORK/$name.compile.log")
  echo "compile with --target $targets failed: $why" >&2
  printf '%s\tcompile-failed\tcpu\t%s\n' "$name" "$why" >>"$RESULTS"
  TARGETS=
  has "$BACKENDS" ref || return 1
  TARGETS=ref
  step "compile $name (--target ref)"
  "$VLMC" compile "$ckpt" -o "$WORK/$name.vlmc" --target ref >"$WORK/$name.compile.log" 2>&1 ||
    { cat "$WORK/$name.compile.log" >&2; return 1; }
  printf '%s\tartifact\tref\t%s\n' "$name" "$(stat -c %s "$WORK/$name.vlmc")" >>"$RESULTS"
}

# measure NAME BACKEND KIND TOKENS RUNS ARGS...: runs vlmc-run RUNS times (stdin: the file
# $STDIN, default none) and records each run's stderr (with the stats lines) for the table; a
# failed run is recorded with its error and the benchmark goes on.
measure() {
  local name=$1 backend=$2 kind=$3 tokens=$4 runs=$5 i log
  shift 5
  for i in $(seq "$runs"); do
    log=$WORK/$name.$backend.$kind.$tokens.$i.log
    if "$RUN" "$WORK/$name.vlmc" --backend "$backend" --threads "$THREADS" --stats --ids \
         "$@" <"${STDIN:-/dev/null}" >"$log.out" 2>"$log"; then
      printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$backend" "$kind" "$tokens" "$log" >>"$RESULTS"
      grep '^stats: ' "$log" | grep -v 'token limit' | sed 's/^/   /' >&2
    else
      echo "   vlmc-run --backend $backend failed: $(grep -v '^stats' "$log" | tail -1)" >&2
      printf '%s\t%s\tfailed\t%s\t%s\n' "$name" "$backend" "$tokens" "$log" >>"$RESULTS"
      return 0
    fi
  done
}

# profile NAME KIND TOKENS ARGS...: one cpu run with VLMC_CPU_PROFILE=1 (stdin: $STDIN), its
# per-kernel times recorded for the roof table (KIND: prefill, decode or encode).
profile() {
  local name=$1 kind=$2 tokens=$3 log
  shift 3
  log=$WORK/$name.cpu.profile.$kind.log
  step "$name cpu: profile of $kind${tokens:+ ($tokens)} (VLMC_CPU_PROFILE=1)"
  if VLMC_CPU_PROFILE=1 "$RUN" "$WORK/$name.vlmc" --backend cpu --threads "$THREADS" --stats \
       --ids "$@" <"${STDIN:-/dev/null}" >"$log.out" 2>"$log"; then
    printf '%s\tprofile\t%s\t%s\t%s\n' "$name" "$kind" "${tokens:-0}" "$log" >>"$RESULTS"
    grep -A3 '^cpu profile' "$log" | sed 's/^/   /' >&2
  else
    echo "   profiled run failed: $(grep -v '^stats' "$log" | tail -1)" >&2
  fi
}

# bench_model NAME CKPT RUNS REF_RUNS REF_PREFILL ENCODE_REF: compiles and measures one model
# (RUNS runs per figure on cpu, REF_RUNS on ref).
# drop_cache FILE...: asks the kernel to evict the files from the page cache (clean pages
# only). The 3B's checkpoint (7.5 GB) read by the compile, the artifact (7.5 GB) and the
# resident copy vlmc-run makes (7.5 GB) would otherwise fill a 24 GB machine, and reclaim
# during the runs would show in the timings.
drop_cache() {
  $PY - "$@" <<'EOF'
import os, sys
for path in sys.argv[1:]:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        continue
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
EOF
}

bench_model() {
  local name=$1 ckpt=$2 cpu_runs=$3 ref_runs=$4 ref_prefill=$5 encode_ref=$6 b n lens runs
  printf '%s\tcheckpoint\t%s\t%s\t%s\n' "$name" "$ckpt" "$cpu_runs" "$ref_runs" >>"$RESULTS"
  compile_model "$name" "$ckpt" || return 0
  drop_cache "$ckpt"/*.safetensors
  encode_ids "$ckpt" "$WORK/$name.encode.json"
  ids "$WORK/decode.json" "$DECODE" 2
  # Untimed: the artifact into the page cache, so that no measured run is the first load from
  # the disk (see the header).
  "$RUN" "$WORK/$name.vlmc" --load-only >/dev/null 2>&1 || true
  for b in $TARGETS; do
    runs=$cpu_runs
    [ "$b" = ref ] && runs=$ref_runs
    if [ "$ENCODE" = 0 ]; then
      printf '%s\t%s\tskipped\tencode\t-\n' "$name" "$b" >>"$RESULTS"
    elif [ "$b" = ref ] && [ "$encode_ref" = 0 ]; then
      printf '%s\tref\tskipped\tencode\t-\n' "$name" >>"$RESULTS"
    else
      step "$name $b: encode ${IMAGE##*/} (median of $runs)"
      measure "$name" "$b" encode 0 "$runs" --image "$IMAGE" \
        --input-ids "$WORK/$name.encode.json" -n 1
    fi
    # Prompt lengths: ref runs its (maybe shorter) one; cpu runs the full one, ref's, and for
    # the 3B llama-bench's 64 tokens (-p 64), so that the two prefill figures compare.
    if [ "$b" = ref ]; then lens=$ref_prefill
    else
      lens="$PREFILL"
      has "$BACKENDS" ref && lens="$lens $ref_prefill"
      [ "${name%-q4}" = 3b ] && lens="$lens $LLAMA_PREFILL_TOKENS"
      lens=$(tr ' ' '\n' <<<"$lens" | sort -nru | paste -sd' ' -)
    fi
    for n in $lens; do
      ids "$WORK/prompt.$n.json" "$n" 1
      step "$name $b: prefill $n tokens, then $DECODE+1 decode steps (median of $runs)"
      STDIN=$WORK/decode.json measure "$name" "$b" text "$n" "$runs" \
        --input-ids "$WORK/prompt.$n.json" -n 1 -i
    done
  done
  has "$TARGETS" cpu || return 0
  ids "$WORK/prompt.$PROFILE_TOKENS.json" "$PROFILE_TOKENS" 1
  profile "$name" prefill "$PROFILE_TOKENS" --input-ids "$WORK/prompt.$PROFILE_TOKENS.json" -n 1
  ids "$WORK/prompt.1.json" 1 3
  STDIN=$WORK/decode.json profile "$name" decode "$((DECODE + 2))" \
    --input-ids "$WORK/prompt.1.json" -n 1 -i
  [ "$ENCODE" = 1 ] || return 0
  profile "$name" encode "$(($(tr -cd , <"$WORK/$name.encode.json" | wc -c) - 4))" \
    --image "$IMAGE" --input-ids "$WORK/$name.encode.json" -n 1
}

# llama_bench CKPT: llama.cpp's llama-bench on the same weights (a GGUF written here from CKPT,
# or --gguf), right after vlmc's runs: prefill of 64 tokens and DECODE generated tokens, THREADS
# threads, --runs-3b repetitions (its JSON output, read by the tables).
llama_bench() {
  local ckpt=$1 gguf=$GGUF
  if [ -z "$gguf" ]; then
    step "bf16 GGUF of the 3B checkpoint (bench/make_gguf.py, llama.cpp's gguf-py)"
    gguf=$WORK/3b.gguf
    if ! $PY bench/make_gguf.py "$ckpt" "$gguf" --gguf-py "$GGUF_PY" 2>"$WORK/make_gguf.log"; then
      cat "$WORK/make_gguf.log" >&2
      printf '3b\tllama-failed\tmake_gguf.py: %s\n' "$(tail -1 "$WORK/make_gguf.log")" >>"$RESULTS"
      return 0
    fi
  fi
  step "llama.cpp: $LLAMA_BENCH -m ${gguf##*/} -t $THREADS -p $LLAMA_PREFILL_TOKENS -n $DECODE"
  local load0
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  if "$LLAMA_BENCH" -m "$gguf" -t "$THREADS" -p "$LLAMA_PREFILL_TOKENS" -n "$DECODE" -r "$RUNS_3B" \
       -o json >"$WORK/llama.json" 2>"$WORK/llama.log"; then
    printf '3b\tllama\t%s\t%s\t%s\n' "$WORK/llama.json" "$load0" \
      "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESULTS"
  else
    tail -5 "$WORK/llama.log" >&2
    printf '3b\tllama-failed\tllama-bench: %s\n' "$(tail -1 "$WORK/llama.log")" >>"$RESULTS"
  fi
  [ -n "$GGUF" ] || rm -f "$gguf"
}

if has "$MODELS" tiny; then
  bench_model tiny assets/shapes-vl "$RUNS" "$RUNS" "$PREFILL" 1
fi
if has "$MODELS" 3b; then
  if [ -z "$CKPT_3B" ]; then
    step "random 3B-shaped checkpoint (7.5 GB of bf16, ~40 s)"
    CKPT_3B=$WORK/ckpt-3b
    "$VLMC" random-checkpoint --config "$CONFIG_3B" -o "$CKPT_3B" --seed 1 2>&1 | tail -1 >&2
  fi
  bench_model 3b "$CKPT_3B" "$RUNS_3B" 1 "$REF_PREFILL_3B" "$FULL"
  # Free the disk early: the artifact and (if made here) the checkpoint are 7.5 GB each.
  rm -f "$WORK/3b.vlmc"
  [ -z "$LLAMA_BENCH" ] || [ "$LLAMA_MODEL" != 3b ] || llama_bench "$CKPT_3B"
fi
if has "$MODELS" 3b-q4; then
  if [ -z "$CKPT_3B" ]; then
    step "random 3B-shaped checkpoint (7.5 GB of bf16, ~40 s)"
    CKPT_3B=$WORK/ckpt-3b
    "$VLMC" random-checkpoint --config "$CONFIG_3B" -o "$CKPT_3B" --seed 1 2>&1 | tail -1 >&2
  fi
  bench_model 3b-q4 "$CKPT_3B" "$RUNS_3B" 1 "$REF_PREFILL_3B" "$FULL"
  rm -f "$WORK/3b-q4.vlmc"
  [ -z "$LLAMA_BENCH" ] || [ "$LLAMA_MODEL" != 3b-q4 ] || llama_bench "$CKPT_3B"
fi

step "tables"
echo "vlmc cpu backend benchmark, $(date '+%Y-%m-%d %H:%M'), $(nproc) cores, --threads $THREADS," \
  "--precision $PRECISION;" \
  "load average $LOAD_START at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
$PY - "$RESULTS" "$WORK/membw.txt" "$THREADS" "$DECODE" "$WORK/peakflops.txt" \
  "$LLAMA_PREFILL_TOKENS" "$BACKENDS" "$LLAMA_MODEL" "${GGUF##*/}" <<'EOF'
import glob, json, os, re, statistics, subprocess, sys
sys.path.insert(0, "bench")  # the script runs from the repository root
from checkpoint_bytes import headers, weights

results, membw_path, threads, decode_n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
peak_path, llama_pre_n = sys.argv[5], int(sys.argv[6])
backends = sys.argv[7].split()
llama_model, gguf_name = sys.argv[8], sys.argv[9] or "bf16 GGUF written by make_gguf.py"
NAMES = {"tiny": "tiny (assets/shapes-vl)", "3b": "3B-shaped, random weights",
         "3b-q4": "3B-shaped, random weights, --quantize q4"}

# --- the stats lines -------------------------------------------------------------------------
def stats_lines(path):
    """Each 'stats:' line with figures as a dict; 'turn' is 1 for the first turn."""
    out = []
    for line in open(path, errors="replace"):
        if not line.startswith("stats:") or "peak memory" not in line:
            continue
        d = {"turn": 1}
        m = re.search(r"backend (\w+)", line)
        d["backend"] = m.group(1) if m else None
        m = re.search(r"turn (\d+):", line)
        if m: d["turn"] = int(m.group(1))
        m = re.search(r"image encode ([\d.]+) ms", line)
        if m: d["encode_ms"] = float(m.group(1))
        m = re.search(r"prefill (\d+) tokens in ([\d.]+) ms", line)
        if m: d["prefill"] = (int(m.group(1)), float(m.group(2)))
        m = re.search(r"peak memory ([\d.]+) MB", line)
        if m: d["peak_mb"] = float(m.group(1))
        out.append(d)
    return out

def last_error(path):
    lines = [l.strip() for l in open(path, errors="replace") if l.strip() and not l.startswith("stats")]
    return lines[-1] if lines else "failed"

def profile_lines(path):
    """VLMC_CPU_PROFILE's table: [(symbol, template, calls, ms)]."""
    out = []
    for line in open(path, errors="replace"):
        m = re.match(r"\s+(\S+)\s+(\S+)\s+(\d+) calls\s+([\d.]+) ms", line)
        if m: out.append((m.group(1), m.group(2), int(m.group(3)), float(m.group(4))))
    return out

llama = None  # {"json": path, "load": (start, end)} or {"failed": why}
models = {}   # name -> dict
for row in open(results):
    f = row.rstrip("\n").split("\t")
    if f[1] == "llama":
        llama = {"json": f[2], "load": (f[3], f[4])}
        continue
    if f[1] == "llama-failed":
        llama = {"failed": f[2]}
        continue
    m = models.setdefault(f[0], {"runs": {}, "notes": [], "targets": None, "failed": {},
                                 "profile": {}})
    if f[1] == "profile":
        m["profile"][f[2]] = (int(f[3]), profile_lines(f[4]))
    elif f[1] == "checkpoint":
        m["ckpt"] = f[2]
        m["runs_of"] = {"cpu": int(f[3]), "ref": int(f[4]) if len(f) > 4 else int(f[3])}
    elif f[1] == "artifact": m["targets"] = f[2].split(","); m["artifact_bytes"] = int(f[3])
    elif f[1] == "qbytes": m["qbytes"] = int(f[2])
    elif f[1] == "compile-failed": m["notes"].append("cpu: compile failed: " + f[3])
    elif f[2] == "skipped": m["runs"].setdefault((f[1], "encode", 0), "skipped")
    elif f[2] == "failed":
        m["failed"][f[1]] = last_error(f[4])
    else:
        lines = stats_lines(f[4])
        other = {d["backend"] for d in lines if d["backend"] and d["backend"] != f[1]}
        if other:
            m["notes"].append("%s: a run asked for --backend %s reports backend %s" %
                              (f[1], f[1], ", ".join(sorted(other))))
        m["runs"].setdefault((f[1], f[2], int(f[3])), []).append(lines)

# --- weights: bytes in the checkpoint, bytes read per decoded token ----------------------------
def mb(b): return "%.1f MB" % (b / 1e6) if b < 1e9 else "%.2f GB" % (b / 1e9)

bw, bw_streams = {}, {}
for line in open(membw_path):
    m = re.match(r"read bandwidth, (\d+) threads?: ([\d.]+) GB/s", line)
    if m: bw[int(m.group(1))] = float(m.group(2))
    m = re.match(r"streams (\d+) per thread: 1 thread ([\d.]+) GB/s, \d+ threads ([\d.]+)", line)
    if m: bw_streams[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
peaks = {}     # (kernel, threads) -> GFLOP/s, or a "not measured" reason
for line in open(peak_path):
    m = re.match(r"peak (.+?), (\d+) threads?: (?:([\d.]+) GFLOP/s|not measured: (.*))", line)
    if m: peaks[(m.group(1), int(m.group(2)))] = float(m.group(3)) if m.group(3) else m.group(4)
bw_one = bw.get(1, 0.0)
bw_all = max((v for k, v in bw.items() if k != 1), default=bw_one)
nthreads = max(bw) if bw else threads
bw_roof = max(bw_one, bw_all)   # the machine reads at least this fast

def llc_bytes():
    """The largest cache's size (sysfs, else getconf; 0 when unknown)."""
    best = 0
    for p in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        t = open(p).read().strip()
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
        try: best = max(best, int(t.rstrip("KMG")) * mult)
        except ValueError: pass
    for n in ("LEVEL4_CACHE_SIZE", "LEVEL3_CACHE_SIZE", "LEVEL2_CACHE_SIZE"):
        if best: break
        try:
            out = subprocess.run(["getconf", n], capture_output=True, text=True).stdout.strip()
            best = int(out) if out.isdigit() else 0
        except OSError: pass
    return best

median = statistics.median

def llama_samples(row):
    """llama-bench's tokens/s per repetition (its mean alone where it lists none)."""
    return row.get("samples_ts") or [row["avg_ts"]]

def encode_stat(runs):
    """The image encode ms of the runs: (median, min, max), or None."""
    v = [d["encode_ms"] for r in runs for d in r if d.get("encode_ms") and d["turn"] == 1]
    return (median(v), min(v), max(v)) if v else None

def rate_stat(runs, turn):
    """Tokens/s of the given turn's "prefill N tokens in T ms" over the runs:
    (N, median, min, max, runs), or None."""
    v = [(d["prefill"][0], d["prefill"][0] * 1e3 / d["prefill"][1]) for r in runs for d in r
         if d["turn"] == turn and d.get("prefill") and d["prefill"][1] > 0]
    if not v: return None
    t = [x[1] for x in v]
    return (v[0][0], median(t), min(t), max(t), len(t))

def peak(runs):
    v = [d["peak_mb"] for r in runs for d in r if "peak_mb" in d]
    return max(v) if v else None

def cell(x, fmt):
    return fmt % x if isinstance(x, (int, float)) else x

def rate(x):
    return cell(x, "%.2f" if isinstance(x, float) and x < 100 else "%.1f")

summary = []
for name, m in models.items():
    if "ckpt" not in m:
        continue
    total, per_token, tied = weights(m["ckpt"])
    if m.get("qbytes"):  # --quantize q4: a step reads the quantized weights (norms: noise)
        per_token = m["qbytes"]
    m.update(total=total, per_token=per_token)
    def why_empty(b):
        """An empty cell: the backend was not asked for, the artifact has no code for it,
        its run failed, or (-) it was not run for this row."""
        if b not in backends: return "not run"
        if m["targets"] is None or b not in m["targets"]: return "n/a"
        if b in m["failed"]: return "failed"
        return "-"
    rows = []  # (label, ref, cpu, ratio text)
    enc = {}
    spreads = []  # min..max of the figures of several runs
    for b in ("ref", "cpu"):
        r = m["runs"].get((b, "encode", 0))
        st = None if r == "skipped" or not r else encode_stat(r)
        if st and st[1] != st[2]:
            spreads.append("%s encode: %.1f..%.1f ms" % (b, st[1], st[2]))
        enc[b] = "skipped" if r == "skipped" else (st[0] if st else why_empty(b))
    ratio = enc["ref"] / enc["cpu"] if all(isinstance(enc[b], float) for b in enc) else None
    rows.append(("image encode 448x448 (ms)", cell(enc["ref"], "%.1f"), cell(enc["cpu"], "%.1f"),
                 "%.2fx" % ratio if ratio else ""))
    lengths = sorted({k[2] for k in m["runs"] if k[1] == "text"}, reverse=True)
    dec_by_len = {}
    for n in lengths:
        pre, dec = {}, {}
        for b in ("ref", "cpu"):
            r = m["runs"].get((b, "text", n))
            pre[b] = rate_stat(r, 1) if r else None
            dec[b] = rate_stat(r, 2) if r else None
        dec_by_len[n] = dec
        for what, vals in (("prefill", pre), ("decode", dec)):
            if what == "prefill":
                label = "prefill %d-token prompt (tok/s)" % n
            else:
                steps = next((v[0] for v in vals.values() if v), decode_n + 1)
                label = "decode, %d steps after %d (tok/s)" % (steps, n)
            c = {b: vals[b][1] if vals[b] else why_empty(b) for b in ("ref", "cpu")}
            for b in ("ref", "cpu"):
                if vals[b] and vals[b][4] > 1:
                    spreads.append("%s %s: %.2f..%.2f tok/s" % (b, label.split(" (")[0],
                                                               vals[b][2], vals[b][3]))
            ratio = c["cpu"] / c["ref"] if all(isinstance(c[b], float) for b in c) else None
            rows.append((label, rate(c["ref"]), rate(c["cpu"]), "%.2fx" % ratio if ratio else ""))
    pk = {}
    for b in ("ref", "cpu"):
        runs = [r for k, rs in m["runs"].items() if k[0] == b and rs != "skipped" for r in rs]
        pk[b] = peak(runs) if runs else why_empty(b)
    ratio = pk["cpu"] / pk["ref"] if all(isinstance(pk[b], float) for b in pk) else None
    rows.append(("peak memory (MB)", cell(pk["ref"], "%.1f"), cell(pk["cpu"], "%.1f"),
                 "%.2fx (cpu/ref)" % ratio if ratio else ""))
    rows.append(("peak memory / weights", *(cell(pk[b] * 1e6 / total, "%.2f")
                 if isinstance(pk[b], float) else "" for b in ("ref", "cpu")), ""))

    print()
    print("%s: %s of weights (checkpoint, bf16), %s read per decoded token%s; %d threads, %s" %
          (NAMES.get(name, name), mb(total), mb(per_token),
           " (tied embedding = lm_head)" if tied else "", threads,
           ", ".join("%s: %s" % (b, "median of %d runs" % m["runs_of"][b]
                                  if m["runs_of"][b] > 1 else "one run")
                     for b in ("ref", "cpu") if b in backends)))
    print("  %-38s %14s %14s %16s" % ("", "ref", "cpu", "cpu/ref speed-up"))
    for label, r, c, q in rows:
        print("  %-38s %14s %14s %16s" % (label, r, c, q))
    for b in ("ref", "cpu"):
        if b in m["failed"]:
            print("  %s: a run failed: %s" % (b, m["failed"][b]))
    if spreads:
        print("  min..max over the runs:")
        for line in spreads: print("    " + line)
    if any(v == "-" for _, r, c, _ in rows for v in (r, c)):
        print("  -: not run at that prompt length (each row compares one length only)")
    if enc["ref"] == "skipped":
        print("  ref encode skipped: minutes on the 3B (--full runs it)")
    if enc["cpu"] == "skipped":
        print("  cpu encode skipped (--no-encode)")
    for note in m["notes"]:
        print("  " + note)
    if any(b in backends and (m["targets"] is None or b not in m["targets"]) for b in ("ref", "cpu")):
        print("  n/a: the artifact carries no code for that backend")
    # For the summary: the decode at the longest prompt each backend ran, and prefill at the
    # llama-bench's length.
    dec_longest = {}
    for b in ("ref", "cpu"):
        for n in lengths:
            if dec_by_len[n].get(b):
                dec_longest[b] = (n, dec_by_len[n][b][1]); break
    pre_bar = None
    r = m["runs"].get(("cpu", "text", llama_pre_n))
    if r: pre_bar = rate_stat(r, 1)
    summary.append((name, per_token, dec_longest, pre_bar))

print()
print("machine: read bandwidth %.2f GB/s with 1 thread, %.2f GB/s with %d threads (x%.2f)" %
      (bw_one, bw_all, nthreads, bw_all / bw_one if bw_one else 0))
if bw_all < 1.2 * bw_one:
    print("  (all cores read barely more than one: is the machine busy? the roofline takes the"
          " higher figure)")
print("decode roofline = %.2f GB/s / bytes of weights per token:" % bw_roof)
print("  %-8s %12s %16s %26s %26s" % ("model", "bytes/token", "roofline tok/s",
                                       "ref decode (fraction)", "cpu decode (fraction)"))
for name, per_token, dec, _ in summary:
    roof = bw_roof * 1e9 / per_token
    cells = []
    for b in ("ref", "cpu"):
        if b in dec:
            n, t = dec[b]
            cells.append("%.2f (%.3f) @%d" % (t, t / roof, n))
        else:
            cells.append("-")
    print("  %-8s %12s %16.2f %26s %26s" % (name, mb(per_token), roof, cells[0], cells[1]))
print("  (@N: the prompt length before the decode steps; fraction = decode / roofline)")
llc = llc_bytes() or 64 << 20
for name, per_token, _, _ in summary:
    if per_token <= 2 * llc:
        print("  %s: %s per token is not much more than the last-level cache (%.0f MB here): it "
              "is read largely from cache, so its fraction can pass 1 and says little" %
              (name, mb(per_token), llc / 1e6))
# --- roofs: the machine's peaks, each hot kernel class's fraction of its roof ----------------
def peak_of(prefix):
    """The best all-thread GFLOP/s of the peakflops kernels named PREFIX*, else (None, why)."""
    v = [x for (k, t), x in peaks.items() if k.startswith(prefix) and t == nthreads
         and isinstance(x, float)]
    if v: return max(v), None
    why = [x for (k, t), x in peaks.items() if k.startswith(prefix) and isinstance(x, str)]
    return None, (why[0] if why else "not measured")

print()
print("machine: peak arithmetic (bench/peakflops.c), GFLOP/s:")
for (k, t), x in peaks.items():   # peakflops' order: f32 256-bit, 512-bit, bf16 dot
    print("  %-20s %2d thread%s  %s" % (k, t, " " if t == 1 else "s",
                                        "%.1f" % x if isinstance(x, float) else "not measured: " + x))
if bw_streams:
    print("  read bandwidth by streams per thread (GB/s, 1 thread / %d): %s" % (nthreads, ", ".join(
        "%d: %.1f / %.1f" % (k, v[0], v[1]) for k, v in sorted(bw_streams.items()))))
f32_peak, f32_why = peak_of("f32 fma")
bf16_peak, bf16_why = peak_of("bf16 dot")

def shapes(ckpt):
    return {k: t["shape"] for k, t in headers(ckpt).items()}

def elems(shape):
    n = 1
    for d in shape: n *= d
    return n

def model_work(ckpt):
    """Matmul weight elements by where they apply, and the attention shapes."""
    sh = shapes(ckpt)
    c = json.load(open(os.path.join(ckpt, "config.json")))
    v = c.get("vision_config", {})
    c = c.get("text_config", c)   # newer configs nest the text model's keys
    tied = "lm_head.weight" not in sh
    w = {"text": 0, "head": 0, "vision": 0, "merger": 0}
    for k, s in sh.items():
        if len(s) < 2: continue
        parts = k.split(".")
        if "visual" in parts:
            w["merger" if "merger" in parts else "vision"] += elems(s)
        elif k.endswith("lm_head.weight") or (tied and k.endswith("embed_tokens.weight")):
            w["head"] += elems(s)
        elif not k.endswith("embed_tokens.weight"):
            w["text"] += elems(s)
    heads = c["num_attention_heads"]
    w["text_attn"] = (c["num_hidden_layers"], heads, c["hidden_size"] // heads)
    if v:
        vh = v.get("num_heads", 16)
        full = set(v.get("fullatt_block_indexes", []))
        win = (v.get("window_size", 112) // v.get("patch_size", 14)) ** 2
        w["vision_attn"] = (v.get("depth", 0), vh, v.get("hidden_size", 1280) // vh, full, win)
        w["merge"] = v.get("spatial_merge_size", 2) ** 2
    return w

def classify(template):
    if "linear" in template: return "matmul"
    if "attention" in template: return "attention"
    return "other"

def class_ms(lines, keep=None):
    out = {"matmul": 0.0, "attention": 0.0, "other": 0.0}
    for sym, tmpl, calls, ms in lines:
        if keep is None or sym in keep: out[classify(tmpl)] += ms
    return out

def frac_flops(gflop, ms):
    rate = gflop / (ms / 1e3)
    cells = ["%.1f GFLOP/s" % rate]
    cells.append("%.3f of f32 FMA %.0f" % (rate / f32_peak, f32_peak) if f32_peak else
                 "no f32 FMA peak (%s)" % f32_why)
    cells.append("%.3f of bf16 dot %.0f" % (rate / bf16_peak, bf16_peak) if bf16_peak else
                 "no bf16 dot peak (%s)" % bf16_why)
    return cells

for name, m in models.items():
    prof = m.get("profile", {})
    if not prof or "ckpt" not in m: continue
    w = model_work(m["ckpt"])
    print()
    print("%s: cpu kernel time by class (VLMC_CPU_PROFILE=1, %d threads) against the roofs" %
          (NAMES.get(name, name), threads))
    print("  %-30s %10s %6s  %s" % ("phase / class", "ms", "share", "rate and fraction of its roof"))
    text_syms = set()
    if "prefill" in prof:
        n, lines = prof["prefill"]
        text_syms = {l[0] for l in lines}
        ms, total = class_ms(lines), sum(l[3] for l in lines) or 1
        layers, heads, hd = w["text_attn"]
        gf = {"matmul": (2 * n * w["text"] + 2 * w["head"]) / 1e9,
              "attention": layers * 4 * hd * heads * n * (n + 1) / 2 / 1e9}
        for cls in ("matmul", "attention", "other"):
            cells = frac_flops(gf[cls], ms[cls]) if cls in gf and ms[cls] > 0 else []
            print("  %-30s %10.1f %5.1f%%  %s" % ("prefill %d tok, %s" % (n, cls), ms[cls],
                  100 * ms[cls] / total, ", ".join(cells)))
    if "decode" in prof:
        steps, lines = prof["decode"]
        ms, total = class_ms(lines), sum(l[3] for l in lines) or 1
        gbs = steps * m["per_token"] / 1e9 / (ms["matmul"] / 1e3) if ms["matmul"] else 0
        for cls in ("matmul", "attention", "other"):
            extra = ("%.1f GB/s of weights, %.3f of the %.1f GB/s read bandwidth" %
                     (gbs, gbs / bw_roof, bw_roof) if cls == "matmul" and gbs else "")
            print("  %-30s %10.1f %5.1f%%  %s" % ("decode %d steps, %s" % (steps, cls), ms[cls],
                  100 * ms[cls] / total, extra))
    if "encode" in prof and "vision_attn" in w:
        tokens, lines = prof["encode"]
        # The encode run also prefills its prompt through the text model: the vision tower's
        # kernels are those the text prefill does not use.
        vis = {l[0] for l in lines} - text_syms if text_syms else None
        ms = class_ms(lines, vis)
        total = sum(l[3] for l in lines if vis is None or l[0] in vis) or 1
        n = tokens * w["merge"]
        depth, vh, vhd, full, win = w["vision_attn"]
        pairs = sum(n * n if i in full else n * min(win, n) for i in range(depth))
        gf = {"matmul": (2 * n * w["vision"] + 2 * (n // w["merge"]) * w["merger"]) / 1e9,
              "attention": 4 * vhd * vh * pairs / 1e9}
        for cls in ("matmul", "attention", "other"):
            cells = frac_flops(gf[cls], ms[cls]) if cls in gf and ms[cls] > 0 else []
            print("  %-30s %10.1f %5.1f%%  %s" % ("vision %d patches, %s" % (n, cls), ms[cls],
                  100 * ms[cls] / total, ", ".join(cells)))
        if vis is None:
            print("  (no prefill profile: the vision rows include the text prefill's kernels)")
    print("  (share: of the phase's kernel time; matmul = linear kernels, flops = 2 x rows x "
          "weights; attention flops = 4 x head_dim x heads x (query, key) pairs)")

b3 = next((s for s in summary if s[0] == llama_model), None)
print()
if llama is None:
    print("llama.cpp: not measured in this run (--llama-bench PATH --gguf-py DIR to compare)")
elif "failed" in llama:
    print("llama.cpp: no figure: " + llama["failed"])
else:
    rows = json.load(open(llama["json"]))
    pre = next((r for r in rows if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0), None)
    gen = next((r for r in rows if r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0), None)
    r0 = rows[0] if rows else {}
    print("llama.cpp, measured in this run on the same weights (%s) against vlmc's %s, %s threads, "
          "build %s (%s); load average %s before, %s after:" % (gguf_name, llama_model,
          r0.get("n_threads", threads), r0.get("build_commit", "?"), r0.get("cpu_info", "?"),
          *llama["load"]))
    dec64 = None
    if b3:
        m3 = models[llama_model]
        r = m3["runs"].get(("cpu", "text", llama_pre_n))
        dec64 = rate_stat(r, 2) if r else None
    ours = {"pre": b3[3] if b3 else None, "gen": dec64}
    for key, row, label in (("pre", pre, "prefill %d tok" % llama_pre_n),
                            ("gen", gen, "decode")):
        if not row:
            print("  %-16s llama.cpp: no row in its output" % label)
            continue
        samples = llama_samples(row)
        t = median(samples)
        line = "  %-16s llama.cpp %8.2f tok/s (%.2f..%.2f; mean %.2f +-%.2f)" % (
            label, t, min(samples), max(samples), row["avg_ts"], row.get("stddev_ts", 0))
        if ours[key]:
            line += "   vlmc cpu %8.2f tok/s (%.2f..%.2f)   vlmc / llama.cpp %.2f" % (
                ours[key][1], ours[key][2], ours[key][3], ours[key][1] / t)
        else:
            line += "   vlmc cpu: not measured"
        print(line)
    if gen and b3:
        gbs = median(llama_samples(gen)) * b3[1] / 1e9
        print("  llama.cpp's decode reads %.1f GB/s of weights: %.3f of the %.1f GB/s read "
              "bandwidth" % (gbs, gbs / bw_roof, bw_roof))
    print("  (tok/s: the median of the runs, min..max beside it; llama-bench's decode starts at an"
          " empty context, vlmc's after the %d-token prompt; the machine is shared: both were"
          " measured minutes apart in this run)" % llama_pre_n)
EOF
