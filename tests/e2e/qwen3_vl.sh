#!/usr/bin/env bash
# The qwen3_vl family (models/qwen3_vl.c, issue 17) before its transformers fixtures exist
# (tests/oracle/make_family_fixtures.py, to be run on the device machine): a tiny random
# checkpoint (tests/fixtures/configs/tiny_qwen3_vl_config.json: the sizes of the oracle
# script's Qwen3-VL) made by vlmc random-checkpoint compiles with no flags; its program has the
# learned position table (pos_interp_index / pos_interp_weight), LayerNorm / gelu-tanh blocks
# without windows, two deepstack features returned by encode_image and taken by prefill, and
# interleaved M-RoPE, shown by the mrope-layout pass's report; every backend given runs one
# image, two images and a text-only prompt to the ref backend's ids with taps within 1e-4 (the
# deepstack taps included). The defect class of the second background report is caught: the
# same program with the Qwen2.5-VL (sectioned) layout changes the image prompt's logits. What
# this cannot show (that the graph is transformers' Qwen3-VL) is the oracle's.
#   usage: qwen3_vl.sh VLMC VLMC_RUN ref,cpu,vulkan
set -euo pipefail
VLMC=$1
RUN=$2
IFS=, read -r -a BACKENDS <<<"$3"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/lib.sh"
CONFIG=tests/fixtures/configs/tiny_qwen3_vl_config.json
SHAPES=tests/fixtures/test_image_shapes.png
SCENE=tests/fixtures/images/scene_336x336.png
WIDE=tests/fixtures/images/scene_224x448.png

"$VLMC" random-checkpoint --config "$CONFIG" -o "$WORK/ckpt" --seed 7 >/dev/null
compile_or_stop "$VLMC" "$WORK/ckpt" "$WORK/a.vlmc" "$3" --dump-dir "$WORK/dumps"
inspect=$("$VLMC" inspect "$WORK/a.vlmc")
expect_in "the manifest names the family" "model: qwen3_vl," "$inspect"
input="$WORK/dumps/00-input.vir"
vision=$(sed -n '/^func @encode_image/,/^}/p' "$input")
expect_in "the learned position table's corners" "pos_interp_index" "$vision"
expect_in "and their weights" "pos_interp_weight" "$vision"
expect_in "the blocks' MLP is gelu_pytorch_tanh" "approx=tanh" "$vision"
expect_in "the vision norms are LayerNorms" "layer_norm" "$vision"
if grep -qE "window_attention|window_order|rms_norm" <<<"$vision"; then
  fail "window ops or an rms_norm in a Qwen3-VL tower"
else ok "no window ops, no rms_norm in the vision tower"; fi
expect_in "encode_image returns the merged rows and two deepstack features" \
  "-> (f32[P/4,64], f32[P/4,64], f32[P/4,64])" "$(grep '^func @encode_image' "$input")"
expect_in "prefill takes them between the ids and the positions" \
  "%image_embeds: f32[M,64], %deepstack.0: f32[M,64], %deepstack.1: f32[M,64], %positions" \
  "$(grep '^func @prefill' "$input")"
expect_in "q/k norms in the text model" "self_attn.q_norm.weight" "$(cat "$input")"
expect_in "interleaved M-RoPE, as the mrope-layout pass reports it" \
  "@prefill: rope mrope_interleaved[4,2,2], 8 slots: t 0, h 1, w 2, t 3, h 4, w 5, t 6-7" \
  "$(cat "$WORK/a.vlmc.log")"

# The prompts: the parity cases' ids with each image's run of pads as long as a 16-pixel patch
# grid makes it (transformers' smart_resize with factor 32: round half to even, the area
# bounds of the checkpoint's preprocessor_config.json).
ids_for() { # CASE OUT IMAGE...
  python3 - "$@" <<'PY'
import json, math, os, struct, sys
case, out, images = sys.argv[1], sys.argv[2], sys.argv[3:]
ids = json.load(open("tests/fixtures/parity/%s/input_ids.json" % case))
pre = json.load(open(os.path.join(os.path.dirname(out), "..", "ckpt", "preprocessor_config.json")))
def tokens(path):
    head = open(path, "rb").read(24)
    w, h = struct.unpack(">II", head[16:24])
    f, lo, hi = 32, pre["min_pixels"], pre["max_pixels"]
    hb, wb = round(h / f) * f, round(w / f) * f
    if hb * wb > hi:
        beta = math.sqrt(h * w / hi)
        hb, wb = math.floor(h / beta / f) * f, math.floor(w / beta / f) * f
    elif hb * wb < lo:
        beta = math.sqrt(lo / (h * w))
        hb, wb = math.ceil(h * beta / f) * f, math.ceil(w * beta / f) * f
    return (hb // 16) * (wb // 16) // 4
new, i, k = [], 0, 0
while i < len(ids):
    if ids[i] == 500:
        while i < len(ids) and ids[i] == 500:
            i += 1
        new += [500] * tokens(images[k])
        k += 1
    else:
        new.append(ids[i])
        i += 1
assert k == len(images), (k, images)
json.dump(new, open(out, "w"))
PY
}
mkdir -p "$WORK/prompts"
ids_for img336 "$WORK/prompts/img336.ids.json" "$SCENE"
ids_for two_images "$WORK/prompts/two_images.ids.json" "$SHAPES" "$WIDE"
ids_for text_only "$WORK/prompts/text_only.ids.json"

run_case() { # CASE IMAGE...
  local case=$1
  shift
  local images=()
  for image in "$@"; do images+=(--image "$image"); done
  declare -A ids=()
  for b in "${BACKENDS[@]}"; do
    if ! ids[$b]=$("$RUN" "$WORK/a.vlmc" --backend "$b" --input-ids \
        "$WORK/prompts/$case.ids.json" -n 8 --dump-taps "$WORK/t-$b-$case" --quiet \
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
}
run_case img336 "$SCENE"
run_case two_images "$SHAPES" "$WIDE"
run_case text_only

taps=$(tap_names "$WORK/t-ref-img336")
for tap in patch_embed vision_block_input.0 vision_block.3 deepstack.0 deepstack.1 merger \
    image_embeds inputs_embeds lm_layer.0 lm_layer.1 deepstack_visual_embeds.0 \
    deepstack_visual_embeds.1 position_ids logits_last; do
  expect_in "img336: tap $tap" "$tap" "$taps"
done

# The defect class: the same program with the Qwen2.5-VL layout (contiguous sections) is
# refused by nothing and computes something else for an image prompt.
sed 's/layout=mrope_interleaved/layout=mrope_sectioned/g' "$input" >"$WORK/sectioned.vir"
compile_or_stop "$VLMC" "$WORK/ckpt" "$WORK/sectioned.vlmc" ref --program "$WORK/sectioned.vir"
"$RUN" "$WORK/sectioned.vlmc" --backend ref --input-ids "$WORK/prompts/img336.ids.json" -n 1 \
  --dump-taps "$WORK/t-sectioned" --quiet --image "$SCENE" >/dev/null
if out=$("$VLMC" diff-taps "$WORK/t-sectioned" "$WORK/t-ref-img336" 2>&1); then
  fail "the sectioned layout left the image prompt's taps unchanged"
else
  expect_in "the sectioned layout changes the prefill logits" "logits_last" \
    "$(grep -v ' ok$' <<<"$out")"
fi

# Text-only Qwen3 (Qwen3ForCausalLM, model_type qwen3): the same language-model weights under
# a flat qwen3 config.json are the text tower, so on a prompt without images (t = h = w, where
# every M-RoPE layout is plain RoPE) they give the Qwen3-VL program's ids and logits.
mkdir -p "$WORK/text"
cp "$WORK/ckpt"/*.safetensors "$WORK/ckpt"/*.index.json "$WORK/ckpt/generation_config.json" "$WORK/text/"
cp tests/fixtures/configs/tiny_qwen3_text_config.json "$WORK/text/config.json"
compile_or_stop "$VLMC" "$WORK/text" "$WORK/text.vlmc" "$3"
expect_in "the text-only manifest names its family" "model: qwen3," "$("$VLMC" inspect "$WORK/text.vlmc")"
for b in "${BACKENDS[@]}"; do
  got=$("$RUN" "$WORK/text.vlmc" --backend "$b" --input-ids "$WORK/prompts/text_only.ids.json" \
    -n 8 --dump-taps "$WORK/t-text-$b" --quiet 2>&1) || true
  same "qwen3 text-only --backend $b: Qwen3-VL's text_only ids" "$got" \
    "$("$RUN" "$WORK/a.vlmc" --backend ref --input-ids "$WORK/prompts/text_only.ids.json" -n 8 --quiet)"
  if out=$("$VLMC" diff-taps "$WORK/t-text-$b" "$WORK/t-ref-text_only" 2>&1); then
    ok "qwen3 text-only --backend $b: taps within 1e-4 of Qwen3-VL's"
  else
    fail "qwen3 text-only --backend $b: $(tail -3 <<<"$out")"
  fi
done
if out=$("$RUN" "$WORK/text.vlmc" --backend ref --input-ids "$WORK/prompts/img336.ids.json" \
    -n 1 --image "$SCENE" 2>&1); then
  fail "a text-only qwen3 took an image"
else
  expect_in "a text-only qwen3 refuses an image by name" "takes no images" "$out"
fi

# Sections that do not sum to the rotary half-width are refused by name.
mkdir -p "$WORK/bad"
cp "$WORK/ckpt"/* "$WORK/bad/"
sed 's/"mrope_section": \[4, 2, 2\]/"mrope_section": [4, 2, 1]/' "$CONFIG" >"$WORK/bad/config.json"
if out=$("$VLMC" compile "$WORK/bad" -o "$WORK/bad.vlmc" --target ref 2>&1); then
  fail "mrope_section [4,2,1] compiled"
else
  expect_in "mrope_section [4,2,1] is refused by name" \
    "mrope_section [4,2,1] sums to 7, rotary half-width is 8" "$out"
fi
summary
