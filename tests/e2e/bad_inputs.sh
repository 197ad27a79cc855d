#!/usr/bin/env bash
# Bad input gets a clear error, never a crash, a hang or a runaway allocation (issue 12), as a
# user meets it through the tools:
#  - a config.json whose num_hidden_layers (16777216, inside the parser's range) or vision
#    depth the checkpoint does not have is refused by field, with the layers the checkpoint
#    has, before anything is allocated for them;
#    vlmc random-checkpoint refuses to plan a checkpoint of that size;
#  - a weight holding a NaN or an infinity is refused by tensor and element, and compiles with
#    --allow-nonfinite (a warning);
#  - 300,000 --input-ids are read in linear time: vlmc-run gets to the --max-context refusal
#    well within `timeout 5` (a quadratic walk of the list takes minutes). Not a benchmark:
#    the limit is generous, and the sanitizer build meets it too.
#   usage: bad_inputs.sh VLMC VLMC_RUN
set -euo pipefail
VLMC=$1
RUN=$2
CKPT=tests/fixtures/parity/tiny-vocab512
EXT=tests/e2e/data/tiny-vocab512-external.vlmc
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

source "$(dirname "$0")/lib.sh"

# refused WHAT NEEDLE COMMAND...: COMMAND fails within `timeout 60` and says NEEDLE.
refused() {
  local what=$1 needle=$2 err rc=0
  shift 2
  err=$(timeout 60 "$@" 2>&1 >/dev/null </dev/null) || rc=$?
  if [ "$rc" -eq 0 ]; then fail "$what: accepted"
  elif [ "$rc" -eq 124 ]; then fail "$what: still running after 60 s"
  else expect_in "$what" "$needle" "$err"; fi
}

# A copy of the tiny checkpoint: links to its files, config.json rewritten by a Python
# expression over `c` (the parsed config), or model.safetensors replaced.
checkpoint_with_config() { # NAME PYTHON-STATEMENT -> prints the folder
  local dir="$WORK/$1" f
  mkdir "$dir"
  for f in "$PWD/$CKPT"/*; do ln -s "$f" "$dir/"; done
  rm "$dir/config.json"
  python3 - "$CKPT/config.json" "$dir/config.json" "$2" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"), indent=2)
EOF
  echo "$dir"
}

# ---- sizes the config implies, against the tensors present ----
dir=$(checkpoint_with_config layers 'c["text_config"]["num_hidden_layers"] = 16777216')
refused "num_hidden_layers 16777216 over a 2-layer checkpoint" \
  "config.json: num_hidden_layers is 16777216, but $dir has blocks 0 to 1 only (model.layers.2.input_layernorm.weight is absent)" \
  "$VLMC" compile "$dir" --target ref -o "$WORK/layers.vlmc"
refused "random-checkpoint from that config" \
  "$dir/config.json: the config implies more than 65536 tensors" \
  "$VLMC" random-checkpoint --config "$dir/config.json" -o "$WORK/random"
if [ -e "$WORK/random" ]; then fail "a refused random-checkpoint wrote $WORK/random"
else ok "a refused random-checkpoint writes nothing"; fi
dir=$(checkpoint_with_config depth 'c["vision_config"]["depth"] = 200')
refused "vision depth 200 over a 4-block checkpoint" \
  "config.json: vision_config.depth is 200, but $dir has blocks 0 to 3 only" \
  "$VLMC" compile "$dir" --target ref -o "$WORK/depth.vlmc"
if ls "$WORK"/*.vlmc >/dev/null 2>&1; then fail "a refused compile left an artifact"
else ok "no artifact is written for a refused config"; fi

# ---- non-finite weights ----
# A copy of model.safetensors with element INDEX of tensor NAME (bf16) set to BITS.
poisoned_checkpoint() { # DIRNAME TENSOR INDEX BITS -> prints the folder
  local dir="$WORK/$1" f
  mkdir "$dir"
  for f in "$PWD/$CKPT"/*; do ln -s "$f" "$dir/"; done
  rm "$dir/model.safetensors"
  python3 - "$CKPT/model.safetensors" "$dir/model.safetensors" "$2" "$3" "$4" <<'EOF'
import json, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
header_len = struct.unpack("<Q", data[:8])[0]
entry = json.loads(data[8:8 + header_len])[sys.argv[3]]
assert entry["dtype"] == "BF16", entry["dtype"]
at = 8 + header_len + entry["data_offsets"][0] + 2 * int(sys.argv[4])
data[at:at + 2] = struct.pack("<H", int(sys.argv[5], 16))
open(sys.argv[2], "wb").write(data)
EOF
  echo "$dir"
}

dir=$(poisoned_checkpoint nan model.layers.1.mlp.down_proj.weight 37 7fc1)
refused "a NaN weight is refused by tensor and element" \
  "tensor 'model.layers.1.mlp.down_proj.weight': element 37 is a NaN" \
  "$VLMC" compile "$dir" --target ref -o "$WORK/nan.vlmc"
refused "the refusal says how to compile anyway" "--allow-nonfinite" \
  "$VLMC" compile "$dir" --target ref -o "$WORK/nan.vlmc"
refused "--params external checks the weights too" "element 37 is a NaN" \
  "$VLMC" compile "$dir" --target ref --params external -o "$WORK/nan.vlmc"
if err=$("$VLMC" compile "$dir" --target ref --allow-nonfinite -o "$WORK/nan.vlmc" 2>&1); then
  ok "--allow-nonfinite compiles it"
  expect_in "with a warning naming the tensor" \
    "warning: tensor 'model.layers.1.mlp.down_proj.weight': element 37 is a NaN" "$err"
else
  fail "--allow-nonfinite: $err"
fi
dir=$(poisoned_checkpoint inf visual.blocks.0.norm1.weight 0 ff80)
refused "an infinite weight is refused" "tensor 'visual.blocks.0.norm1.weight': element 0 is an infinity" \
  "$VLMC" compile "$dir" --target ref -o "$WORK/inf.vlmc"

# ---- a long --input-ids list, read in linear time ----
python3 -c "print('[' + ', '.join(['5'] * 300000) + ']')" >"$WORK/ids.json"
start=$SECONDS
err=$(timeout 5 "$RUN" "$EXT" --params "$CKPT" --input-ids "$WORK/ids.json" -n 1 \
  --max-context 20 2>&1 >/dev/null) && rc=0 || rc=$?
if [ "$rc" -eq 124 ]; then fail "300000 --input-ids: still reading after 5 s"
elif [ "$rc" -eq 0 ]; then fail "300000 --input-ids: --max-context 20 did not refuse them"
else
  expect_in "300000 --input-ids are read, then refused by --max-context" \
    "needs a context of 300001, more than --max-context 20" "$err"
fi
echo "300000 ids read and refused in $((SECONDS - start)) s"

summary
