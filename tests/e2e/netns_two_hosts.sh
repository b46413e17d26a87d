#!/usr/bin/env bash
# Data parallel across two "hosts" on one machine: two network namespaces
# joined by a veth pair (10.77.0.1 and 10.77.0.2), mpirun started in the
# first with both addresses as hosts and a launcher agent that starts each
# host's daemon with `ip netns exec`, and MPI's TCP transport between them
# (no shared memory). 20 steps of lenet must give the same parameters, bit
# for bit, as the same two ranks on one host. Skips (status 77) where
# network namespaces cannot be made (not root, no CAP_NET_ADMIN, no iproute2).
# Usage: netns_two_hosts.sh MEMFIT CHECKPOINT_DIFF MPIEXEC
set -euo pipefail
memfit="$1"
diff_tool="$2"
mpiexec="$3"
a="memfit$$a"
b="memfit$$b"
dir=$(mktemp -d)
cleanup() {
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
if ! command -v ip >/dev/null || ! ip netns add "$a" 2>"$dir/why"; then
  echo "SKIP: cannot make a network namespace ($(cat "$dir/why" 2>/dev/null || echo "no ip command")); run as root with iproute2"
  exit 77
fi
ip netns add "$b"
ip link add "mf$$a0" type veth peer name "mf$$b0"
ip link set "mf$$a0" netns "$a"
ip link set "mf$$b0" netns "$b"
ip -n "$a" addr add 10.77.0.1/24 dev "mf$$a0"
ip -n "$b" addr add 10.77.0.2/24 dev "mf$$b0"
for ns in "$a" "$b"; do
  ip -n "$ns" link set lo up
done
ip -n "$a" link set "mf$$a0" up
ip -n "$b" link set "mf$$b0" up

# mpirun calls the agent as `agent HOST COMMAND...` to start a host's daemon.
cat >"$dir/agent.sh" <<AGENT
#!/bin/sh
host=\$1
shift
case \$host in
  10.77.0.1) ns=$a ;;
  10.77.0.2) ns=$b ;;
  *) echo "netns agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec \$ns sh -c "\$*"
AGENT
chmod +x "$dir/agent.sh"

two_hosts=("$mpiexec" -np 2 -H 10.77.0.1,10.77.0.2 --mca plm_rsh_agent "$dir/agent.sh"
  --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24)
# Each rank runs in its own namespace.
where=$(ip netns exec "$a" "${two_hosts[@]}" \
  sh -c 'echo "rank $OMPI_COMM_WORLD_RANK in $(ip netns identify $$)"' | sort)
echo "$where"
grep -qx "rank 0 in $a" <<<"$where"
grep -qx "rank 1 in $b" <<<"$where"

flags=(train --model lenet --synthetic --batch 8 --limit 320 --epochs 1 --schedule constant
  --threads 1 --seed 11 --check-replicas)
ip netns exec "$a" "${two_hosts[@]}" "$memfit" "${flags[@]}" --save "$dir/two_hosts.ckpt" \
  >"$dir/two_hosts.log" 2>&1 || { cat "$dir/two_hosts.log"; exit 1; }
cat "$dir/two_hosts.log"
"$mpiexec" -np 2 "$memfit" "${flags[@]}" --save "$dir/one_host.ckpt" >"$dir/one_host.log" 2>&1 ||
  { cat "$dir/one_host.log"; exit 1; }
# The same sums of the same two partial gradients: the same bits.
"$diff_tool" "$dir/two_hosts.ckpt" "$dir/one_host.ckpt" 0
echo "two hosts over TCP: the parameters of one host, bit for bit"
