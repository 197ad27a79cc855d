#!/usr/bin/env bash
# Usage: roundtrip_all.sh TESTS_DIR
# For every .vir file under TESTS_DIR, split at '// -----' lines, checks that whatever parses
# prints back to a fixed point: print(parse(x)) == print(parse(print(parse(x)))), verified or
# not. Files are also required to parse and verify, except those that exist to be rejected:
# invalid*.vir, bad-*.vir, and fuzz corpus seeds (tests/fuzz/corpus/), which may be garbage.
# Kernel tests (tests/kernels/) are templates over a size `$N`: checked with N = 37.
set -uo pipefail
root=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
checked=0
while IFS= read -r -d '' file; do
  case $file in
    */kernels/*)
      sed 's/\$N/37/g' "$file" > "$work/kernel.vir"
      file=$work/kernel.vir
      ;;
  esac
  strict=1
  case $file in
    */fuzz/corpus/*) strict=0 ;;
  esac
  case $(basename "$file") in
    invalid*.vir | bad-*.vir) strict=0 ;;
  esac
  if [ "$strict" = 1 ] && ! vlmc opt --split-input-file "$file" > /dev/null; then
    echo "roundtrip_all: $file does not parse and verify" >&2
    exit 1
  fi
  vlmc opt --split-input-file --no-verify "$file" > "$work/once.vir" 2> /dev/null
  if ! vlmc opt --split-input-file --no-verify "$work/once.vir" > "$work/twice.vir"; then
    echo "roundtrip_all: $file: the printed form does not parse" >&2
    exit 1
  fi
  if ! cmp -s "$work/once.vir" "$work/twice.vir"; then
    echo "roundtrip_all: $file: printing is not stable:" >&2
    diff -u "$work/once.vir" "$work/twice.vir" >&2
    exit 1
  fi
  checked=$((checked + 1))
done < <(find "$root" -name '*.vir' -print0 | sort -z)
[ "$checked" -gt 0 ] || { echo "roundtrip_all: no .vir files under $root" >&2; exit 1; }
echo "roundtrip_all: $checked files round-trip"
