#!/usr/bin/env bash
# Rewrites the generated block of docs/configuration.md (between its "<!-- BEGIN
# config-reference" and "<!-- END config-reference" lines) with `nmt-train --config-reference`,
# which prints every config key from the schema that reads them. The text around the block is
# left as it is. ctest -R 'config reference' fails until this has run after a key changed.
#
#   scripts/gen-config-reference.sh            # uses build/nmt-train (NMT_TRAIN=... for another)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
train=${NMT_TRAIN:-$repo/build/nmt-train}
page=$repo/docs/configuration.md
[[ -x $train ]] || { echo "gen-config-reference: $train not built (cmake --build build --target nmt-train)" >&2; exit 1; }
grep -q '^<!-- BEGIN config-reference' "$page" && grep -q '^<!-- END config-reference' "$page" ||
  { echo "gen-config-reference: $page lacks its BEGIN/END config-reference lines" >&2; exit 1; }
generated=$(mktemp)
updated=$(mktemp)
trap 'rm -f "$generated" "$updated"' EXIT
"$train" --config-reference >"$generated"
awk -v generated="$generated" '
  /^<!-- BEGIN config-reference/ { print; while ((getline line < generated) > 0) print line; skip = 1; next }
  /^<!-- END config-reference/ { skip = 0 }
  !skip { print }
' "$page" >"$updated"
cat "$updated" >"$page"
echo "gen-config-reference: wrote $(grep -c '^| `' "$generated") keys into docs/configuration.md"
