# bash completion for vlmc, vlmc-run and vlmc-serve (docs/cli.md).
#   source tools/completion.bash            (or install it: cmake --install puts it in
#                                            share/bash-completion/completions)
# The options are read from each tool's own --help (the option column: the text of a line
# that starts with "  -", up to two spaces), so they cannot drift from what the tool takes;
# vlmc's subcommands from `vlmc --help`, the backends and targets from --version. An option
# whose value is a FILE, DIR, IMG or CKPT_DIR completes paths; --backend and --target their
# names; after `-o` or a positional, paths.

# An awk function both readers of --help share: the option column of a line of --help (what
# precedes the first double space of a line indented 2 to 7 spaces that starts with "-"), or
# "" for any other line (a description, even one that starts with an option name, is indented
# deeper).
_VLMC_OPTION_COLUMN_AWK='
  function option_column(line,    col, i) {
    if (line !~ /^  +-/) return ""
    match(line, /^ +/)
    if (RLENGTH > 7) return ""
    col = line
    sub(/^ +/, "", col)
    i = index(col, "  ")
    if (i) col = substr(col, 1, i - 1)
    return col
  }'

# _vlmc_help_options TOOL [SUBCOMMAND]: the options TOOL's --help lists, one per line.
_vlmc_help_options() {
  "$@" --help 2>/dev/null | awk "$_VLMC_OPTION_COLUMN_AWK"'
    {
      col = option_column($0)
      while (match(col, /--?[A-Za-z][A-Za-z0-9-]*/)) {
        print substr(col, RSTART, RLENGTH)
        col = substr(col, RSTART + RLENGTH)
      }
    }' | sort -u
}

# _vlmc_value_kind TOOL... OPTION: the placeholder after OPTION in --help ("FILE", "DIR",
# "NAME", ...), or nothing for a switch.
_vlmc_value_kind() {
  local opt=${*: -1}
  "${@:1:$#-1}" --help 2>/dev/null | awk -v opt="$opt" "$_VLMC_OPTION_COLUMN_AWK"'
    {
      col = option_column($0)
      if (col == "") next
      n = split(col, w, /[ ,]+/)
      for (k = 1; k <= n; ++k) {
        if (w[k] != opt) continue
        for (j = k + 1; j <= n && w[j] ~ /^-/; ++j) {} # past its other spellings ("-p, --prompt")
        if (j <= n) print w[j]
        exit
      }
    }'
}

# _vlmc_version_list TOOL KEY: the comma-separated names of TOOL --version's "KEY: ..." line.
_vlmc_version_list() {
  "$1" --version 2>/dev/null | sed -n "s/^$2: //p" | sed 's/ ([^)]*)//g; s/,/ /g'
}

_vlmc_complete_value() { # TOOL... OPTION CUR: COMPREPLY for OPTION's value; 1 for a switch
  local cur=${*: -1}
  local opt=${*: -2:1}
  local tool=("${@:1:$#-2}")
  case $opt in
    --backend) mapfile -t COMPREPLY < <(compgen -W "$(_vlmc_version_list "${tool[0]}" backends) help" -- "$cur"); return 0 ;;
    --target) mapfile -t COMPREPLY < <(compgen -W "$(_vlmc_version_list "${tool[0]}" targets) help" -- "$cur"); return 0 ;;
    -o) mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return 0 ;;
  esac
  local kind
  kind=$(_vlmc_value_kind "${tool[@]}" "$opt")
  case $kind in
    "") return 1 ;;
    DIR|*_DIR) mapfile -t COMPREPLY < <(compgen -d -- "$cur") ;;
    FILE|IMG|PATH|*FILE) mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
    *) COMPREPLY=() ;; # a number or free text: nothing to offer
  esac
  return 0
}

_vlmc_run_like() { # the completion of vlmc-run and vlmc-serve
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  local tool=${COMP_WORDS[0]}
  if [ "$COMP_CWORD" -gt 1 ] && [[ $prev == -* ]] && _vlmc_complete_value "$tool" "$prev" "$cur"; then
    return 0
  fi
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_vlmc_help_options "$tool")" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -X '!*.vlmc' -- "$cur"; compgen -d -- "$cur")
  fi
}

_vlmc() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  local tool=${COMP_WORDS[0]} sub=
  local i
  for ((i = 1; i < COMP_CWORD; ++i)); do
    if [[ ${COMP_WORDS[i]} != -* ]]; then sub=${COMP_WORDS[i]}; break; fi
  done
  if [ -z "$sub" ]; then
    local subs
    subs=$("$tool" --help 2>/dev/null | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}')
    mapfile -t COMPREPLY < <(compgen -W "$subs --help --version" -- "$cur")
    return 0
  fi
  if [ "$COMP_CWORD" -gt $((i + 1)) ] && [[ $prev == -* ]] &&
     _vlmc_complete_value "$tool" "$sub" "$prev" "$cur"; then
    return 0
  fi
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_vlmc_help_options "$tool" "$sub")" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}

complete -o filenames -F _vlmc vlmc
complete -o filenames -F _vlmc_run_like vlmc-run vlmc-serve
