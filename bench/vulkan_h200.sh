#!/usr/bin/env bash
# vlmc's vulkan backend against transformers on the GPU machine (an H200), for a 3B-shaped
# Qwen2.5-VL with random bf16 weights, all measured there in ONE run: the copy bandwidth and the
# bf16 matmul rate (the roofs), transformers eager and sdpa, and vlmc vulkan f16 and f32:
# decode tok/s (32 tokens after a 64-token prompt and after 1,024), prefill 512 tok/s, image
# encode ms at 448x448 and 1920x1080, peak device memory, the greedy tokens of one image prompt
# (vlmc f32 and f16 against transformers f32), vlmc/transformers and vlmc/roofline, and the
# per-kernel GPU time of vlmc's decode, prefill and 1080p encode (VLMC_VULKAN_PROFILE=1). It
# also prepares the kernel conformance suite for the GPU (bench/vulkan_h200_kernels.sh, a
# device call of its own: vlmc-kernel-check runs every tests/kernels case there with the main
# kernels and each variant class, the cooperative-matrix ones included).
#
# The GPU machine has no LLVM/MLIR and no Vulkan loader, and at most 64 MiB travel to it, so
# the work is split:
#   here:  bench/vulkan_h200.sh [--checkpoint DIR] [--build DIR]
#          builds vlmc and vlmc-run (Release), compiles the 3B checkpoint (made here with
#          `vlmc random-checkpoint --seed 1` unless given) for --target vulkan at f16 and f32
#          with --params external (program and kernels only: 3-6 MB each, xz'd to ~0.5 MB;
#          bench/h200_lib.sh unpacks them there), and fills .h200/
#          (git-ignored through .git/info/exclude) with them, vlmc-run with the shared
#          libraries it links and the Vulkan loader, every tests/kernels case compiled for
#          vulkan and saved for vlmc-kernel-check (kernel-test --save, as kcases.tar.xz), the
#          checkpoint's skeleton
#          (bench/random_checkpoint.py: the GPU machine rewrites the same 7.5 GB, byte for
#          byte, so that the artifacts' parameter checksums hold) and a 1920x1080 image;
#   there: bench/vulkan_h200_device.sh [--reps N]   (through the device tool, carrying .h200 and .gl)
#          writes vulkan_h200.json, vulkan_h200.txt, log.txt and the profiles to $OUT.
# Copy the JSON to bench/results/vulkan_h200-DATE.json and the table to bench/README.md.
# The device command this script prints at its end is the one to run.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-bench
CKPT=
PY=/usr/bin/python3
H=.h200
while [ $# -gt 0 ]; do
  case $1 in
    --checkpoint) CKPT=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--checkpoint DIR] [--build DIR]" >&2; exit 2 ;;
  esac
done
step() { echo "== $*" >&2; }

step "build ($BUILD, Release: vlmc vlmc-run vlmc-kernel-check)"
[ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target vlmc vlmc-run vlmc-kernel-check >/dev/null

rm -rf "$H"
mkdir -p "$H/lib"
grep -qx '/.h200/' .git/info/exclude 2>/dev/null || echo '/.h200/' >>.git/info/exclude
if [ -z "$CKPT" ]; then
  CKPT=$(mktemp -d)/ckpt-3b
  step "random 3B-shaped checkpoint, seed 1 (7.5 GB in $CKPT)"
  "$BUILD/tools/vlmc" random-checkpoint --config tests/fixtures/configs/qwen2_5_vl_3b_config.json \
    -o "$CKPT" --seed 1 | tail -1 >&2
fi
for P in f16 f32; do
  step "compile --target vulkan --precision $P --params external"
  "$BUILD/tools/vlmc" compile "$CKPT" -o "$H/3b-vk-$P.vlmc" --target vulkan --precision "$P" \
    --params external 2>&1 | grep -E 'dispatches|wrote' >&2
  # xz: 6.3 MB of f16 artifact (mostly SPIR-V) travel as 0.5 MB; bench/h200_lib.sh unpacks them
  xz -T0 -6 -f "$H/3b-vk-$P.vlmc"
done
# 4-bit weights (issue 16): the same checkpoint in MLX's 4-bit format, as mlx-community
# publishes it (group 64, embed_tokens quantized too), made with numpy by
# tests/oracle/make_mlx_checkpoint.py, which the GPU machine runs again on its rewritten
# checkpoint (deterministic: the same bytes, so the artifact's --params external checksums hold).
step "the 3B in MLX 4-bit format (tests/oracle/make_mlx_checkpoint.py, a few minutes)"
Q4=${CKPT}-mlx-q4
[ -f "$Q4/config.json" ] || $PY tests/oracle/make_mlx_checkpoint.py "$CKPT" "$Q4" --quantize-embed >&2
step "compile the 4-bit one --target vulkan --precision f16 --params external"
"$BUILD/tools/vlmc" compile "$Q4" -o "$H/3b-vk-f16-q4.vlmc" --target vulkan --precision f16 \
  --params external 2>&1 | grep -E 'dispatches|quantization|wrote' >&2
xz -T0 -6 -f "$H/3b-vk-f16-q4.vlmc"
# The dispatch floor (bench/vulkan_h200_device.sh): the demo model, whose kernels do almost no
# work (width 64, 4 layers), so that its decode step's GPU time per dispatch is what a dispatch
# and its barrier cost on the GPU; its weights come from assets/shapes-vl, which travels.
step "compile the demo model --target vulkan --precision f16 --params external"
"$BUILD/tools/vlmc" compile assets/shapes-vl -o "$H/demo-vk-f16.vlmc" --target vulkan \
  --precision f16 --params external 2>&1 | grep -E 'dispatches|wrote' >&2
xz -T0 -6 -f "$H/demo-vk-f16.vlmc"
step "skeleton of the checkpoint (bench/random_checkpoint.py)"
$PY bench/random_checkpoint.py skeleton "$CKPT" "$H/skel-3b.json" >&2

step "the kernel conformance suite for vulkan, saved for vlmc-kernel-check (no run here)"
# (16 MB of folders, 0.4 MB as .tar.xz: what travels to the GPU machine is capped)
"$BUILD/tools/vlmc" kernel-test --target vulkan --save "$H/kcases" --no-run tests/kernels/*.vir | tail -1 >&2
tar -C "$H" -cJf "$H/kcases.tar.xz" kcases && rm -rf "$H/kcases"

step "vlmc-run and vlmc-kernel-check, their libraries and the Vulkan loader"
cp "$BUILD/tools/vlmc-run" "$BUILD/tools/vlmc-kernel-check" "$H/"
ldd "$BUILD/tools/vlmc-run" | awk '/=> \// { print $3 }' |
  grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$H/lib/"; done
cp -L "$(ldconfig -p | awk '/libvulkan\.so\.1 / { print $NF; exit }')" "$H/lib/libvulkan.so.1"

step "the Vulkan loader and GLVND as Debian packages (.gl/: NVIDIA's ICD needs both there)"
mkdir -p .gl /tmp/vlmc-apt-amd64/partial
grep -qx '/.gl/' .git/info/exclude || echo '/.gl/' >>.git/info/exclude
apt_o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/vlmc-apt-amd64)
ls .gl/libvulkan1_*.deb >/dev/null 2>&1 || {
  apt-get "${apt_o[@]}" update -q >/dev/null
  (cd .gl && apt-get "${apt_o[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 \
    libgles2 >/dev/null 2>&1)
}

step "a 1920x1080 image (generated shapes: the content does not matter to a random model)"
$PY - "$H/photo_1920x1080.png" <<'EOF'
import random, sys
from PIL import Image, ImageDraw
r = random.Random(1080)
im = Image.new("RGB", (1920, 1080), (200, 210, 220))
d = ImageDraw.Draw(im)
for _ in range(40):
    x, y, s = r.randrange(1920), r.randrange(1080), r.randrange(60, 400)
    d.ellipse([x, y, x + s, y + s], fill=(r.randrange(256), r.randrange(256), r.randrange(256)))
im.save(sys.argv[1])
EOF
du -sh "$H" >&2
cat >&2 <<EOF
Ready. On the GPU machine (device tool run, carry [".h200", ".gl"], nvidia-h200), from the repo root:
  bash bench/vulkan_h200_kernels.sh 2>&1 | tail -60     (the kernel conformance suite)
  bash bench/vulkan_h200_device.sh --reps 3 2>&1 | tail -60
then copy \$OUT/vulkan_h200.json to bench/results/ (it names the date inside).
EOF
