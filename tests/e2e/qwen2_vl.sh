#!/usr/bin/env bash
# The qwen2_vl family (models/qwen2_vl.c, issue 17) before its transformers fixtures exist
# (tests/oracle/make_family_fixtures.py, to be run on the device machine): a tiny random
# checkpoint (tests/fixtures/configs/tiny_qwen2_vl_config.json: the Qwen2.5-VL tiny sizes with
# Qwen2-VL's vision keys) made by vlmc random-checkpoint compiles with no flags, its manifest
# names the family, its vision tower has LayerNorms, quick_gelu and no window ops, and every
# backend given runs the image and text-only parity prompts to the ref backend's ids, taps
# within 1e-4. What this cannot show (that the graph is transformers' Qwen2-VL) is the oracle's.
#   usage: qwen2_vl.sh VLMC VLMC_RUN ref,cpu,vulkan
set -euo pipefail
VLMC=$1
RUN=$2
IFS=, read -r -a BACKENDS <<<"$3"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/lib.sh"

"$VLMC" random-checkpoint --config tests/fixtures/configs/tiny_qwen2_vl_config.json \
  -o "$WORK/ckpt" --seed 7 >/dev/null
cp tests/fixtures/parity/tiny-vocab512/preprocessor_config.json "$WORK/ckpt/"
compile_or_stop "$VLMC" "$WORK/ckpt" "$WORK/a.vlmc" "$3" --dump-dir "$WORK/dumps"
inspect=$("$VLMC" inspect "$WORK/a.vlmc")
expect_in "the manifest names the family" "model: qwen2_vl," "$inspect"
first=$(ls "$WORK/dumps"/*.vir | sort | head -1)
vision=$(sed -n '/^func @encode_image/,/^}/p' "$first")
expect_in "the vision tower's norms are LayerNorms" "layer_norm" "$vision"
expect_in "its MLP is quick_gelu (x * sigmoid(1.702 x))" "sigmoid" "$vision"
if grep -qE "window_attention|window_order" <<<"$vision"; then fail "window ops in a Qwen2-VL tower"
else ok "no window ops in the vision tower"; fi
if grep -q "rms_norm" <<<"$vision"; then fail "an rms_norm in the Qwen2-VL vision tower"
else ok "no rms_norm in the vision tower"; fi

for case in img336 text_only; do
  images=()
  for image in $(fixture_field "$case" images); do images+=(--image "$image"); done
  declare -A ids=()
  for b in "${BACKENDS[@]}"; do
    if ! ids[$b]=$("$RUN" "$WORK/a.vlmc" --backend "$b" --input-ids \
        "tests/fixtures/parity/$case/input_ids.json" -n 8 --dump-taps "$WORK/t-$b-$case" --quiet \
        "${images[@]}" 2>"$WORK/run-$b.log"); then
      fail "$case --backend $b: $(tail -2 "$WORK/run-$b.log")"
      continue
    fi
    [ "$b" = ref ] && continue
    same "$case --backend $b: the 8 greedy ids equal ref's" "${ids[$b]}" "${ids[ref]}"
    if out=$("$VLMC" diff-taps "$WORK/t-$b-$case" "$WORK/t-ref-$case" 2>&1); then
      ok "$case --backend $b: taps within 1e-4 of ref's"
    else
      fail "$case --backend $b: $(tail -3 <<<"$out")"
    fi
  done
  if [ "$case" = img336 ]; then
    taps=$(tap_names "$WORK/t-ref-$case")
    for tap in patch_embed vision_block.3 merger image_embeds inputs_embeds position_ids logits_last; do
      expect_in "img336: tap $tap (Qwen2.5-VL's name)" "$tap" "$taps"
    done
  fi
done
summary
