#!/usr/bin/env bash
# The README's first command: installs what is missing, builds vlmc, compiles the embedded model
# (assets/shapes-vl, a small Qwen2.5-VL trained on shape scenes) into one artifact and asks it to
# describe the bug report's three-shape image. The description goes to stdout; progress lines and
# the closing hint go to stderr, and the build's own output to out/build.log.
#   usage: scripts/demo.sh
# Environment: BUILD_DIR (default build), JOBS (default: the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
OUT=out
ARTIFACT=$OUT/shapes-vl.vlmc
DUMPS=$OUT/shapes-vl-dumps
LOG=$OUT/build.log
IMAGE=tests/fixtures/test_image_shapes.png
PROMPT="What shapes and colors are in this image? Answer briefly."

step() { echo "demo: [$1/4] $2" >&2; }

# Runs "$@" with its output in $LOG; on failure, shows the end of the log and stops.
quietly() {
  if ! "$@" >>"$LOG" 2>&1; then
    echo "demo: '$*' failed; the last lines of $LOG:" >&2
    tail -n 40 "$LOG" >&2
    exit 1
  fi
}

# Turns ninja's "[n/N] ..." lines into one line on stderr at 25, 50, 75 and 100 % (the "[0/N]"
# lines are CMake re-checking its globs, not the build).
progress() {
  awk 'BEGIN { next_pct = 25 }
       match($0, /^\[[0-9]+\/[0-9]+\]/) {
         split(substr($0, 2, RLENGTH - 2), nn, "/")
         if (nn[1] == 0) next
         pct = int(100 * nn[1] / nn[2])
         if (pct >= next_pct) {
           printf "demo:   built %d/%d (%d %%)\n", nn[1], nn[2], pct; fflush()
           next_pct = (int(pct / 25) + 1) * 25
         }
       }' >&2
}

mkdir -p "$OUT"
: >"$LOG"

step 1 "packages (scripts/install-deps.sh)"
scripts/install-deps.sh >&2

step 2 "building in $BUILD_DIR/ with cmake and ninja (log: $LOG)"
quietly cmake -S . -B "$BUILD_DIR" -G Ninja
if ! cmake --build "$BUILD_DIR" -j"$JOBS" --target vlmc vlmc-run 2>&1 | tee -a "$LOG" \
    | progress; then
  echo "demo: the build failed; the last lines of $LOG:" >&2
  tail -n 40 "$LOG" >&2
  exit 1
fi

step 3 "compiling assets/shapes-vl into $ARTIFACT (one IR dump per pass in $DUMPS/)"
rm -rf "$DUMPS"
quietly "$BUILD_DIR/tools/vlmc" compile assets/shapes-vl -o "$ARTIFACT" --dump-dir "$DUMPS"

step 4 "vlmc-run on $IMAGE: \"$PROMPT\""
"$BUILD_DIR/tools/vlmc-run" "$ARTIFACT" --image "$IMAGE" -p "$PROMPT"

cat >&2 <<EOF
demo: the artifact is $ARTIFACT ($(du -h "$ARTIFACT" | cut -f1)); try another image or question:
  $BUILD_DIR/tools/vlmc-run $ARTIFACT --image tests/fixtures/shapes_scenes/scene_336x336_02.png \\
      -p "What is the rightmost shape? Answer briefly." --stats
  (the model knows only coloured squares, circles, triangles and stars on light backgrounds;
   $BUILD_DIR/tools/vlmc inspect $ARTIFACT shows what the artifact holds)
EOF
