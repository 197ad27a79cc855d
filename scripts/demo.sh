#!/usr/bin/env bash
# The README's first command: builds vlmc and runs the main job on the embedded example.
# Until a model compiles end to end, the main job is the longest path that exists: an example
# vision block written in vlmc's IR, run through the default pipeline with a dump per pass.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j"$(nproc)"
DUMPS=out/demo-dumps
rm -rf "$DUMPS"
build/tools/vlmc opt tests/lit/example.vir --passes=canonicalize,dce,cse \
  --print-ir-after-all --dump-dir="$DUMPS"
echo "demo: one dump per pass in $DUMPS:" >&2
ls "$DUMPS" >&2
