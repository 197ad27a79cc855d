#!/usr/bin/env bash
# Builds vlmc and runs every test: the README's second command, and what CI runs.
#   1. the normal build (warnings as errors) and its ctest suite;
#   2. the same suite built with clang-19 under ASan+UBSan, except the model-sized vulkan runs
#      (e2e.vulkan, parity.vulkan_*, e2e.precision_overflow.vulkan, e2e.shapes_heldout.vulkan_*:
#      minutes each on lavapipe; stage 2 runs the vulkan backend through
#      unit.test_vulkan_backend, e2e.kernel_check and every kernel.vulkan.* case), with
#      LeakSanitizer off where lavapipe runs (its JIT code leaks a few blocks no suppression can
#      name; tests/e2e.cmake);
#   3. the runtime-only build (no LLVM/MLIR) and the tests that apply to it;
#   4. every libFuzzer target (built by stage 2) for a bounded time (VLMC_FUZZ_SECONDS each,
#      default 20), JOBS at a time.
# Ends with one line "tests: N passed, N failed, N skipped" (skipped: a test for hardware this
# machine lacks, e.g. the AVX-512 kernel cases, each with its reason in the log).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${VLMC_FUZZ_SECONDS:-20}

scripts/install-deps.sh

passed=0
failed=0
skipped=0
LOGDIR=$(mktemp -d)

# Runs ctest in build dir $1 and adds its counts to the totals.
run_ctest() {
  local dir=$1 log="$LOGDIR/$(basename "$1").log"
  local rc=0
  (cd "$dir" && ctest -j"$JOBS" --output-on-failure --timeout 1500) 2>&1 | tee "$log" || rc=$?
  local line
  line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$log" | tail -1 || true)
  if [ -z "$line" ]; then
    echo "test.sh: ctest in $dir printed no summary" >&2
    failed=$((failed + 1))
    return
  fi
  local total fails skips
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
  fails=$(sed -E 's/.* ([0-9]+) tests failed.*/\1/' <<<"$line")
  # ctest counts a test that exits with its SKIP_RETURN_CODE as not failed: list it apart
  skips=$(grep -cE '^[[:space:]]*[0-9]+ - .*\(Skipped\)$' "$log" || true)
  passed=$((passed + total - fails - skips))
  skipped=$((skipped + skips))
  failed=$((failed + fails))
  [ "$rc" -eq 0 ] || [ "$fails" -gt 0 ] || failed=$((failed + 1))
}

configure_and_build() {
  local dir=$1; shift
  cmake -S "$ROOT" -B "$dir" -G Ninja -DVLMC_WERROR=ON "$@" >"$LOGDIR/$(basename "$dir").cmake.log" \
    || { cat "$LOGDIR/$(basename "$dir").cmake.log"; exit 1; }
  cmake --build "$dir" -j"$JOBS"
}

echo "== 1/4 build and test"
configure_and_build build
run_ctest build

echo "== 2/4 ASan+UBSan (the model-sized vulkan runs are stage 1's: see the header)"
# The same build makes the libFuzzer targets of stage 4 (one sanitizer build, not two).
configure_and_build build-asan -DCMAKE_C_COMPILER=clang-19 -DVLMC_SANITIZE=ON -DVLMC_FUZZ=ON
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 run_ctest build-asan

echo "== 3/4 runtime-only build (no LLVM/MLIR)"
configure_and_build build-runtime -DVLMC_COMPILER=OFF
run_ctest build-runtime

echo "== 4/4 fuzzing, ${FUZZ_SECONDS}s per target, $JOBS at a time"
# Runs one fuzzer; its log and any reproducer go to $LOGDIR, the last line says how it went.
fuzz_one() {
  local fuzzer=$1 name short work rc=0
  name=$(basename "$fuzzer"); short=${name#fuzz_}
  work=$(mktemp -d)  # new inputs go here, never into the committed corpus
  "$fuzzer" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=4096 \
    -artifact_prefix="$LOGDIR/$name-" "$work" "tests/fuzz/corpus/$short" \
    >"$LOGDIR/$name.log" 2>&1 || rc=$?
  rm -rf "$work"
  echo "$rc" >"$LOGDIR/$name.rc"
}
fuzzers=()
for fuzzer in build-asan/tests/fuzz_*; do [ -x "$fuzzer" ] && fuzzers+=("$fuzzer"); done
for fuzzer in "${fuzzers[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  fuzz_one "$fuzzer" &
done
wait
for fuzzer in "${fuzzers[@]}"; do
  name=$(basename "$fuzzer")
  echo "-- $name"
  if [ "$(cat "$LOGDIR/$name.rc" 2>/dev/null)" = 0 ]; then
    passed=$((passed + 1)); tail -1 "$LOGDIR/$name.log"
  else
    failed=$((failed + 1)); tail -40 "$LOGDIR/$name.log"
    echo "fuzz: $name found a crash; reproducer under $LOGDIR" >&2
  fi
done

echo "tests: $passed passed, $failed failed, $skipped skipped (each printed its reason)"
[ "$failed" -eq 0 ]
