#!/usr/bin/env bash
# Two "hosts" on one machine: two network namespaces joined by a veth pair (10.77.0.1 and
# 10.77.0.2), one torchrun node in each (--nnodes 2, MASTER_ADDR the first namespace's address,
# Gloo over the veth link), training the tiny config; then the same 2 ranks on one host. The
# final parameters must be identical (nmt-ckpt diff --atol 0).
#
#   scripts/fault/two-hosts.sh [STEPS]        (default 8)
#
# Needs root (or CAP_NET_ADMIN) and iproute2. Exit code 77 (CTest's skip code) with a message
# when namespaces cannot be made here.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
steps=${1:-8}
train=$(realpath "${NMT_TRAIN:-build/nmt-train}")
ckpt=${NMT_CKPT:-build/nmt-ckpt}
# The venv scripts/setup.sh makes, named by the torch version that scripts/requirements.txt pins.
torch_version=$(sed -n 's/^torch==//p' "$repo/scripts/requirements.txt")
python=${NMT_PYTHON:-${NMT_CACHE:-$HOME/.cache/nmt-train}/torch-$torch_version/venv/bin/python}
torchrun=$(dirname "$python")/torchrun
[[ -x $torchrun ]] || { echo "two-hosts.sh: skipped: $torchrun not found (scripts/setup.sh)"; exit 77; }
ns0=nmt-host0-$$ ns1=nmt-host1-$$
work=$(mktemp -d)
cleanup() {
  ip netns pids "$ns0" 2> /dev/null | xargs -r kill -KILL 2> /dev/null || true
  ip netns pids "$ns1" 2> /dev/null | xargs -r kill -KILL 2> /dev/null || true
  ip netns del "$ns0" 2> /dev/null || true
  ip netns del "$ns1" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
if ! command -v ip > /dev/null || ! ip netns add "$ns0" 2> "$work/why"; then
  echo "two-hosts.sh: skipped: cannot create a network namespace here ($(cat "$work/why" 2> /dev/null || echo 'no iproute2'))"
  exit 77
fi
ip netns add "$ns1"
ip link add "veth0-$$" netns "$ns0" type veth peer name "veth1-$$" netns "$ns1"
ip -n "$ns0" addr add 10.77.0.1/24 dev "veth0-$$"
ip -n "$ns1" addr add 10.77.0.2/24 dev "veth1-$$"
for ns in "$ns0" "$ns1"; do
  ip -n "$ns" link set lo up
done
ip -n "$ns0" link set "veth0-$$" up
ip -n "$ns1" link set "veth1-$$" up

# The vocabulary from the first 18,000 training pairs, as in the C++ tests: SentencePiece takes
# 2-3x as long on all 41,931.
for side in en de; do head -n 18000 <(gzip -dc data/ddtp.en-de.train.$side.gz) > "$work/slice.$side"; done
"$train" --config configs/tiny.yaml --dry-run --log-level warn --set data.vocab_size=1000 \
  --set data.train_src="$work/slice.en" --set data.train_tgt="$work/slice.de" \
  --set run_dir="$work/vocab" > /dev/null 2>&1
args=(--config configs/tiny.yaml --set data.spm_model="$work/vocab/vocab/joint.model"
      --set model.dropout=0 --set train.threads=1 --set data.max_tokens=1024
      --set train.valid_every=0 --set train.log_every=2 --set checkpoint.every_steps="$steps"
      --set train.max_steps="$steps")

# Two hosts: one node (one worker) per namespace. Each keeps its own run directory, as
# machines without a shared filesystem would; rank 0's holds the checkpoint.
port=$((20000 + RANDOM % 20000))
for node in 0 1; do
  ns=$ns0; [[ $node == 1 ]] && ns=$ns1
  ip netns exec "$ns" timeout 300 "$torchrun" --nnodes 2 --node-rank "$node" --nproc-per-node 1 \
    --master-addr 10.77.0.1 --master-port "$port" --no-python "$train" "${args[@]}" \
    --set run_dir="$work/host$node" > "$work/host$node.log" 2>&1 &
done
failed=0
wait %1 || failed=1
wait %2 || failed=1
if (( failed )); then
  echo "two-hosts.sh: the two-host run failed:" >&2
  tail -n 5 "$work/host0.log" "$work/host1.log" >&2
  exit 1
fi
grep -h "process group\|ranks (gloo)" "$work/host0.log" | head -n 2

# The same two ranks on one host.
timeout 300 "$train" "${args[@]}" --nproc-per-node 2 --set run_dir="$work/onehost" > "$work/onehost.log" 2>&1 ||
  { tail -n 5 "$work/onehost.log" >&2; exit 1; }
name=$(printf 'checkpoint-%08d.safetensors' "$steps")
if "$ckpt" diff --atol 0 "$work/onehost/checkpoints/$name" "$work/host0/checkpoints/$name" > "$work/diff" 2>&1; then
  echo "two-hosts.sh: 2 hosts (veth, Gloo) and 1 host give identical parameters after $steps steps"
else
  cat "$work/diff" >&2
  echo "two-hosts.sh: parameters differ between 2 hosts and 1 host" >&2
  exit 1
fi
