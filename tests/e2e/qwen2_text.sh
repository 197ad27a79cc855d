#!/usr/bin/env bash
# The qwen2 family (models/qwen2.c: a text-only Qwen2ForCausalLM checkpoint, issue 17) against
# transformers: the tiny parity checkpoint's weights under a qwen2 config.json
# (tests/fixtures/configs/tiny_qwen2_text_config.json: its text keys, flat) are a Qwen2 model
# whose output on a prompt without images is what transformers' Qwen2.5-VL computed for the
# text_only parity case: Qwen2.5-VL's text positions are t = h = w, and M-RoPE with equal
# positions is plain RoPE. So the fixture is this family's oracle too: on every backend given,
# the 16 greedy ids equal transformers' and every tap the two share (input_ids, inputs_embeds,
# position_ids, logits_last) is within 1e-4. Also: compile takes no flags, the manifest names
# the family, the program has no encode_image, Qwen2-Instruct's chat template is known, and an
# image is refused by name.
#   usage: qwen2_text.sh VLMC VLMC_RUN ref,cpu,vulkan
set -euo pipefail
VLMC=$1
RUN=$2
IFS=, read -r -a BACKENDS <<<"$3"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/lib.sh"
TINY=tests/fixtures/parity/tiny-vocab512
CASE=tests/fixtures/parity/text_only

mkdir -p "$WORK/ckpt"
cp tests/fixtures/configs/tiny_qwen2_text_config.json "$WORK/ckpt/config.json"
cp "$TINY/model.safetensors" "$TINY/generation_config.json" "$WORK/ckpt/"
compile_or_stop "$VLMC" "$WORK/ckpt" "$WORK/a.vlmc" "$3"
inspect=$("$VLMC" inspect "$WORK/a.vlmc")
expect_in "the manifest names the family" "model: qwen2," "$inspect"
if grep -q "@encode_image" <<<"$inspect"; then fail "a text-only program has @encode_image"
else ok "no @encode_image in the program"; fi

want=$(fixture_field text_only greedy_tokens)
for b in "${BACKENDS[@]}"; do
  if ! got=$("$RUN" "$WORK/a.vlmc" --backend "$b" --input-ids "$CASE/input_ids.json" -n 16 \
      --dump-taps "$WORK/t-$b" --quiet 2>"$WORK/run-$b.log"); then
    fail "--backend $b: $(tail -2 "$WORK/run-$b.log")"
    continue
  fi
  if same_tokens "$got" "$want"; then ok "--backend $b: the greedy ids are transformers' ($got)"
  else fail "--backend $b: ids '$got', transformers '$want'"; fi
  if out=$("$VLMC" diff-taps "$WORK/t-$b" "$CASE" 2>&1); then
    ok "--backend $b: taps within 1e-4 of transformers' ($(grep logits_last <<<"$out" | tr -s ' ' | cut -d' ' -f2))"
  else
    fail "--backend $b: $(tail -3 <<<"$out")"
  fi
done

# Qwen2-Instruct's chat template in tokenizer_config.json (a text-only checkpoint's) is known
python3 - "$WORK/ckpt/tokenizer_config.json" <<'PY'
import json, sys
json.dump({"chat_template": open("tests/fixtures/chat_templates/qwen2_text.jinja").read()},
          open(sys.argv[1], "w"))
PY
if "$VLMC" compile "$WORK/ckpt" -o "$WORK/t.vlmc" --target ref >"$WORK/compile-t.log" 2>&1; then
  expect_in "compile with Qwen2's text chat template: inspect names it" \
    "chat template: tokenizer_config.json" "$("$VLMC" inspect "$WORK/t.vlmc")"
else
  fail "compile with Qwen2's text chat template: $(tail -2 "$WORK/compile-t.log")"
fi

err=$("$RUN" "$WORK/a.vlmc" --input-ids tests/fixtures/parity/img336/input_ids.json \
      --image tests/fixtures/images/scene_336x336.png -n 1 2>&1 >/dev/null) && rc=0 || rc=$?
if [ "$rc" -ne 0 ] && grep -q "this model takes no images" <<<"$err"; then
  ok "an image is refused by name: $(tail -1 <<<"$err")"
else
  fail "an image given to a text-only model (exit $rc): $err"
fi
summary
