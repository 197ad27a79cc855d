#!/usr/bin/env bash
# Regenerates tests/e2e/data/tiny-vocab512-external.vlmc, the program-only artifact of the tiny
# checkpoint (41 KB: its weights stay in tests/fixtures/parity/tiny-vocab512). The runtime-only
# build (-DVLMC_COMPILER=OFF) has no compiler to make one, so tests/e2e/runtime_deps.sh runs
# this committed copy there. Run this when the runtime stops reading it (an IR or manifest
# format change), from the repository root:
#   tests/e2e/make_runtime_fixture.sh build/tools/vlmc
set -euo pipefail
VLMC=${1:-build/tools/vlmc}
"$VLMC" compile tests/fixtures/parity/tiny-vocab512 --params external \
  -o tests/e2e/data/tiny-vocab512-external.vlmc
