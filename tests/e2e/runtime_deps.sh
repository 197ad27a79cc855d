#!/usr/bin/env bash
# vlmc-run is the runtime only (issue 5, acceptance 3): no LLVM or MLIR among its direct
# dynamic dependencies (readelf -d), its transitive ones (ldd), its symbols or its strings
# (nothing linked in statically); the same check must find LLVM in an LLVM tool (a control, so
# that a check that finds nothing anywhere cannot pass). And vlmc-run runs the tiny model: the
# committed program-only artifact (tests/e2e/make_runtime_fixture.sh) with the tiny
# checkpoint's weights prints transformers' greedy tokens for a text-only and an image case.
# Registered by tests/runtime_deps.cmake in every build, the runtime-only one
# (-DVLMC_COMPILER=OFF) included.
# vlmc-serve (the HTTP server, when built: it needs libmicrohttpd) gets the same LLVM/MLIR and
# libvulkan checks.
#   usage: runtime_deps.sh VLMC_RUN RUNTIME_LIB [VLMC_SERVE]
set -euo pipefail
RUN=$1
RUNTIME_LIB=${2:-}
SERVE=${3:-}
ARTIFACT=tests/e2e/data/tiny-vocab512-external.vlmc
CKPT=tests/fixtures/parity/tiny-vocab512
CONTROL=/usr/lib/llvm-19/bin/opt
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

source "$(dirname "$0")/lib.sh"
forbidden='llvm|mlir|clang|libLTO|libPolly'

# Prints one line per sign of LLVM or MLIR in binary $1.
llvm_signs() {
  local bin=$1
  readelf -d "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/NEEDED \1/p' |
    grep -iE "$forbidden" || true
  ldd "$bin" | grep -iE "$forbidden" | sed 's/^/LOADED /' || true
  nm "$bin" 2>/dev/null | grep -E ' [TtDdBbRrWV] (_?mlir[A-Z]|LLVM[A-Z]|_ZN4llvm|_ZN4mlir)' |
    head -3 | sed 's/^/SYMBOL /' || true
  grep -qaE 'LLVM ERROR|mlir::' "$bin" && echo "STRING LLVM ERROR / mlir::" || true
}

echo "NEEDED: $(readelf -d "$RUN" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"
if [ "$(nm "$RUN" 2>/dev/null | wc -l)" -lt 100 ]; then
  fail "$RUN has (almost) no symbols: stripped, the static check cannot see"
fi
signs=$(llvm_signs "$RUN")
if [ -z "$signs" ]; then ok "vlmc-run: no LLVM/MLIR in dependencies, symbols or strings"
else fail "vlmc-run links LLVM/MLIR: $signs"; fi
# The cpu kernels are loaded by vlmc's own ELF loader (runtime/backends/cpu/elf_loader.c):
# the one caller of the dynamic linker is the vulkan backend's loader (vk_loader.c), which
# opens libvulkan.so.1 at run time. RUNTIME_LIB (libvlmc_runtime.a) says which object calls it.
if nm -D --undefined-only "$RUN" 2>/dev/null | grep -qwE 'dlopen|dlmopen'; then
  users=$(nm -A "$RUNTIME_LIB" 2>/dev/null | grep -E ' U (dlopen|dlmopen)$' |
          awk -F: '{print $2}' | sort -u | tr '\n' ' ')
  if [ "$users" = "vk_loader.c.o " ]; then ok "only the vulkan loader (vk_loader.c) imports dlopen"
  else fail "vlmc-run imports dlopen outside runtime/backends/vulkan/vk_loader.c: ${users:-?}" \
    "(the cpu kernels must go through runtime/backends/cpu/elf_loader.c)"; fi
else ok "vlmc-run imports no dlopen"; fi
# Vulkan is opened at run time, never linked: vlmc-run starts on a machine without it.
if readelf -d "$RUN" | grep -qiE 'Shared library: \[libvulkan' || ldd "$RUN" | grep -qi libvulkan; then
  fail "vlmc-run links libvulkan: the vulkan backend must dlopen it (vk_loader.c)"
else ok "vlmc-run does not link libvulkan (readelf NEEDED, ldd)"; fi
if [ -n "$SERVE" ]; then
  echo "NEEDED (vlmc-serve): $(readelf -d "$SERVE" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"
  signs=$(llvm_signs "$SERVE")
  if [ -z "$signs" ]; then ok "vlmc-serve: no LLVM/MLIR in dependencies, symbols or strings"
  else fail "vlmc-serve links LLVM/MLIR: $signs"; fi
  if readelf -d "$SERVE" | grep -qiE 'Shared library: \[libvulkan'; then
    fail "vlmc-serve links libvulkan"
  else ok "vlmc-serve does not link libvulkan"; fi
fi
if [ -x "$CONTROL" ]; then
  if [ -n "$(llvm_signs "$CONTROL")" ]; then ok "control: the check finds LLVM in $CONTROL"
  else fail "control: the check finds nothing in $CONTROL"; fi
fi

for case in text_only img336; do
  fixture_field $case input_ids >"$WORK/ids.json"
  images=()
  for image in $(fixture_field $case images); do images+=(--image "$image"); done
  want=$(fixture_field $case greedy_tokens)
  if ! got=$("$RUN" "$ARTIFACT" --params "$CKPT" --input-ids "$WORK/ids.json" "${images[@]}" \
               -n 16); then
    fail "$case: vlmc-run failed on $ARTIFACT (if the format changed, regenerate it with" \
      "tests/e2e/make_runtime_fixture.sh)"
  elif same_tokens "$got" "$want"; then
    ok "$case: the tiny artifact prints transformers' greedy tokens"
  else
    fail "$case: got '$got', transformers '$want'"
  fi
done

summary
