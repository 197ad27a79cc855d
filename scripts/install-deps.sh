#!/usr/bin/env bash
# Installs the Debian 12 packages vlmc needs, if any are missing. Idempotent: when every
# package is present it changes nothing and needs no network. The one list of packages:
set -euo pipefail

PACKAGES=(
  # build
  build-essential cmake ninja-build pkg-config python3 git
  # fixture self-checks (tests/oracle/check_fixtures.py, selftest.py) and image generators
  python3-numpy python3-pil python3-jinja2
  # compiler: LLVM/MLIR 19 C APIs, clang-19 for the sanitizer and libFuzzer builds, FileCheck
  llvm-19-dev llvm-19-tools clang-19 libclang-rt-19-dev libmlir-19-dev mlir-19-tools
  # frontends and runtime: JSON, PNG, JPEG, the tokenizer's regex and Unicode normalisation
  libcjson-dev libspng-dev libturbojpeg0-dev libpcre2-dev libutf8proc-dev zlib1g-dev
  # vlmc-serve: the HTTP server's library, and curl (its e2e test runs it as a client)
  libmicrohttpd-dev curl
  # Vulkan: loader headers, lavapipe (Vulkan on the CPU, used by CI), SPIR-V tools
  libvulkan-dev mesa-vulkan-drivers spirv-tools
  # Metal: SPIR-V -> MSL for the metal target (its kernels run on Linux in emulation)
  libspirv-cross-c-shared-dev
  # the manual pages' check (tests/e2e/cli_docs.sh renders them with groff)
  groff-base
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "install-deps: missing packages (${missing[*]}) and not root; install them or run as root" >&2
    exit 1
  fi
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
