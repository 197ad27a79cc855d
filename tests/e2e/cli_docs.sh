#!/usr/bin/env bash
# The tools' manual pages and bash completion (issue 20, docs/cli.md), both made from the tools'
# own --help: every page is written by the build and renders without a groff warning; every
# option of a tool's --help is in its page, and in the completion's candidates; every option
# vlmc-run's and vlmc-serve's --help lists is one their parser takes; every flag of a vlmc
# subcommand's usage line is in its option list; and the completion completes subcommands,
# options, backend and target names and paths.
#   usage: cli_docs.sh BUILD_DIR   (its tools/ and man/)
set -uo pipefail
BUILD=$1
source "$(dirname "$0")/lib.sh"
COMPLETION=tools/completion.bash
source "$COMPLETION"
PATH=$(cd "$BUILD/tools" && pwd):$PATH

tools=(vlmc-run)
[ -x "$BUILD/tools/vlmc-serve" ] && tools+=(vlmc-serve)
[ -x "$BUILD/tools/vlmc" ] && tools+=(vlmc)

# the options of one --help (the completion's own reading of it)
help_options() { _vlmc_help_options "$@" | tr '\n' ' '; }

for tool in "${tools[@]}"; do
  page=$BUILD/man/$tool.1
  if [ ! -s "$page" ]; then fail "$page was not written by the build"; continue; fi
  warnings=$(groff -k -man -Tutf8 -ww -z "$page" 2>&1)
  same "$tool.1 renders without a groff warning" "$warnings" ""
  subs=("")
  [ "$tool" = vlmc ] && mapfile -t -O 1 subs < <(vlmc --help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}')
  for sub in "${subs[@]}"; do
    what="$tool${sub:+ $sub}"
    opts=$(help_options "$tool" ${sub:+"$sub"})
    [ -n "$opts" ] || { fail "$what --help lists no option"; continue; }
    missing=
    for o in $opts; do grep -qF -- "$(sed 's/-/\\-/g' <<<"$o")" "$page" || missing+=" $o"; done
    same "$what: every option of --help is in $tool.1 ($(wc -w <<<"$opts") options)" "$missing" ""
    if [ -n "$sub" ]; then # the flags of the usage line are in the option list
      usage_flags=$(vlmc "$sub" --help | sed -n '1,/^[^u ]/p' | grep -E '^(usage| )' | head -3 |
                    grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
      unlisted=
      for f in $usage_flags; do grep -qxF -- "$f" <<<"$(tr ' ' '\n' <<<"$opts")" || unlisted+=" $f"; done
      same "$what: every flag of its usage line is in its option list" "$unlisted" ""
    else # each listed option is one the parser takes (tools/cli.c names an unknown one)
      unknown=
      for o in $opts; do
        "$tool" "$o" </dev/null 2>&1 | grep -q "unknown option" && unknown+=" $o"
      done
      same "$what: the parser takes every option its --help lists" "$unknown" ""
    fi
  done
done

# ---- completion ----
complete_words() { # WORDS...: the completion's candidates for the last word, space-separated
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMPREPLY=()
  local fn
  fn=$(complete -p "$1" | awk '{print $(NF-1)}')
  "$fn"
  echo "${COMPREPLY[*]}"
}
has() { # WHAT WANT GOT: every word of WANT is among GOT's
  local w
  for w in $2; do
    if ! grep -qxF -- "$w" <<<"$(tr ' ' '\n' <<<"$3")"; then fail "$1: '$w' not in '$3'"; return; fi
  done
  ok "$1: $3"
}
for tool in "${tools[@]}"; do
  [ "$tool" = vlmc ] && continue # its options are per subcommand (below)
  long=$(help_options "$tool" | tr ' ' '\n' | grep -- '^--' | tr '\n' ' ')
  has "$tool --<TAB>: every long option of --help" "$long" "$(complete_words "$tool" --)"
done
has "vlmc-run --st<TAB>" "--stats --stop" "$(complete_words vlmc-run --st)"
backends=$(vlmc-run --version | sed -n 's/^backends: //p' | tr -d ,)
has "vlmc-run --backend <TAB>: the backends of --version" "$backends help" "$(complete_words vlmc-run --backend "")"
has "vlmc-run --image <TAB>: paths" "tests/fixtures/test_image_shapes.png" \
  "$(complete_words vlmc-run --image tests/fixtures/test_image_sh)"
has "vlmc-run -f <TAB>: paths (the short spelling's value)" "tests/fixtures/test_image_shapes.png" \
  "$(complete_words vlmc-run -f tests/fixtures/test_image_sh)"
same "vlmc-run -n <TAB>: a number, nothing offered" "$(complete_words vlmc-run -n "")" ""
has "vlmc-run <TAB>: artifacts and folders" "assets/shapes-vl" "$(complete_words vlmc-run assets/sh)"
if [ -x "$BUILD/tools/vlmc" ]; then
  has "vlmc <TAB>: the subcommands" "compile inspect diff-taps kernel-test" "$(complete_words vlmc "")"
  has "vlmc co<TAB>" "compile" "$(complete_words vlmc co)"
  has "vlmc inspect --<TAB>" "--json --verify" "$(complete_words vlmc inspect --)"
  has "vlmc compile --tar<TAB>" "--target --target-option" "$(complete_words vlmc compile --tar)"
  targets=$(vlmc --version | sed -n 's/^targets: //p' | tr -d ,)
  has "vlmc compile --target <TAB>: the targets of --version" "$targets" \
    "$(complete_words vlmc compile assets/shapes-vl --target "")"
  has "vlmc compile CKPT --calibrate <TAB>: paths" "tests/fixtures/test_image_shapes.png" \
    "$(complete_words vlmc compile assets/shapes-vl --calibrate tests/fixtures/test_image_sh)"
  same "vlmc compile --image-size <TAB>: a size (WxH), no path offered" \
    "$(complete_words vlmc compile --image-size "")" ""
fi
summary
