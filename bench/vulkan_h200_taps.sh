#!/usr/bin/env bash
# Where vlmc's vulkan backend and transformers part on the 3B-shaped checkpoint, on the GPU
# machine: runs there (after bench/vulkan_h200.sh prepared .h200/ and .gl/ here, like
# bench/vulkan_h200_device.sh), on the 448x448 image prompt of the benchmark:
#   transformers f32 (tests/oracle/dump_taps.py --device cuda: eager, TF32 off) and
#   vlmc-run --dump-taps with the f32 vulkan artifact (and the f16 one with --precision f16),
# then prints each tap both have, in pipeline order, with max |vlmc - transformers| over
# max |transformers|, and the greedy tokens of each. The 3B's taps are ~200 MB each, over what
# comes back from the machine, so they are compared there; $OUT gets the table (taps_diff.txt).
#   bench/vulkan_h200_taps.sh [f32|f16]
set -uo pipefail
cd "$(dirname "$0")/.."
P=${1:-f32}
source bench/h200_lib.sh  # H, W, CKPT, the environment; h200_checkpoint, h200_vulkan
OUT=${OUT:-$PWD/h200-out}
mkdir -p "$OUT"
h200_checkpoint >/dev/null 2>&1 || { echo "checkpoint failed"; exit 1; }
IMAGE=tests/fixtures/images/square_448.png
python3 -c 'import json; json.dump([151652] + [151655] * 256 + [151653, 1000, 2000, 3000],
open("/tmp/vlmc-h200/ids448.json", "w"))'

echo "== transformers f32 taps ($(date +%T))"
python3 tests/oracle/dump_taps.py "$CKPT" --image "$IMAGE" --input-ids "$W/ids448.json" \
  -o "$W/hf" -n 8 --pixel-rows 64 --device cuda --skip-no-cache-check 2>&1 | tail -3

echo "== vlmc vulkan $P taps ($(date +%T))"
h200_vulkan >/dev/null 2>&1
rm -rf "$W/vl"
"$H/vlmc-run" "$H/3b-vk-$P.vlmc" --backend vulkan --params "$CKPT" --image "$IMAGE" \
  --input-ids "$W/ids448.json" -n 8 --ids --quiet --dump-taps "$W/vl" 2>&1 | tail -3

echo "== diff ($(date +%T))"
python3 - "$W/hf" "$W/vl/taps.safetensors" <<'EOF' | tee "$OUT/taps_diff.txt"
import json, sys
import numpy as np
from safetensors.numpy import load_file
hf = load_file(sys.argv[1] + "/taps.safetensors")
vl = load_file(sys.argv[2])
expected = json.load(open(sys.argv[1] + "/expected.json"))
print("transformers greedy:", expected.get("greedy_tokens"))
order = ["pixel_values", "image_grid_thw", "patch_embed"] + \
        ["vision_block.%d" % i for i in range(64)] + \
        ["merger", "image_embeds", "input_ids", "position_ids", "rope_deltas", "inputs_embeds",
         "logits_last"]
def show(name, a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    if a.shape != b.shape:
        print("%-16s shape transformers %s, vlmc %s" % (name, a.shape, b.shape)); return
    d = np.abs(a - b); scale = max(np.abs(a).max(), 1e-30)
    worst = np.unravel_index(int(d.argmax()), d.shape)
    print("%-16s %-14s max|d| %.3e  / max|hf| %.3e = %.2e  at %s" % (
        name, str(a.shape), d.max(), scale, d.max() / scale, worst))
for name in order:
    if name == "pixel_values" and "pixel_values_rows" in hf and name in vl:
        rows = hf["row_index"]
        show("pixel_values*", hf["pixel_values_rows"], vl[name][rows])
        continue
    if name in hf and name in vl:
        show(name, hf[name], vl[name])
lt = hf["logits_last"]
top = np.argsort(-lt)[:3]
print("transformers top-3 at the last prefill row:", [(int(i), float(lt[i])) for i in top])
if "logits_last" in vl:
    lv = vl["logits_last"]
    print("vlmc top-3:", [(int(i), float(lv[i])) for i in np.argsort(-lv)[:3]])
print("names only in transformers:", sorted(set(hf) - set(vl))[:12])
print("names only in vlmc:", sorted(set(vl) - set(hf))[:12])
EOF
