#!/usr/bin/env bash
# vlmc compile --quantize (docs/quantization.md) on the tiny parity checkpoint: each spec
# compiled for every backend given, run on the text_only and img336 cases; each backend's taps
# must equal the ref backend's (the same quantized weights: the ref backend dequantizes them
# in the reference's arithmetic) to diff-taps' default 1e-4 and the 16 greedy ids must be
# identical. Also: the pass appears in the pipeline, the bf16 weights it replaced are gone,
# `vlmc inspect` prints the group's bits per weight, `vlmc-run --stats` the packed bytes, and
# bad flags are refused by name.
#   usage: quantize_own.sh VLMC VLMC_RUN ref,cpu,vulkan
set -euo pipefail
. "$(dirname "$0")/lib.sh"
VLMC=$1
RUN=$2
IFS=, read -r -a BACKENDS <<<"$3"
CKPT=tests/fixtures/parity/tiny-vocab512
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failures=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# generate ARTIFACT BACKEND CASE TAPS: 16 greedy ids of the parity case, taps into TAPS.
generate() {
  local images=() image case_dir=tests/fixtures/parity/$3
  for image in $(fixture_field "$3" images); do images+=(--image "$image"); done
  "$RUN" "$1" --backend "$2" --input-ids "$case_dir/input_ids.json" -n 16 --quiet \
    --dump-taps "$4" "${images[@]}"
}

# "q4 --precision bf16-matmul": the cpu kernels of this CPU (--cpu native), which on one with
# AVX512_BF16 take the 4-bit linears through bf16 dot products (decode: kernel_linear_dequant.c's
# dot path; prefill: kernel_linear_panels.c's quantized panels); the ref backend runs the same
# program (x rounded to bf16 before each quantized linear). Its taps are compared within 5e-3,
# as e2e.bf16_matmul compares that precision: an input one f32 ulp apart can round to the other
# bf16 neighbour, 2^-8 away, and such flips accumulate (tests/e2e/bf16_matmul.sh). The vulkan
# target has no bf16-matmul (it refuses it by name): that spec runs ref and cpu only.
for spec in "q4" "q4:g32 --quantize-vision" "q8" "q4 --precision bf16-matmul"; do
  read -r -a flags <<<"--quantize $spec"
  tag=${spec%% *}
  [[ "$spec" == *bf16-matmul* ]] && tag=${tag}bm
  for b in "${BACKENDS[@]}"; do
    [[ "$spec" == *bf16-matmul* && "$b" == vulkan ]] && continue
    native=()
    [[ "$spec" == *bf16-matmul* && "$b" == cpu ]] && native=(--cpu native)
    if ! "$VLMC" compile "$CKPT" --target "$b" "${flags[@]}" "${native[@]}" -o "$WORK/$tag-$b.vlmc" \
         >"$WORK/$tag-$b.log" 2>&1; then
      fail "$spec --target $b: $(tail -1 "$WORK/$tag-$b.log")"
      continue
    fi
    grep -q 'quantize{bits=' "$WORK/$tag-$b.log" || fail "$spec --target $b: no quantize pass"
  done
  [ -f "$WORK/$tag-ref.vlmc" ] || continue
  bits=${tag#q}; bits=${bits%%:*}; bits=${bits%bm}
  group=64; [[ "$spec" == *":g32"* ]] && group=32
  inspect=$("$VLMC" inspect "$WORK/$tag-ref.vlmc")
  if grep -qE "^  q$bits g$group \(f16 scale \+ bias\) +[0-9]+ tensors .* bits/weight" <<<"$inspect"; then
    ok "$spec: inspect: $(grep -E "^  q$bits g$group " <<<"$inspect" | tr -s ' ')"
  else
    fail "$spec: inspect has no q$bits g$group line: $(grep -A3 'weights by storage' <<<"$inspect")"
  fi
  # the replaced weights are gone: no bf16 language-model projection stays
  if grep -q "layers.0.self_attn.q_proj.weight.vlmc-q${bits}g$group.packed" <<<"$("$VLMC" inspect "$WORK/$tag-ref.vlmc" --verify 2>&1; strings "$WORK/$tag-ref.vlmc" | grep -m3 'q_proj.weight')"; then
    ok "$spec: the quantized parameters are in the artifact"
  else
    fail "$spec: no quantized q_proj parameter"
  fi
  tolerance=1e-4
  [[ "$spec" == *bf16-matmul* ]] && tolerance=5e-3
  for c in text_only img336; do
    generate "$WORK/$tag-ref.vlmc" ref "$c" "$WORK/t-$tag-ref-$c" >"$WORK/ids-$tag-ref-$c"
    for b in "${BACKENDS[@]}"; do
      [ "$b" = ref ] && continue
      [ -f "$WORK/$tag-$b.vlmc" ] || continue
      generate "$WORK/$tag-$b.vlmc" "$b" "$c" "$WORK/t-$tag-$b-$c" >"$WORK/ids-$tag-$b-$c" ||
        { fail "$spec $b $c: vlmc-run failed"; continue; }
      if ! cmp -s "$WORK/ids-$tag-ref-$c" "$WORK/ids-$tag-$b-$c"; then
        fail "$spec $b $c: ids $(cat "$WORK/ids-$tag-$b-$c") vs ref $(cat "$WORK/ids-$tag-ref-$c")"
      elif out=$("$VLMC" diff-taps --tolerance "$tolerance" "$WORK/t-$tag-$b-$c" "$WORK/t-$tag-ref-$c" 2>&1); then
        ok "$spec $b $c: ids equal, taps within $tolerance ($(grep logits_last <<<"$out" | tr -s ' ' | cut -d' ' -f2))"
      else
        fail "$spec $b $c: taps diverge: $(tail -3 <<<"$out")"
      fi
    done
  done
done

# --stats reports the packed words
stats=$("$RUN" "$WORK/q4-ref.vlmc" --backend ref --input-ids tests/fixtures/parity/text_only/input_ids.json \
        -n 2 --stats --quiet 2>&1 >/dev/null)
if grep -qE "stats: weights [0-9.]+ MB as stored \([0-9.]+ MB of packed quantized words" <<<"$stats"; then
  ok "--stats: $(grep 'stats: weights' <<<"$stats")"
else
  fail "--stats has no packed-weight line: $stats"
fi

# bad flags, refused by name
refused() {
  local what=$1 needle=$2 err rc=0
  shift 2
  err=$("$VLMC" compile "$CKPT" --target ref -o "$WORK/bad.vlmc" "$@" 2>&1) || rc=$?
  if [ "$rc" -ne 1 ]; then fail "$what: exit status $rc: $err"
  elif ! grep -qF -- "$needle" <<<"$err"; then fail "$what: '$needle' not in: $err"
  elif [ -e "$WORK/bad.vlmc" ]; then fail "$what: left an artifact"
  else ok "$what: $(grep '^error' <<<"$err")"; fi
}
refused "--quantize q3" "--quantize q3: expected q4 or q8" --quantize q3
refused "--quantize q4:g12" "--quantize q4:g12: expected" --quantize q4:g12
refused "--quantize q4:gx" "--quantize q4:gx: expected" --quantize q4:gx
refused "--quantize with --params external" "cannot be combined with --params external" \
  --quantize q4 --params external
refused "--quantize with --passes" "--quantize with --passes" --quantize q4 --passes dce

if [ "$failures" -ne 0 ]; then echo "quantize_own: $failures failure(s)"; exit 1; fi
echo "quantize_own: all checks passed"
