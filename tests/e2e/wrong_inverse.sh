#!/usr/bin/env bash
# Sensitivity of the parity check to the defect of the dropped-object report (issue 4,
# acceptance 4): compile the tiny checkpoint, take the program after the whole pipeline from
# --dump-dir, replace the window inverse by the window order in the final un-permute (exactly
# the bug of ../shared/background/qwen2_5_vl_dropped_object.md), compile that program back and
# diff its taps against transformers. The 336×336 case must diverge (first at image_embeds),
# the 448×448 case must not (its window order is an involution), and the correct program must
# match both.
#   usage: wrong_inverse.sh VLMC VLMC_RUN
set -euo pipefail
VLMC=$1
RUN=$2
CKPT=tests/fixtures/parity/tiny-vocab512
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

"$VLMC" compile "$CKPT" -o "$WORK/good.vlmc" --dump-dir "$WORK/dump" 2>/dev/null
last=$(ls "$WORK"/dump/*.vir | sort | tail -1)
grep -q 'gather %image_embeds, %window_inverse ' "$last" || {
  echo "FAIL: the final program has no 'gather %image_embeds, %window_inverse' to plant the defect in"
  exit 1
}
sed 's/gather %image_embeds, %window_inverse /gather %image_embeds, %window_order /' \
  "$last" >"$WORK/wrong.vir"
"$VLMC" compile "$CKPT" --program "$WORK/wrong.vir" -o "$WORK/wrong.vlmc" 2>/dev/null

ids_of() { /usr/bin/env python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['input_ids']))" "$1"; }
image_of() { /usr/bin/env python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['images'][0])" "$1"; }

# Runs artifact $1 on case $2; prints the first diverging tap (or "none").
first_divergence() {
  local artifact=$1 case=$2
  local dir="$WORK/$(basename "$artifact")-$case"
  ids_of "tests/fixtures/parity/$case/expected.json" >"$WORK/ids.json"
  "$RUN" "$artifact" --input-ids "$WORK/ids.json" --image "$(image_of "tests/fixtures/parity/$case/expected.json")" \
    -n 1 --dump-taps "$dir" >/dev/null
  local out
  out=$("$VLMC" diff-taps "$dir" "tests/fixtures/parity/$case" || true)
  grep -o 'first divergence: .*' <<<"$out" | sed 's/first divergence: //' || echo none
}

passed=0
failed=0
check() {
  local what=$1 got=$2 want=$3
  if [ "$got" = "$want" ]; then
    echo "ok   $what: first divergence $got"; passed=$((passed + 1))
  else
    echo "FAIL $what: first divergence '$got', expected '$want'"; failed=$((failed + 1))
  fi
}
check "correct program, img336" "$(first_divergence "$WORK/good.vlmc" img336)" none
check "correct program, img448" "$(first_divergence "$WORK/good.vlmc" img448)" none
check "order used as inverse, img336" "$(first_divergence "$WORK/wrong.vlmc" img336)" image_embeds
check "order used as inverse, img448 (involution)" "$(first_divergence "$WORK/wrong.vlmc" img448)" none
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
