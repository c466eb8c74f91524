# gpu-runs.sh: the one reader of scripts/gpu-runs.txt, sourced by gpu-check.sh, device-kit.sh and
# gpu-rehearsal.sh.
#
#   gpu_runs    prints each run on one line, its fields trimmed and separated by tabs:
#               name, op, GPU sizes, emulator sizes, weight, quick (`q` or empty)
#
#   while IFS=$'\t' read -r name op gpu emu weight quick; do ...; done < <(gpu_runs)

gpu_runs() {
  local line f i
  while IFS= read -r line; do
    case $line in '#'* | '') continue ;; esac
    IFS='|' read -r -a f <<<"$line"
    [ "${#f[@]}" -ge 5 ] || continue
    for i in 0 1 2 3 4 5; do
      f[i]=$(echo "${f[i]:-}" | xargs)
    done
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "${f[0]}" "${f[1]}" "${f[2]}" "${f[3]}" "${f[4]}" "${f[5]}"
  done <"$(dirname "${BASH_SOURCE[0]}")/gpu-runs.txt"
}
