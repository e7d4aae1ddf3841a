#!/usr/bin/env bash
# From `git clone` to the demo's first update, on a cold cache: clones REPO (default: this
# clone) into a temporary folder, runs scripts/demo.sh there with an empty NMT_CACHE (new venv,
# empty ccache) and no pip/uv download cache, stamps every output line with the seconds since
# the clone began, stops the demo at its first train line, and prints when each phase began.
# A benchmark, not a test. For a machine as bare as a new one, purge the Debian packages the
# demo installs first (scripts/setup.sh lists them) and `apt-get clean`.
#
#   scripts/bench/first-update.sh [REPO] [COMMIT]     e.g. scripts/bench/first-update.sh . HEAD
set -euo pipefail
repo=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
commit=${2:-HEAD}
work=$(mktemp -d /tmp/nmt-first-update.XXXXXX)
export NMT_CACHE=$work/cache PIP_NO_CACHE_DIR=1 UV_NO_CACHE=1
log=$work/demo.log
start=$(date +%s.%N)
setsid bash -c "git clone -q '$repo' '$work/clone' && cd '$work/clone' && git checkout -q '$commit' &&
                exec bash scripts/demo.sh" > "$work/raw.log" 2>&1 &
demo=$!
stamp() { echo "$(date +%s.%N) - $start" | bc; }
while IFS= read -r line; do
  printf '%8.1f %s\n' "$(stamp)" "$line" >> "$log"
  case "$line" in *"[train] step "*) break ;; esac
done < <(tail -n +1 -F "$work/raw.log" 2>/dev/null)
kill -9 -- -"$demo" 2>/dev/null || true
pkill -9 -f "$work/clone/build/nmt-train" 2>/dev/null || true
echo "stamped log: $log"
awk '/\[setup 1\/4\]/{p="apt"} /\[setup 2\/4\]/{p="venv"} /\[setup 3\/4\]/{p="configure"}
     /\[setup 4\/4\]/{p="build"} /\[demo 1\/3\]/{p="data and start of training"}
     /\] [0-9]+ steps in epoch/{p="training to the first train line"}
     /\[train\] step /{printf "%-34s began at %7.1f s\n", "first train line", $1; exit}
     p != "" && p != last {printf "%-34s began at %7.1f s\n", p, $1; last = p}' "$log"
