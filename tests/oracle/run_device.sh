#!/bin/bash
# Runs every transformers-side fixture step on a machine with transformers 5.17 + torch 2.11 and
# packs the results for copying back: $OUT/parity.tar (tests/fixtures/parity),
# $OUT/fixtures.tar (tokenizer + preprocess fixtures, wrong-inverse results), $OUT/log.txt,
# $OUT/summary.json. Usage (repository root): OUT=/some/dir bash tests/oracle/run_device.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/oracle-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export PYTHONDONTWRITEBYTECODE=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python3 tests/oracle/selftest.py > "$OUT/selftest.txt" 2>&1 || { cat "$OUT/selftest.txt"; exit 1; }
# The inner time limit leaves room to pack whatever was written before it (default 330 s).
status=0
timeout "${ORACLE_TIME_LIMIT:-330}" python3 tests/oracle/make_all.py "$OUT/summary.json" 2>&1 \
    | tee "$OUT/log.txt" || status=$?
tar -cf "$OUT/parity.tar" tests/fixtures/parity
tar -cf "$OUT/fixtures.tar" tests/fixtures/tokenizer tests/fixtures/preprocess \
    tests/oracle/wrong_inverse_results.json
ls -l "$OUT"
exit $status
