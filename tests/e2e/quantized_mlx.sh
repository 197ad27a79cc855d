#!/usr/bin/env bash
# MLX 4-bit checkpoints (docs/mlx_format.md) through the CLI, against the numpy oracle:
#   - tests/oracle/make_mlx_checkpoint.py turns the tiny checkpoint into MLX's affine 4-bit
#     format (group 64; group 32 with embed_tokens and the vision tower quantized too; 8 bits,
#     group 64, with embed_tokens) and writes its numpy-dequantized f32 twin (--dequantize-to);
#     a fourth, the 3B layout: tie_word_embeddings with a quantized embed_tokens and no
#     lm_head; a fifth with mlx_vlm's tensor names and channels-last patch embedding;
#   - the MLX checkpoint compiled for each TARGET and run on its backend must match the twin
#     compiled --target ref on the ref backend: every tap within diff-taps' default 1e-4 of
#     the tap's scale and the 16 greedy ids identical, on the text_only and img336 parity
#     cases. That is "vlmc's q4 path equals the numpy-dequantized weights to f32 tolerance".
#     The worst logits_last difference per backend is printed;
#   - with `refusals`: malformed MLX checkpoints (group size 32 in config.json over tensors
#     made with 64, a `.scales` of the wrong shape, a packed `.weight` one word short, bits 3,
#     a `.biases` missing, u32 scales, scales and biases of two dtypes, 4-bit tensors without
#     config.json's quantization, a NaN scale, group size 72: rows of no whole groups, a
#     per-module entry, mode mxfp4) are
#     refused by name with exit status 1 and no artifact.
#   The malformed copies are made by tests/e2e/mlx_edit.py.
#   usage: quantized_mlx.sh VLMC VLMC_RUN PYTHON3 BACKENDS [refusals]
#   (PYTHON3: one with numpy, Debian's /usr/bin/python3; BACKENDS: comma-separated, each
#   compiled with --target of the same name: ref, cpu, vulkan; cpu@LEVEL: --target cpu
#   --target-option cpu=LEVEL, run on the cpu backend)
set -euo pipefail
VLMC=$1
RUN=$2
PY=$3
IFS=, read -r -a BACKENDS <<<"$4"
REFUSALS=${5:-}
CKPT=tests/fixtures/parity/tiny-vocab512
MAKE=tests/oracle/make_mlx_checkpoint.py
EDIT=$(dirname "$0")/mlx_edit.py
CASES=(text_only img336)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

source "$(dirname "$0")/lib.sh"

# generate ART BACKEND CASE TAPS: the 16 greedy ids on stdout, the taps into TAPS/.
generate() {
  local images=() image
  for image in $(fixture_field "$3" images 2>/dev/null || true); do images+=(--image "$image"); done
  mkdir -p "$4"
  "$RUN" "$1" --backend "$2" --input-ids "tests/fixtures/parity/$3/input_ids.json" -n 16 \
    --dump-taps "$4" --quiet "${images[@]}" 2>"$4.log"
}

# The dequantize ops of FUNC that `vlmc inspect ART` counts ("dequantize N"; 0 when none).
dequantize_count() { # ART FUNC
  "$VLMC" inspect "$1" | sed -n "s/^  @$2 .*[(,] dequantize \([0-9]*\)[,)].*/\1/p" | grep . ||
    echo 0
}

# compile_flags BACKEND: --target BACKEND, or for cpu@LEVEL --target cpu --target-option
# cpu=LEVEL (the kernels of that CPU level).
compile_flags() {
  if [[ "$1" == *@* ]]; then echo "--target ${1%@*} --target-option cpu=${1#*@}"
  else echo "--target $1"; fi
}

# The worst logits_last difference per backend, absolute and relative to the tap's scale.
declare -A worst worst_at worst_rel worst_rel_at
for backend in "${BACKENDS[@]}"; do worst[$backend]=-1 worst_rel[$backend]=-1; done
greater() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 > b + 0) }'; }

# round NAME [--short-groups "G TENSOR..."] [--tie] FLAGS...: the MLX checkpoint
# (make_mlx_checkpoint.py FLAGS, then mlx_edit.py short-groups / tie) and its twin, compiled
# and compared.
round() {
  local name=$1 short=() tie=
  shift
  if [ "$1" = --short-groups ]; then
    read -r -a short <<<"$2"
    shift 2
  fi
  if [ "$1" = --tie ]; then
    tie=1
    shift
  fi
  local q=$WORK/$name twin=$WORK/$name-twin
  local made
  if ! made=$("$PY" "$MAKE" "$CKPT" "$q" --dequantize-to "$twin" "$@" 2>&1); then
    fail "$name: make_mlx_checkpoint.py $*: $made"
    return
  fi
  # "make_mlx_checkpoint: 81 tensors, 13 quantized (lm 12, lm_head 1) ..."
  local quantized vision tensor
  quantized=$(sed -n '1s/.* \([0-9]*\) quantized (.*/\1/p' <<<"$made")
  vision=$(sed -n '1s/.*[(,] vision \([0-9]*\)[,)].*/\1/p' <<<"$made")
  vision=${vision:-0}
  ok "$name: make_mlx_checkpoint.py $* quantized $quantized tensors ($vision in the vision tower)"
  if [ ${#short[@]} -gt 0 ]; then
    if ! made=$("$PY" "$EDIT" "$q" short-groups "$twin" "${short[@]}" 2>&1); then
      fail "$name: mlx_edit.py short-groups: $made"
      return
    fi
    for tensor in "${short[@]:1}"; do
      quantized=$((quantized + 1))
      if [[ "$tensor" == visual.* ]]; then vision=$((vision + 1)); fi
    done
    ok "$name: $((${#short[@]} - 1)) more tensors quantized in groups of ${short[0]}, the last short"
  fi
  if [ -n "$tie" ]; then
    # lm_head.{weight,scales,biases} removed: the tied head reads embed_tokens' packed words.
    if ! made=$("$PY" "$EDIT" "$q" tie 2>&1 && "$PY" "$EDIT" "$twin" tie 2>&1); then
      fail "$name: mlx_edit.py tie: $made"
      return
    fi
    quantized=$((quantized - 1))
    ok "$name: tie_word_embeddings, no lm_head: $quantized quantized tensors"
  fi
  if ! "$VLMC" compile "$twin" --target ref -o "$WORK/$name-twin.vlmc" 2>"$WORK/$name-twin.log"
  then
    fail "$name: compile the twin: $(tail -3 "$WORK/$name-twin.log")"
    return
  fi
  local backend case art want got
  for backend in "${BACKENDS[@]}"; do
    art=$WORK/$name-$backend.vlmc
    local flags
    read -r -a flags <<<"$(compile_flags "$backend")"
    if ! "$VLMC" compile "$q" "${flags[@]}" -o "$art" 2>"$WORK/$name-$backend.log"; then
      fail "$name: compile ${flags[*]}: $(tail -3 "$WORK/$name-$backend.log")"
      continue
    fi
    # Every quantized tensor is read through a dequantize (the program is not the twin's); a
    # tied embed_tokens through one or two (as the table and as the head).
    local counts want_counts="$((quantized - vision)) $vision"
    counts="$(dequantize_count "$art" prefill) $(dequantize_count "$art" encode_image)"
    if [ -n "$tie" ] && [ "$counts" = "$((quantized - vision + 1)) $vision" ]; then
      want_counts=$counts
    fi
    same "$name ${flags[*]}: dequantize ops in @prefill and @encode_image" "$counts" \
      "$want_counts"
  done
  for case in "${CASES[@]}"; do
    if ! want=$(generate "$WORK/$name-twin.vlmc" ref "$case" "$WORK/taps/$name-twin-$case"); then
      fail "$name $case: the twin's ref run: $(tail -3 "$WORK/taps/$name-twin-$case.log")"
      continue
    fi
    if [[ "$want" =~ ^[0-9]+( [0-9]+){15}$ ]]; then ok "$name $case: the twin generates $want"
    else fail "$name $case: the twin generated '$want', expected 16 ids"; fi
    for backend in "${BACKENDS[@]}"; do
      art=$WORK/$name-$backend.vlmc
      [ -e "$art" ] || continue
      local taps=$WORK/taps/$name-$backend-$case diff rc=0
      if ! got=$(generate "$art" "${backend%@*}" "$case" "$taps"); then
        fail "$name $case --backend $backend: $(tail -3 "$taps.log")"
        continue
      fi
      same "$name $case --backend $backend: the 16 greedy ids equal the twin's" "$got" "$want"
      diff=$("$VLMC" diff-taps "$taps" "$WORK/taps/$name-twin-$case" 2>&1) || rc=$?
      if [ "$rc" -eq 0 ] && grep -q "^no divergence" <<<"$diff"; then
        ok "$name $case --backend $backend: every tap within 1e-4 of the twin's"
      else
        fail "$name $case --backend $backend: diff-taps (exit $rc):"$'\n'"$diff"
      fi
      local logits scale
      logits=$(awk '$1 == "logits_last" { print $2 }' <<<"$diff")
      scale=$(awk '$1 == "logits_last" { print $4 }' <<<"$diff")
      if [ -z "$logits" ]; then
        fail "$name $case --backend $backend: diff-taps shows no logits_last"
      else
        local rel
        rel=$(awk -v a="$logits" -v s="$scale" 'BEGIN { printf "%.3g", (s > 0 ? a / s : a) }')
        if greater "$logits" "${worst[$backend]}"; then
          worst[$backend]=$logits worst_at[$backend]="$name $case, scale $scale"
        fi
        if greater "$rel" "${worst_rel[$backend]}"; then
          worst_rel[$backend]=$rel worst_rel_at[$backend]="$name $case"
        fi
      fi
    done
  done
}

round g64 --group-size 64
round g32 --group-size 32 --quantize-embed --quantize-vision
round b8 --bits 8 --group-size 64 --quantize-embed
# Short groups (rows no multiple of the group, which docs/ir.md allows) are not MLX's: an
# MLX checkpoint with them is refused below (j); vlmc's own --quantize makes them
# (tests/e2e/quantize_own.sh) and the kernel cases cover them (tests/kernels/linear_q4_short_*).
# The mlx-community 3B layout: tied embeddings, the quantized embed_tokens also the lm head.
round tied --tie --group-size 64 --quantize-embed
# mlx_vlm's own tensor names (language_model.model.*, vision_tower.*, the patch embedding
# channels-last [out, T, H, W, C]): what the published mlx-community files hold.
round mlxnames --group-size 64 --quantize-embed --mlx-names

# The oracle is not vacuous: the quantized model's logits are not the source checkpoint's.
if [ -d "$WORK/taps/g64-twin-text_only" ] &&
   "$VLMC" compile "$CKPT" --target ref -o "$WORK/source.vlmc" 2>/dev/null &&
   generate "$WORK/source.vlmc" ref text_only "$WORK/taps/source-text_only" >/dev/null; then
  rc=0
  "$VLMC" diff-taps --tolerance 0 "$WORK/taps/source-text_only" \
    "$WORK/taps/g64-twin-text_only" >/dev/null 2>&1 || rc=$?
  if [ "$rc" -eq 1 ]; then ok "the 4-bit model's taps differ from the source checkpoint's"
  elif [ "$rc" -eq 0 ]; then fail "the 4-bit twin's taps equal the source checkpoint's"
  else fail "diff-taps of the source and the twin: exit status $rc"; fi
else
  fail "the source checkpoint's ref run for the non-vacuity check"
fi

for backend in "${BACKENDS[@]}"; do
  if [ "${worst[$backend]}" = -1 ]; then
    echo "--backend $backend: no logits compared"
  else
    echo "--backend $backend: worst logits_last max|diff| vs the numpy-dequantized twin" \
         "${worst[$backend]} (${worst_at[$backend]}); relative to the scale" \
         "${worst_rel[$backend]} (${worst_rel_at[$backend]})"
  fi
done

if [ "$REFUSALS" != refusals ]; then
  summary
  exit
fi

# ---- malformed MLX checkpoints: refused by name, exit 1, no artifact ----
BASE=$WORK/g64
if [ ! -d "$BASE" ]; then
  fail "no g64 checkpoint to make malformed copies of"
  summary
  exit
fi

# mutated NAME ACTION [ARG]: a copy of the g64 MLX checkpoint with one change by mlx_edit.py
# (config KEY=VALUE, noquant, drop-col, drop, u32, f16, nan: see there); prints the folder.
mutated() {
  local dir=$WORK/bad-$1
  cp -r "$BASE" "$dir"
  "$PY" "$EDIT" "$dir" "${@:2}"
  echo "$dir"
}

# refused WHAT DIR NEEDLE...: `vlmc compile DIR` exits 1 (not a crash, not a hang), writes no
# artifact, and its error holds every NEEDLE (an extended regex when it starts with ~).
refused() {
  local what=$1 dir=$2 err rc=0 needle
  shift 2
  err=$(timeout 60 "$VLMC" compile "$dir" --target ref -o "$dir.vlmc" 2>&1 >/dev/null \
        </dev/null) || rc=$?
  if [ "$rc" -eq 0 ]; then fail "$what: accepted"; return; fi
  if [ "$rc" -ne 1 ]; then fail "$what: exit status $rc (a crash or a hang?): $err"; return; fi
  if [ -e "$dir.vlmc" ]; then fail "$what: a refused compile left $dir.vlmc"; return; fi
  for needle in "$@"; do
    if [[ "$needle" == "~"* ]]; then
      if grep -qE -- "${needle#\~}" <<<"$err"; then continue; fi
    elif grep -qF -- "$needle" <<<"$err"; then continue; fi
    fail "$what: '$needle' not in: $err"
    return
  done
  ok "$what: $(grep '^error: ' <<<"$err" || echo "$err")"
}

T=model.layers.1.mlp.up_proj # [176, 64]: packed u32[176, 8], scales and biases [176, 1]

refused "(a) group_size 32 in config.json over tensors made with 64" \
  "$(mutated group config group_size=32)" \
  "~quantized tensor '[A-Za-z0-9_.]+\.scales' has shape \[[0-9]+, ?1\]" \
  "~group size 32 \(config.json's quantization\) imply \[[0-9]+, ?2\]"
refused "(b) a .scales of the wrong shape" "$(mutated scales drop-col "$T.scales")" \
  "~quantized tensor '$T.scales' has shape \[176, ?0\]" "~imply \[176, ?1\]"
refused "(c) a packed .weight one word short" "$(mutated weight drop-col "$T.weight")" \
  "~quantized tensor '$T.weight' has shape \[176, ?7\]" "~imply \[176, ?8\]"
refused "(d) bits 3 in config.json" "$(mutated bits3 config bits=3)" \
  "quantization.bits" "3-bit weights are not supported (4 or 8)"
refused "(e) a .biases missing" "$(mutated biases drop "$T.biases")" \
  "tensor '$T.biases' not found"
refused "(f) scales of dtype u32" "$(mutated u32scales u32 "$T.scales")" \
  "quantized tensor '$T.scales' has dtype u32; expected f32, f16 or bf16"
refused "(g) scales f16, biases bf16" "$(mutated f16scales f16 "$T.scales")" \
  "'$T.scales' is f16 but '$T.biases' is bf16"
refused "(h) packed u32 weights without config.json's quantization" \
  "$(mutated noquant noquant)" "~tensor '[A-Za-z0-9_.]+\.weight' has dtype u32"
refused "(j) group_size 72 in config.json: the rows are no whole groups" \
  "$(mutated group72 config group_size=72)" \
  "~quantized tensor '[A-Za-z0-9_.]+\.weight' has rows of [0-9]+ weights, not a multiple of config.json's quantization.group_size 72"
refused "(k) a per-module entry (a mixed recipe)" \
  "$(mutated mixed config 'model.layers.0.mlp.up_proj={"group_size": 32, "bits": 8}')" \
  "quantization.model.layers.0.mlp.up_proj: per-module quantization (a mixed recipe) is not supported"
refused "(l) mode mxfp4" "$(mutated mxfp4 config 'mode="mxfp4"')" \
  "quantization.mode: 'mxfp4' quantization is not supported (affine only"
refused "(i) a NaN scale" "$(mutated nanscale nan "$T.scales" 5)" \
  "tensor '$T.scales': element 5 is a NaN" "--allow-nonfinite"
summary
