#!/usr/bin/env bash
# vlmc random-checkpoint: the tensor list of the real configs (3B, 7B) fits the model builder
# (--dry-run: nothing written); a small config written sharded gives valid safetensors whose
# index matches the shards, the same seed gives the same bytes and another seed other bytes,
# and the folder compiles and runs; bench/random_checkpoint.py writes the same bytes from a
# skeleton. bench/load_time.sh uses it for the 3B-shaped artifact.
#   usage: random_checkpoint.sh VLMC VLMC_RUN
set -euo pipefail
VLMC=$1
RUN=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

source "$(dirname "$0")/lib.sh"

# Qwen2.5-VL-3B has 3.75 B parameters (tied head), 7B 8.29 B (its own lm_head); Qwen2-VL-2B
# 2.21 B (2,208,985,600, the hub's count: its LayerNorm biases and fc1/fc2 included); the
# text-only Qwen2.5-0.5B (model_type qwen2) 494,032,768 in 290 tensors, as published;
# Qwen3-VL-2B 2,127,532,032 in 625 tensors (the position table, patch bias, q/k norms and the
# three deepstack mergers included; tied head).
for want in "qwen2_5_vl_3b_config.json:824 tensors, 3754622976 parameters" \
            "qwen2_5_vl_7b_config.json:729 tensors, 8292166656 parameters" \
            "qwen2_5_vl_7b_nested_config.json:729 tensors, 8292166656 parameters" \
            "qwen2_vl_2b_config.json:729 tensors, 2208985600 parameters" \
            "qwen2_5_0_5b_config.json:290 tensors, 494032768 parameters" \
            "qwen3_vl_2b_config.json:625 tensors, 2127532032 parameters"; do
  config=${want%%:*}
  out=$("$VLMC" random-checkpoint --config "tests/fixtures/configs/$config" -o "$WORK/dry" \
    --dry-run 2>&1)
  if grep -qF "${want#*:}" <<<"$out" && [ ! -e "$WORK/dry" ]; then ok "$config: ${want#*:}"
  else fail "$config: $out"; fi
done

CONFIG=tests/fixtures/parity/tiny-vocab512/config.json
"$VLMC" random-checkpoint --config "$CONFIG" -o "$WORK/a" --seed 3 --shard-size 300K 2>/dev/null
"$VLMC" random-checkpoint --config "$CONFIG" -o "$WORK/b" --seed 3 --shard-size 300K 2>/dev/null
"$VLMC" random-checkpoint --config "$CONFIG" -o "$WORK/c" --seed 4 --shard-size 300K 2>/dev/null

# Every shard a valid safetensors file: header, contiguous data, the index agrees.
python3 - "$WORK/a" <<'EOF' && ok "4 shards, valid safetensors, index consistent" ||
import json, os, struct, sys
d = sys.argv[1]
index = json.load(open(d + "/model.safetensors.index.json"))
shards = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
assert shards == ["model-%05d-of-00004.safetensors" % i for i in range(1, 5)], shards
total, names = 0, set()
for shard in shards:
    f = open(os.path.join(d, shard), "rb")
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    assert (8 + n) % 8 == 0
    assert header.pop("__metadata__") == {"format": "pt"}
    end = 0
    for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        assert t["dtype"] == "BF16" and t["data_offsets"][0] == end, (name, t)
        count = 1
        for s in t["shape"]:
            count *= s
        end += 2 * count
        assert t["data_offsets"][1] == end
        assert index["weight_map"][name] == shard
        names.add(name)
    assert os.path.getsize(os.path.join(d, shard)) == 8 + n + end
    total += end
assert total == index["metadata"]["total_size"] and names == set(index["weight_map"])
for name in ("config.json", "generation_config.json", "preprocessor_config.json"):
    json.load(open(os.path.join(d, name)))
EOF
  fail "the shards or the index are not what they should be"

same_bytes=1
for f in "$WORK"/a/*.safetensors; do cmp -s "$f" "$WORK/b/$(basename "$f")" || same_bytes=0; done
[ $same_bytes = 1 ] && ok "the same seed writes the same bytes" || fail "seed 3 twice differs"
cmp -s "$WORK/a/model-00001-of-00004.safetensors" "$WORK/c/model-00001-of-00004.safetensors" &&
  fail "seeds 3 and 4 wrote the same bytes" || ok "another seed writes other bytes"

# bench/random_checkpoint.py (for the GPU machine, where vlmc does not build) writes the same
# checkpoint from a skeleton of its small files and headers: every file, byte for byte.
# The system python3 (Debian's python3-numpy), as tests/e2e.cmake picks it for numpy scripts.
PY=$(command -v /usr/bin/python3 || command -v python3)
"$PY" bench/random_checkpoint.py skeleton "$WORK/a" "$WORK/skel.json" >/dev/null
"$PY" bench/random_checkpoint.py write "$WORK/skel.json" "$WORK/py" --seed 3 --jobs 2 \
  >/dev/null 2>&1
same_bytes=1
for f in "$WORK"/a/*; do cmp -s "$f" "$WORK/py/$(basename "$f")" || same_bytes=0; done
[ "$(ls "$WORK/py" | wc -l)" = "$(ls "$WORK/a" | wc -l)" ] || same_bytes=0
[ $same_bytes = 1 ] && ok "bench/random_checkpoint.py writes vlmc's bytes (4 shards, seed 3)" ||
  fail "bench/random_checkpoint.py wrote other bytes than vlmc random-checkpoint"

echo '[3, 1, 4, 1, 5]' >"$WORK/ids.json"
if "$VLMC" compile "$WORK/a" -o "$WORK/a.vlmc" 2>/dev/null &&
   out=$("$RUN" "$WORK/a.vlmc" --input-ids "$WORK/ids.json" -n 3) && [ -n "$out" ]; then
  ok "the random checkpoint compiles and runs ($out)"
else
  fail "compile or run of the random checkpoint"
fi

err=$("$VLMC" random-checkpoint --config tests/fixtures/configs/generation_config.json \
  -o "$WORK/bad" 2>&1) && fail "a config without model_type was accepted" ||
  { grep -q "model_type" <<<"$err" && ok "a bad config is refused by key" || fail "$err"; }

summary
