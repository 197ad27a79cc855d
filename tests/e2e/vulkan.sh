#!/usr/bin/env bash
# The vulkan target and backend as a user meets them (issue 13), on whatever Vulkan device the
# machine has (lavapipe in CI):
#   - the acceptance command: assets/shapes-vl compiled --target vulkan, f32 and f16, names the
#     three shapes of the bug report's image on --backend vulkan;
#   - `vlmc inspect` lists the vulkan kernels (workgroup size, push constants, bindings) and
#     `--verify` passes; `vlmc-run --list-devices` names a device;
#   - `--stats` prints host<->device bytes per call and GPU time;
#   - no silent fallback: a kernel table with one dispatch taken out is refused at open, by
#     name, and so is a kernel whose SPIR-V was damaged, even with fresh checksums;
#   - a missing loader is a clear error, and the other backends still run.
#   usage: vulkan.sh VLMC VLMC_RUN
set -euo pipefail
VLMC=$1
RUN=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/lib.sh"

IMAGE=tests/fixtures/test_image_shapes.png
PROMPT="What shapes and colors are in this image? Answer briefly."

shapes_named() { # TEXT: red square, green triangle and blue circle, each named
  grep -qi "red square" <<<"$1" && grep -qi "green triangle" <<<"$1" && grep -qi "blue circle" <<<"$1"
}

for precision in f32 f16; do
  art=$WORK/s-$precision.vlmc
  if ! "$VLMC" compile assets/shapes-vl --target vulkan --precision "$precision" -o "$art" \
       2>"$WORK/compile-$precision.log"; then
    fail "compile --target vulkan --precision $precision: $(tail -3 "$WORK/compile-$precision.log")"
    continue
  fi
  text=$("$RUN" "$art" --image "$IMAGE" -p "$PROMPT" 2>"$WORK/run-$precision.log") || true
  if shapes_named "$text"; then
    ok "vulkan $precision names the three shapes: $text"
  else
    fail "vulkan $precision: '$text' ($(tail -3 "$WORK/run-$precision.log"))"
  fi
done

art=$WORK/s-f32.vlmc
inspect=$("$VLMC" inspect "$art" 2>&1) || true
expect_in "inspect lists vulkan kernels" "workgroup" "$inspect"
expect_in "inspect shows push constants" "push" "$inspect"
if "$VLMC" inspect --verify "$art" >/dev/null 2>&1; then ok "inspect --verify passes"
else fail "inspect --verify: $("$VLMC" inspect --verify "$art" 2>&1 | tail -2)"; fi

devices=$("$RUN" --list-devices 2>&1) || true
expect_in "--list-devices prints a subgroup size" "subgroup" "$devices"

stats=$("$RUN" "$art" --image "$IMAGE" -p "$PROMPT" -n 4 --stats 2>&1 >/dev/null) || true
expect_in "--stats: host<->device bytes" "host<->device" "$stats"
expect_in "--stats: GPU time" "GPU" "$stats"

# Chunked submission (runtime/backends/vulkan/README.md: by default the batch goes to the
# queue in chunks growing from 32 dispatches; VLMC_VULKAN_CHUNK=N fixed chunks of N, N+
# growing from N, 0 whole batches) gives the same text in every mode, with more submits than
# whole batches; the dispatches wait on one another with compute-only barriers unless
# VLMC_VULKAN_FULL_BARRIERS=1 (the same text again).
submits() { grep -o '[0-9]* submits' "$1" | head -1 | cut -d' ' -f1; }
whole=$(VLMC_VULKAN_CHUNK=0 "$RUN" "$art" --image "$IMAGE" -p "$PROMPT" -n 12 --stats \
          2>"$WORK/whole.log") || true
for mode in default 3 2+ full-barriers; do
  case $mode in
    default) env=() ;;
    full-barriers) env=(VLMC_VULKAN_FULL_BARRIERS=1) ;;
    *) env=(VLMC_VULKAN_CHUNK=$mode) ;;
  esac
  chunked=$(env "${env[@]}" "$RUN" "$art" --image "$IMAGE" -p "$PROMPT" -n 12 --stats \
              2>"$WORK/chunked.log") || true
  if [ -n "$whole" ] && [ "$whole" = "$chunked" ] &&
     [ "$(submits "$WORK/chunked.log")" -gt "$(submits "$WORK/whole.log")" ]; then
    ok "chunked submission ($mode): the same text, $(submits "$WORK/chunked.log") submits against $(submits "$WORK/whole.log") for whole batches"
  else
    fail "chunked submission ($mode): '$chunked' against '$whole' ($(tail -2 "$WORK/chunked.log"))"
  fi
done
bad=$(VLMC_VULKAN_CHUNK=12x "$RUN" "$art" -p "$PROMPT" -n 2 2>&1 >/dev/null) || true
expect_in "a malformed VLMC_VULKAN_CHUNK is named, the default kept" "VLMC_VULKAN_CHUNK=12x is not N or N+" "$bad"

# No silent fallback: take the first dispatch out of the vulkan kernel table.
"$VLMC" reseal "$art" --extract kernels.vulkan.json="$WORK/table.json" \
  --extract kernels.vulkan="$WORK/kernels.spv"
missing=$(python3 - "$WORK/table.json" "$WORK/table-missing.json" <<'PY'
import json, sys
table = json.load(open(sys.argv[1]))
gone = table["dispatches"].pop(0)
json.dump(table, open(sys.argv[2], "w"))
print(f"@{gone['func']} dispatch {gone['dispatch']}")
PY
)
"$VLMC" reseal "$art" -o "$WORK/missing.vlmc" --replace kernels.vulkan.json="$WORK/table-missing.json"
rc=0
out=$("$RUN" "$WORK/missing.vlmc" --backend vulkan --image "$IMAGE" -p "$PROMPT" -n 1 2>&1) || rc=$?
if [ "$rc" -ne 0 ] && grep -qF "no kernel for $missing" <<<"$out"; then
  ok "a region without a vulkan kernel is refused by name: $(tail -1 <<<"$out")"
else
  fail "a table without $missing: rc $rc: $(tail -2 <<<"$out")"
fi

# Damaged SPIR-V (the magic number of the first module), resealed with fresh checksums.
python3 - "$WORK/kernels.spv" "$WORK/kernels-bad.spv" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[0:4] = b"\0\0\0\0"
open(sys.argv[2], "wb").write(data)
PY
"$VLMC" reseal "$art" -o "$WORK/bad-spirv.vlmc" --replace kernels.vulkan="$WORK/kernels-bad.spv"
rc=0
out=$("$RUN" "$WORK/bad-spirv.vlmc" --backend vulkan --image "$IMAGE" -p "$PROMPT" -n 1 2>&1) || rc=$?
if [ "$rc" -ne 0 ] && grep -q "kernels.vulkan" <<<"$out" && ! grep -qi "sanitizer\|segmentation" <<<"$out"; then
  ok "damaged SPIR-V is refused: $(tail -1 <<<"$out")"
else
  fail "damaged SPIR-V: rc $rc: $(tail -2 <<<"$out")"
fi
rc=0
out=$("$VLMC" inspect --verify "$WORK/bad-spirv.vlmc" 2>&1) || rc=$?
if [ "$rc" -ne 0 ]; then ok "inspect --verify refuses damaged SPIR-V"; else fail "inspect --verify passed damaged SPIR-V"; fi

# A machine without the Vulkan loader: a clear error for vulkan, the ref backend still runs.
both=$WORK/both.vlmc
"$VLMC" compile assets/shapes-vl --target ref,vulkan -o "$both" 2>/dev/null
rc=0
out=$(VLMC_VULKAN_LOADER=/nonexistent/libvulkan.so.1 "$RUN" "$both" --backend vulkan \
      --image "$IMAGE" -p "$PROMPT" -n 1 2>&1) || rc=$?
if [ "$rc" -ne 0 ] && grep -q "libvulkan" <<<"$out"; then ok "no loader: $(tail -1 <<<"$out")"
else fail "no loader: rc $rc: $(tail -2 <<<"$out")"; fi
text=$(VLMC_VULKAN_LOADER=/nonexistent/libvulkan.so.1 "$RUN" "$both" --backend ref \
       --image "$IMAGE" -p "$PROMPT" 2>/dev/null) || true
if shapes_named "$text"; then ok "without a loader the ref backend still runs"; else fail "ref without a loader: '$text'"; fi

summary
