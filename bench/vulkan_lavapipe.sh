#!/usr/bin/env bash
# The vulkan backend on lavapipe (Mesa's CPU Vulkan driver, what CI runs), one build of vlmc
# against another in one run on one machine: the demo model (assets/shapes-vl, f32) answering
# one image, compiled by the working tree's build and by a baseline revision's, each artifact
# run by the working tree's vlmc-run. Prints, per build, the median over the rounds of the
# device time (VLMC_VULKAN_PROFILE's sum over dispatches), image encode, prefill and decode, and
# after/before of the medians (>1 for times: the baseline is slower; for tokens/s the working
# tree is faster); then each build's five costliest kernels of its last round. A warm-up run of
# each artifact first, so that llvmpipe's JIT is in Mesa's shader cache for every round, and a
# cold run of each at the end (MESA_SHADER_CACHE_DISABLE=true: the JIT included, wall seconds).
# Not a timed test: run it by hand, on an otherwise idle machine.
#
#   bench/vulkan_lavapipe.sh [--baseline REV | --baseline-build DIR] [--rounds N] [--image PNG]
#
#   --baseline REV        the revision to compare with (default 9a05a04, the last commit before
#                         the lanes variants read quads), built (vlmc only) in a git worktree
#   --baseline-build DIR  a build folder of the baseline whose tools/vlmc to use instead
#   --rounds N            rounds (default 3), each running the baseline, then the working tree
#   --image PNG           the image (default tests/fixtures/images/scene_448x672.png)
#
# Needs build/ (the working tree's vlmc and vlmc-run, built) and lavapipe (Debian's
# mesa-vulkan-drivers, which scripts/install-deps.sh installs).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BASELINE=9a05a04
BASE_BUILD=
ROUNDS=3
IMAGE=tests/fixtures/images/scene_448x672.png
help() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
while [ $# -gt 0 ]; do
  case $1 in
    --baseline) BASELINE=$2; shift 2 ;;
    --baseline-build) BASE_BUILD=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --image) IMAGE=$2; shift 2 ;;
    -h|--help) help; exit 0 ;;
    *) echo "vulkan_lavapipe.sh: unknown option '$1' (--help lists them)" >&2; exit 2 ;;
  esac
done
[ -x build/tools/vlmc ] && [ -x build/tools/vlmc-run ] ||
  { echo "vulkan_lavapipe.sh: build the working tree first (cmake --build build)" >&2; exit 1; }
WORK=$(mktemp -d)
cleanup() {
  if [ -d "$WORK/src" ]; then git -C "$ROOT" worktree remove --force "$WORK/src" >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

if [ -z "$BASE_BUILD" ]; then
  echo "building the baseline $BASELINE (vlmc only) in a worktree ..." >&2
  git worktree add --detach "$WORK/src" "$BASELINE" >/dev/null 2>&1
  cmake -S "$WORK/src" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$WORK/cmake.log" 2>&1 ||
    { cat "$WORK/cmake.log" >&2; exit 1; }
  cmake --build "$WORK/build" --target vlmc >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; exit 1; }
  BASE_BUILD=$WORK/build
fi
[ -x "$BASE_BUILD/tools/vlmc" ] ||
  { echo "vulkan_lavapipe.sh: no vlmc in $BASE_BUILD/tools (--baseline-build wants a build folder)" >&2; exit 1; }
build/tools/vlmc compile assets/shapes-vl --target vulkan -o "$WORK/after.vlmc" >"$WORK/compile-after.log" 2>&1 ||
  { cat "$WORK/compile-after.log" >&2; exit 1; }
"$BASE_BUILD/tools/vlmc" compile assets/shapes-vl --target vulkan -o "$WORK/before.vlmc" >"$WORK/compile-before.log" 2>&1 ||
  { cat "$WORK/compile-before.log" >&2; exit 1; }

# run NAME OUT [env...]: the artifact NAME answering the image, its --stats and profile in OUT.
run() {
  local name=$1 out=$2
  shift 2
  env "$@" VLMC_VULKAN_PROFILE=1 build/tools/vlmc-run "$WORK/$name.vlmc" --backend vulkan --quiet \
    --image "$IMAGE" -p "Describe the image." -n 8 --stats >"$out" 2>&1
}
for name in before after; do run "$name" "$WORK/warm-$name.txt"; done
for r in $(seq "$ROUNDS"); do
  for name in before after; do run "$name" "$WORK/$name-$r.txt"; done
done
for name in before after; do
  start=$(date +%s.%N)
  run "$name" "$WORK/cold-$name.txt" MESA_SHADER_CACHE_DISABLE=true
  echo "$start $(date +%s.%N)" >"$WORK/cold-$name.seconds"
done

/usr/bin/python3 - "$WORK" "$ROUNDS" "$BASELINE" "$IMAGE" <<'EOF'
import re, statistics, sys
work, rounds, baseline, image = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
PATTERNS = {
    "device time (ms)": r"vulkan profile: ([0-9.]+) ms of device time",
    "image encode (ms)": r"image encode ([0-9.]+) ms",
    "prefill (ms)": r"prefill \d+ tokens in ([0-9.]+) ms",
    "decode (tokens/s)": r"decode \d+ tokens in [0-9.]+ ms \(([0-9.]+) tokens/s\)",
}
def figures(name):
    out = {k: [] for k in PATTERNS}
    for r in range(1, rounds + 1):
        text = open(f"{work}/{name}-{r}.txt").read()
        for key, pat in PATTERNS.items():
            m = re.search(pat, text)
            if not m:
                sys.exit(f"vulkan_lavapipe.sh: no '{key}' in {name} round {r}:\n{text[-2000:]}")
            out[key].append(float(m.group(1)))
    return out
before, after = figures("before"), figures("after")
print(f"lavapipe, {image}, {rounds} rounds; before = {baseline}, after = the working tree")
print(f"{'figure':20} {'before (median, min..max)':>30} {'after (median, min..max)':>30} {'after/before':>13}")
for key in PATTERNS:
    b, a = before[key], after[key]
    mb, ma = statistics.median(b), statistics.median(a)
    ratio = ma / mb if "tokens/s" in key else mb / ma
    label = "x faster" if ratio >= 1 else "x (slower)"
    print(f"{key:20} {mb:12.1f} ({min(b):.1f}..{max(b):.1f}){'':4} {ma:12.1f} ({min(a):.1f}..{max(a):.1f}){'':4} {ratio:8.2f} {label}")
def seconds(name):
    start, end = map(float, open(f"{work}/cold-{name}.seconds").read().split())
    return end - start
cold_b, cold_a = seconds("before"), seconds("after")
print(f"{'cold run (s, JIT)':20} {cold_b:12.1f}{'':18} {cold_a:12.1f}{'':18} {cold_b / cold_a:8.2f} x faster")
for name in ("before", "after"):
    lines = [l for l in open(f"{work}/{name}-{rounds}.txt") if re.match(r"\s+vk\d+\s", l)]
    print(f"{name}: costliest kernels of the last round")
    for l in lines[:5]:
        print("  " + l.strip())
EOF
