#!/usr/bin/env bash
# A model family against transformers: the tiny checkpoint and cases that
# tests/oracle/make_family_fixtures.py writes on the device machine
# (tests/fixtures/parity_families/FAMILY/: tiny/, then one folder per case with input_ids.json,
# taps.safetensors, expected.json). `vlmc compile` of the checkpoint takes no flags; on every
# backend given, each case's 16 greedy ids are transformers' (up to the tiny model's eos),
# every tap both sides have is within 1e-4 (diff-taps: position_ids, the vision blocks, the
# merger, deepstack, inputs_embeds, logits_last, ...), and the processor's pixel rows and sums
# are vlmc's. Until the fixtures exist the test reports itself skipped (exit 77), naming the
# script that makes them.
#   usage: family_parity.sh FAMILY VLMC VLMC_RUN ref,cpu,vulkan
set -euo pipefail
FAMILY=$1
VLMC=$2
RUN=$3
IFS=, read -r -a BACKENDS <<<"$4"
DIR=tests/fixtures/parity_families/$FAMILY
if [ ! -f "$DIR/tiny/config.json" ]; then
  echo "SKIP: $DIR is not made yet: run tests/oracle/make_family_fixtures.py --families $FAMILY" \
       "with transformers 5.17 (the device machine) and commit its output"
  exit 77
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/lib.sh"

compile_or_stop "$VLMC" "$DIR/tiny" "$WORK/a.vlmc" "$4"
expect_in "the manifest names the family" "model: $FAMILY," "$("$VLMC" inspect "$WORK/a.vlmc")"

field() { # CASE KEY: expected.json's KEY, lists space-separated
  python3 - "$DIR/$1/expected.json" "$2" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))[sys.argv[2]]
print(" ".join(map(str, v)) if isinstance(v, list) else v)
PY
}

# pixel_rows VLMC_TAPS FIXTURE_TAPS: the fixture's pixel_values rows (at row_index) and sums
# against vlmc's pixel_values, within 1e-5 of the values' scale (stdlib only).
pixel_rows() {
  python3 - "$1/taps.safetensors" "$2/taps.safetensors" <<'PY'
import json, struct, sys
def load(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    head = json.loads(data[8:8 + n])
    def get(name):
        t = head[name]
        a, b = t["data_offsets"]
        raw = data[8 + n + a:8 + n + b]
        fmt = {"F32": "f", "F64": "d", "I64": "q"}[t["dtype"]]
        return t["shape"], struct.unpack("<%d%s" % (len(raw) // struct.calcsize(fmt), fmt), raw)
    return head, get
vh, vget = load(sys.argv[1])
fh, fget = load(sys.argv[2])
(rows, width), pv = vget("pixel_values")
_, index = fget("row_index")
(_, w2), want = fget("pixel_values_rows")
assert w2 == width, (w2, width)
scale = max(abs(x) for x in want) or 1.0
worst = max(abs(pv[r * width + j] - want[k * width + j]) for k, r in enumerate(index) for j in range(width))
total = sum(pv)
_, fsum = fget("pixel_values_sum")
assert worst <= 1e-5 * scale, "pixel rows differ by %g" % worst
assert abs(total - fsum[0]) <= 1e-5 * max(1.0, abs(fsum[0])), "pixel sum %g vs %g" % (total, fsum[0])
print("%d rows of %d, max |d| %.3g, sum %.6g" % (len(index), width, worst, total))
PY
}

for case_dir in "$DIR"/*/; do
  case=$(basename "$case_dir")
  [ -f "$case_dir/expected.json" ] || continue
  images=()
  for image in $(field "$case" images); do images+=(--image "$image"); done
  want=$(field "$case" greedy_tokens)
  for b in "${BACKENDS[@]}"; do
    if ! got=$("$RUN" "$WORK/a.vlmc" --backend "$b" --input-ids "$case_dir/input_ids.json" \
        -n 16 --dump-taps "$WORK/t-$b-$case" --quiet "${images[@]}" 2>"$WORK/run.log"); then
      fail "$case --backend $b: $(tail -2 "$WORK/run.log")"
      continue
    fi
    if same_tokens "$got" "$want"; then ok "$case --backend $b: transformers' greedy ids"
    else fail "$case --backend $b: ids '$got', transformers '$want'"; fi
    if out=$("$VLMC" diff-taps "$WORK/t-$b-$case" "$case_dir" 2>&1); then
      ok "$case --backend $b: taps within 1e-4 of transformers' ($(grep -c ' ok$' <<<"$out") compared)"
    else
      fail "$case --backend $b: $(grep -v ' ok$' <<<"$out" | tail -4)"
    fi
    if [ ${#images[@]} -gt 0 ] && [ "$b" = "${BACKENDS[0]}" ]; then
      if out=$(pixel_rows "$WORK/t-$b-$case" "$case_dir" 2>&1); then ok "$case: processor rows: $out"
      else fail "$case: processor: $(tail -2 <<<"$out")"; fi
    fi
  done
done
summary
