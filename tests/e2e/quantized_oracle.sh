#!/usr/bin/env bash
# vlmc's 4-bit path against transformers (issue 16's oracle): the fixtures of
# tests/oracle/make_quantized_fixtures.py are transformers 5.17 run on numpy-dequantized
# twins of the tiny parity checkpoint, so they measure vlmc's kernels, not quantization error.
#   mlx-g64:  the MLX-format checkpoint (make_mlx_checkpoint.py, rebuilt here with numpy), as
#             vlmc compiles it (keeping its quantization);
#   vlmc-g64: the tiny checkpoint compiled with `--quantize q4` (group 64).
# First the twin is rebuilt here and must hash as the one transformers ran (same weights),
# then on every backend given each case's 16 greedy ids must be transformers' and every tap
# within diff-taps' 1e-4 of transformers'.
#   usage: quantized_oracle.sh VLMC VLMC_RUN PYTHON3 ref,cpu,vulkan
set -euo pipefail
VLMC=$1
RUN=$2
PY=$3
IFS=, read -r -a BACKENDS <<<"$4"
CKPT=tests/fixtures/parity/tiny-vocab512
FIX=tests/fixtures/parity_q4
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/lib.sh"

field() { # CASE_DIR KEY [SUBKEY]
  "$PY" - "$1/expected.json" "$2" "${3:-}" <<'PYEOF'
import json, sys
v = json.load(open(sys.argv[1]))[sys.argv[2]]
if sys.argv[3]: v = v[sys.argv[3]]
print(" ".join(map(str, v)) if isinstance(v, list) else v)
PYEOF
}

twin_hash_is() { # TWIN_DIR WANT
  local got
  got=$(sha256sum "$1/model.safetensors" | cut -d' ' -f1)
  if [ "$got" = "$2" ]; then ok "the rebuilt twin is the one transformers ran ($got)"
  else fail "the rebuilt twin hashes $got, the fixture's $2"; fi
}

"$PY" tests/oracle/make_mlx_checkpoint.py "$CKPT" "$WORK/mlx" --group-size 64 \
  --dequantize-to "$WORK/mlx-twin" >/dev/null
twin_hash_is "$WORK/mlx-twin" "$(field "$FIX/mlx-g64/text_only" twin model_safetensors_sha256)"
"$PY" tests/oracle/make_quantized_twin.py "$CKPT" "$WORK/vlmc-twin" --group-size 64 >/dev/null
twin_hash_is "$WORK/vlmc-twin" "$(field "$FIX/vlmc-g64/text_only" twin model_safetensors_sha256)"

targets=$(IFS=,; echo "${BACKENDS[*]}")
compile_or_stop "$VLMC" "$WORK/mlx" "$WORK/mlx.vlmc" "$targets"
compile_or_stop "$VLMC" "$CKPT" "$WORK/vlmc.vlmc" "$targets" --quantize q4:g64

for twin in mlx-g64 vlmc-g64; do
  art=$WORK/${twin%-g64}.vlmc
  for case_dir in "$FIX/$twin"/*/; do
    case=$(basename "$case_dir")
    images=()
    for image in $(field "$case_dir" images); do images+=(--image "$image"); done
    want=$(field "$case_dir" greedy_tokens)
    for b in "${BACKENDS[@]}"; do
      taps=$WORK/taps-$twin-$case-$b
      if ! got=$("$RUN" "$art" --backend "$b" --input-ids "$case_dir/input_ids.json" -n 16 \
                   --quiet --dump-taps "$taps" "${images[@]}" 2>"$WORK/run.log"); then
        fail "$twin $case --backend $b: $(tail -2 "$WORK/run.log")"
        continue
      fi
      if same_tokens "$got" "$want"; then ok "$twin $case --backend $b: transformers' greedy ids"
      else fail "$twin $case --backend $b: ids '$got', transformers '$want'"; fi
      if out=$("$VLMC" diff-taps "$taps" "$case_dir" 2>&1); then
        worst=$(awk '$NF == "ok" && $2 ~ /^[0-9.e+-]+$/ && $4 + 0 > 0 {r = $2 / ($4 > 1 ? $4 : 1); if (r > m) {m = r; n = $1}} END {printf "%.2g (%s)", m, n}' <<<"$out")
        ok "$twin $case --backend $b: taps within 1e-4 of transformers' (worst $worst)"
      else
        fail "$twin $case --backend $b: $(grep -v ' ok$' <<<"$out" | tail -4)"
      fi
    done
  done
done
summary
