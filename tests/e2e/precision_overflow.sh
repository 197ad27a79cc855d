#!/usr/bin/env bash
# f16 with calibration, through the CLI as a user runs it (issue 13 item 3). The tiny
# checkpoint with the last vision block's MLP weights scaled by 256 (exact in bf16) computes
# fine in f32, but its MLP output and the residual after it pass f16's 65504:
#   - compiled --precision f16 WITHOUT --calibrate, the run must show the hazard: an error
#     naming non-finite values, or greedy tokens other than f32's;
#   - compiled with --calibrate IMG (another image than the one asked about: calibration
#     must cover unseen inputs), it must print exactly f32's greedy tokens, and the upcast set
#     must name visual.blocks.3.mlp and no other module;
#   - vlmc inspect reports the upcast counts; --calibrate with --precision f32 is refused;
#   - with the shapes model (tokenizer, chat template) the request goes through the template.
#   usage: precision_overflow.sh VLMC VLMC_RUN SCALE_WEIGHTS TARGET BACKEND
#   (TARGET and BACKEND: `ref ref` now; `vulkan vulkan` once that target exists)
set -euo pipefail
VLMC=$1
RUN=$2
SCALE=$3
TARGET=$4
BACKEND=$5
CKPT=tests/fixtures/parity/tiny-vocab512
CALIBRATION_IMAGE=tests/fixtures/images/square_336.png
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

source "$(dirname "$0")/lib.sh"

"$SCALE" "$CKPT" "$WORK/overflow" 256 visual.blocks.3.mlp.up_proj.weight \
  visual.blocks.3.mlp.down_proj.weight
fixture_field img336 input_ids >"$WORK/ids.json"
image=$(fixture_field img336 images)

compile() { # NAME FLAGS...: compiles the overflowing checkpoint; stderr into $WORK/NAME.log
  local name=$1
  shift
  "$VLMC" compile "$WORK/overflow" --target "$TARGET" -o "$WORK/$name.vlmc" "$@" \
    2>"$WORK/$name.log"
}
generate() { # NAME: the greedy ids (stdout and stderr; the exit status is the run's)
  "$RUN" "$WORK/$1.vlmc" --backend "$BACKEND" --input-ids "$WORK/ids.json" --image "$image" \
    -n 8 --ids --threads 2 2>&1
}

compile f32 --precision f32
compile f16 --precision f16
compile calibrated --precision f16 --calibrate "$CALIBRATION_IMAGE"
want=$(generate f32)
if [[ "$want" =~ ^[0-9]+( [0-9]+)*$ ]]; then ok "f32 greedy tokens: $want"
else fail "the f32 run failed: $want"; fi

# The hazard is real: f16 by rule only overflows.
status=0
got=$(generate f16) || status=$?
if [ $status -ne 0 ] && grep -qiE "nan|inf|finite" <<<"$got"; then
  ok "f16 without calibration fails on non-finite values: $got"
elif [ $status -eq 0 ] && [ "$got" != "$want" ]; then
  ok "f16 without calibration gives other tokens than f32: $got"
else
  fail "f16 without calibration matched f32 ('$got'): the checkpoint does not overflow"
fi
expect_in "the uncalibrated compile says no calibration was done" \
  "precision f16: rule-based policy only" "$(cat "$WORK/f16.log")"
expect_in "... and how to calibrate" "(--calibrate IMG to measure ranges)" "$(cat "$WORK/f16.log")"

# Calibration repairs it, upcasting only the scaled MLP.
same "f16 with --calibrate prints f32's greedy tokens" "$(generate calibrated)" "$want"
log=$(cat "$WORK/calibrated.log")
expect_in "calibration reports its progress per image" \
  "calibrate: image 1/1 $CALIBRATION_IMAGE" "$log"
upcasts=$(grep "upcast: " <<<"$log" || true)
named="(visual.blocks.3.mlp) kept in f32: max |x|"
if [ -n "$upcasts" ] && ! grep -vF "$named" <<<"$upcasts" >/dev/null; then ok "every upcast names visual.blocks.3.mlp and its max |x|: $(wc -l <<<"$upcasts") ops"
else fail "upcast lines: '$upcasts'"; fi
expect_in "the summary names the module" "by calibration (visual.blocks.3.mlp)," "$log"
if grep -qE "upcast: .*\(visual\.blocks\.[012]\." <<<"$log"; then fail "another block was upcast"
else ok "no other vision block is upcast"; fi

# vlmc inspect: the counts from the manifest.
expect_in "inspect counts the calibrated upcasts" \
  "by calibration (visual.blocks.3.mlp)" "$("$VLMC" inspect "$WORK/calibrated.vlmc")"
expect_in "inspect says an uncalibrated artifact is not" "by calibration (not calibrated)" \
  "$("$VLMC" inspect "$WORK/f16.vlmc")"

# A checkpoint with a tokenizer and chat template: the calibration request is built as
# vlmc-run builds one (template, tokens, preprocessing, positions), with --calibrate-prompt;
# the healthy shapes model needs no calibration upcast.
"$VLMC" compile assets/shapes-vl --target "$TARGET" --precision f16 -o "$WORK/shapes.vlmc" \
  --calibrate "$CALIBRATION_IMAGE" --calibrate-prompt "Which shapes?" 2>"$WORK/shapes.log"
log=$(cat "$WORK/shapes.log")
expect_in "the request goes through the chat template" \
  'prompt tokens (chat template, "Which shapes?")' "$log"
expect_in "a model that fits f16 gets no calibration upcast" \
  "precision f16: 0 ops upcast to f32 by calibration (none)" "$log"

# Nothing to calibrate in f32: refused by name, no artifact written.
status=0
err=$("$VLMC" compile "$WORK/overflow" --target "$TARGET" --precision f32 \
  --calibrate "$CALIBRATION_IMAGE" -o "$WORK/refused.vlmc" 2>&1) || status=$?
if [ $status -ne 0 ] && [ ! -e "$WORK/refused.vlmc" ]; then ok "--calibrate with f32 is refused"
else fail "--calibrate with --precision f32 was accepted"; fi
expect_in "... saying why" "nothing to calibrate" "$err"
summary
