#!/usr/bin/env bash
# Build an English-LANG parallel corpus from the Debian Description
# Translation Project (DDTP) files of the Debian archive.
#
# usage: scripts/get-ddtp-corpus.sh LANG [OUTDIR [EXTRACT_OPTIONS...]]
#
#   LANG     a DDTP language code as used in Translation-LANG (de, fr, es,
#            it, pt_BR, ...)
#   OUTDIR   where to write ddtp.en-LANG.{train,valid,test}.{en,LANG} and
#            stats.json (default: ./ddtp.en-LANG)
#   EXTRACT_OPTIONS are passed to scripts/ddtp/extract.py, e.g.
#            --gzip-train --stats-file ddtp.en-de.stats.json (how data/ was
#            made: train files as .gz) or --train-size 18000 (a sample)
#            (see scripts/ddtp/extract.py --help)
#
# Environment (all optional):
#   DDTP_MIRROR     Debian mirror (default http://deb.debian.org/debian)
#   DDTP_SUITE      suite (default: VERSION_CODENAME of this Debian machine,
#                   else bookworm)
#   DDTP_COMPONENT  component (default main)
#   DDTP_KEYRING    keyring for the Release signature
#                   (default /usr/share/keyrings/debian-archive-keyring.gpg)
#   DDTP_KEEP_TMP=1 keep the temporary apt directory (path is printed)
#
# Needs apt (apt-get, /usr/lib/apt/apt-helper) and python3 (standard library
# only).  Uses a private temporary apt state/cache/sources directory; the
# system's /var/lib/apt/lists is never read or written.  Works as root or as
# an ordinary user.  Takes a few seconds (about 8 MB download for de).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

if [[ $# -lt 1 || "$1" == -h || "$1" == --help ]]; then
  usage
  [[ $# -ge 1 ]] && exit 0 || exit 2
fi

LANG_CODE=$1
shift
if [[ ! "$LANG_CODE" =~ ^[a-z]{2,3}(_[A-Z]{2})?$ || "$LANG_CODE" == en ]]; then
  echo "error: LANG must be a DDTP language code other than en (e.g. de, fr, pt_BR)" >&2
  exit 2
fi
OUTDIR=${1:-ddtp.en-$LANG_CODE}
[[ $# -ge 1 ]] && shift

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
EXTRACT=$SCRIPT_DIR/ddtp/extract.py

default_suite() {
  local id="" codename=""
  if [[ -r /etc/os-release ]]; then
    id=$(. /etc/os-release && echo "${ID:-}")
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  fi
  if [[ "$id" == debian && -n "$codename" ]]; then echo "$codename"; else echo bookworm; fi
}

MIRROR=${DDTP_MIRROR:-http://deb.debian.org/debian}
SUITE=${DDTP_SUITE:-$(default_suite)}
COMPONENT=${DDTP_COMPONENT:-main}
KEYRING=${DDTP_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}

for tool in apt-get python3 /usr/lib/apt/apt-helper; do
  command -v "$tool" >/dev/null || { echo "error: $tool not found" >&2; exit 1; }
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ddtp.XXXXXX")
chmod 755 "$TMP"   # apt's _apt download user must be able to enter it
cleanup() {
  if [[ "${DDTP_KEEP_TMP:-0}" == 1 ]]; then
    echo "kept temporary directory $TMP" >&2
  else
    rm -rf "$TMP"
  fi
}
trap cleanup EXIT

mkdir -p "$TMP/lists/partial" "$TMP/cache/archives/partial" "$TMP/sources.list.d"
signed_by=""
[[ -r "$KEYRING" ]] && signed_by="[signed-by=$KEYRING] "
echo "deb ${signed_by}$MIRROR $SUITE $COMPONENT" > "$TMP/sources.list"

echo "== fetching Translation-en and Translation-$LANG_CODE of $MIRROR $SUITE/$COMPONENT" >&2
start=$(date +%s)
apt-get update \
  -o Dir::Etc::SourceList="$TMP/sources.list" \
  -o Dir::Etc::SourceParts="$TMP/sources.list.d" \
  -o Dir::State::Lists="$TMP/lists" \
  -o Dir::Cache="$TMP/cache" \
  -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= \
  -o APT::Get::List-Cleanup=false \
  -o Acquire::Languages="en,$LANG_CODE" \
  -o Acquire::IndexTargets::deb::Packages::DefaultEnabled=false \
  -o Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false \
  -o Acquire::IndexTargets::deb::Contents-udeb::DefaultEnabled=false \
  -o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false \
  -o Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false \
  -o Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false \
  -o Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false \
  -o Acquire::IndexTargets::deb::CNF::DefaultEnabled=false >&2

find_index() {  # $1: language code; prints the path of the index file
  local f
  for f in "$TMP/lists/"*"_dists_${SUITE}_${COMPONENT}_i18n_Translation-$1"*; do
    [[ -f "$f" ]] && { echo "$f"; return 0; }
  done
  return 1
}

for l in en "$LANG_CODE"; do
  if ! idx=$(find_index "$l"); then
    echo "error: no Translation-$l for $SUITE/$COMPONENT on $MIRROR" \
         "(is '$l' a DDTP language of this suite?)" >&2
    exit 1
  fi
  echo "== decompressing $(basename "$idx")" >&2
  /usr/lib/apt/apt-helper cat-file "$idx" > "$TMP/Translation-$l"
done

release_date=""
for f in "$TMP/lists/"*"_dists_${SUITE}_InRelease" "$TMP/lists/"*"_dists_${SUITE}_Release"; do
  if [[ -f "$f" ]]; then
    release_date=$(sed -n 's/^Date: //p' "$f" | head -n1)
    break
  fi
done
echo "== fetched in $(( $(date +%s) - start ))s (Release date: ${release_date:-unknown})" >&2

echo "== extracting pairs" >&2
python3 "$EXTRACT" \
  --en "$TMP/Translation-en" --tgt "$TMP/Translation-$LANG_CODE" \
  --lang "$LANG_CODE" --outdir "$OUTDIR" \
  --meta "origin=Debian Description Translation Project (DDTP) via the Debian archive" \
  --meta "mirror=$MIRROR" --meta "suite=$SUITE" --meta "component=$COMPONENT" \
  --meta "release_date=$release_date" \
  --meta "fetched=$(date -u +%Y-%m-%d)" \
  "$@"
echo "== total time $(( $(date +%s) - start ))s" >&2
