#!/usr/bin/env bash
# gpu-import.sh: a gpu-check result folder into the repository, numbers untouched.
#
#   scripts/gpu-import.sh RESULTS [--rehearsal]
#
# RESULTS is what scripts/gpu-check.sh left in its output folder (summary.json, summary.md,
# profile.json, raw.tar.gz, gpu-check.log; a run stopped early may lack some). It writes:
#   profiles/<device>.json            the run's profile merged in (`flaretune merge`: per key the
#                                     entry with the lowest median is kept); <device> is the GPU's
#                                     name in lower case without "NVIDIA" (h200, a100-sxm4-80gb)
#   profiles/runs/<device>-<date>/    (-2, -3 for more runs that day) the run as it came: README.md (the summary), summary.json,
#                                     profile.raw.json, gpu-check.log, raw.tar.gz (when at most
#                                     RAW_MAX_MIB, default 4; else left out and said so)
#   README.md                         the section between <!-- gpu-check:begin --> and
#                                     <!-- gpu-check:end -->: the run's tables, as the summary
#                                     has them
# and prints the one `git add` / `git commit` that lands it all. Results of the emulator's
# rehearsal (GPU_CHECK_BACKEND=cuda-emu) are refused unless --rehearsal is given. FT names the
# flaretune binary (default build/flaretune, else build-gpu/flaretune).
set -euo pipefail
die() {
  echo "gpu-import: $*" >&2
  exit 1
}
[ $# -ge 1 ] || die "usage: scripts/gpu-import.sh RESULTS [--rehearsal]"
res=$1
rehearsal=0
[ "${2:-}" = --rehearsal ] && rehearsal=1
[ -d "$res" ] || die "$res is not a folder"
res=$(cd "$res" && pwd)
cd "$(dirname "$0")/.."
[ -f "$res/summary.json" ] || die "$res has no summary.json: not a gpu-check result folder"
ft=${FT:-}
if [ -z "$ft" ]; then
  for f in build/flaretune build-gpu/flaretune; do [ -x "$f" ] && ft=$f && break; done
fi
[ -n "$ft" ] && [ -x "$ft" ] || die "no flaretune binary (build it, or set FT)"
grep -q '<!-- gpu-check:begin -->' README.md && grep -q '<!-- gpu-check:end -->' README.md ||
  die "README.md lacks the <!-- gpu-check:begin --> / <!-- gpu-check:end --> markers"

# Everything checked before anything is written.
read -r backend slug date < <(python3 - "$res/summary.json" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
name = re.sub(r"^nvidia\s+", "", d.get("device", "unknown").strip(), flags=re.I).lower()
slug = re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "unknown"
print(d.get("backend", "cuda"), slug, d.get("date", "")[:10] or "undated")
PY
)
if [ "$backend" = cuda-emu ] && [ "$rehearsal" = 0 ]; then
  die "$res is a rehearsal on the emulator (GPU_CHECK_BACKEND=cuda-emu): its timings are no GPU's; --rehearsal imports it anyway"
fi
# A second run of the same day gets its own folder.
run=profiles/runs/$slug-$date
k=2
while [ -e "$run" ]; do
  run=profiles/runs/$slug-$date-$k
  k=$((k + 1))
done
prof=profiles/$slug.json
if [ -f "$res/profile.json" ]; then
  err=$(mktemp)
  "$ft" show "$res/profile.json" >/dev/null 2>"$err" ||
    { cat "$err" >&2; rm -f "$err"; die "$res/profile.json is not a readable profile"; }
  rm -f "$err"
fi

# The raw run, as it came.
mkdir -p "$run"
cp "$res/summary.md" "$run/README.md" 2>/dev/null || echo "(no summary.md: the run stopped before its first step)" >"$run/README.md"
cp "$res/summary.json" "$run/summary.json"
[ -f "$res/profile.json" ] && cp "$res/profile.json" "$run/profile.raw.json"
[ -f "$res/gpu-check.log" ] && cp "$res/gpu-check.log" "$run/gpu-check.log"
if [ -f "$res/raw.tar.gz" ]; then
  mib=$(($(stat -c %s "$res/raw.tar.gz") / 1048576))
  if [ "$mib" -le "${RAW_MAX_MIB:-4}" ]; then
    cp "$res/raw.tar.gz" "$run/raw.tar.gz"
  else
    printf '\nraw.tar.gz (%s MiB, the logs and event logs) was left out of the repository.\n' "$mib" >>"$run/README.md"
  fi
fi

# Files come back from the device read-only: the copies are the repository's, writable.
chmod -R u+w "$run"

# The profile, merged (a run cut before its first tuning session has none).
paths=("$run" README.md)
if [ -f "$res/profile.json" ]; then
  "$ft" merge "$prof" "$res/profile.json"
  paths=("$prof" "${paths[@]}")
else
  prof=""
fi

# The README's section.
python3 - "$res/summary.md" "$run" "$prof" <<'PY'
import os, sys
summary, run, prof = sys.argv[1:4]
try:
    body = open(summary).read().strip().splitlines()
except OSError:
    body = ["(the run stopped before its first step: no summary)"]
# The summary's title becomes a sentence; its tables stay as they are.
title = body[0].lstrip("# ").strip() if body and body[0].startswith("#") else "gpu-check"
rest = body[1:] if body and body[0].startswith("#") else body
where = f", the profile in [{prof}]({prof})" if prof else " (it wrote no profile)"
text = [f"The latest {title}: every file in [{run}]({run}/README.md){where}. Imported by "
        f"`scripts/gpu-import.sh`; numbers as the run wrote them.", ""]
text += rest
readme = open("README.md").read()
a, b = "<!-- gpu-check:begin -->", "<!-- gpu-check:end -->"
i, j = readme.index(a) + len(a), readme.index(b)
new = readme[:i] + "\n" + "\n".join(text).strip() + "\n" + readme[j:]
tmp = "README.md.tmp"
with open(tmp, "w") as f:
    f.write(new)
os.replace(tmp, "README.md")
PY

echo "imported $res:"
echo "  ${prof:+$prof (merged), }$run/, README.md (the gpu-check section)"
echo "land it in one commit:"
echo "  git add ${paths[*]} && git commit -m \"profiles: $slug gpu-check of $date\""
