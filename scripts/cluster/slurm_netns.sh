#!/usr/bin/env bash
# Nodes of a SLURM cluster on one machine for scripts/cluster/slurm_rehearsal.sh (REHEARSAL_NODES=N): each node is a
# network namespace of its own (its own address and loopback) joined to a bridge on this machine, where the
# controller listens, and each of its daemons runs in a UTS namespace with the node's hostname.  The nodes share the
# file system (as a cluster's shared file system: the repository, the Hugging Face cache, munge's socket).
#
#   bash scripts/cluster/slurm_netns.sh up N        # bridge rh-br0 (10.77.0.1/24), namespaces rh-node1..N (10.77.0.2..)
#   bash scripts/cluster/slurm_netns.sh run I CMD... # CMD in node I's namespaces (network, and hostname rh-nodeI)
#   bash scripts/cluster/slurm_netns.sh down        # removes them, and their /etc/hosts lines
#
# /etc/hosts gets "10.77.0.1 rh-ctl" and "10.77.0.<I+1> rh-nodeI" (marked "# slurm_netns"), so that every node, and
# torchrun's rendezvous on the first node, resolves the others.  Needs root (ip netns, /etc/hosts).
set -euo pipefail
BR=rh-br0 NET=10.77.0 MARK="# slurm_netns"

down() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '/^rh-node[0-9]+/ {print $1}'); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$ns"
  done
  ip link del "$BR" 2>/dev/null || true
  if grep -q "$MARK" /etc/hosts; then  # /etc/hosts may be a bind mount: rewrite it in place
    grep -v "$MARK" /etc/hosts >/tmp/hosts.slurm_netns && cat /tmp/hosts.slurm_netns >/etc/hosts
    rm -f /tmp/hosts.slurm_netns
  fi
}

up() {
  local n="$1" i ns
  [[ "$n" =~ ^[1-9]$ ]] || { echo "slurm_netns.sh up N: N must be 1..9, got '$n'" >&2; exit 2; }
  down
  ip link add "$BR" type bridge
  ip addr add "$NET.1/24" dev "$BR"
  ip link set "$BR" up
  echo "$NET.1 rh-ctl $MARK" >>/etc/hosts
  for i in $(seq "$n"); do
    ns="rh-node$i"
    ip netns add "$ns"
    ip link add "rh-veth$i" type veth peer name eth0 netns "$ns"
    ip link set "rh-veth$i" master "$BR" up
    ip -n "$ns" addr add "$NET.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" route add default via "$NET.1"
    echo "$NET.$((i + 1)) $ns $MARK" >>/etc/hosts
  done
}

run() {
  local i="$1"; shift
  # nsenter, not `ip netns exec`: that one remounts /sys in a mount namespace of its own, without /sys/fs/cgroup,
  # which slurmd's cgroup plugin reads
  exec nsenter --net="/run/netns/rh-node$i" unshare --uts -- sh -c 'hostname "$0"; exec "$@"' "rh-node$i" "$@"
}

case "${1:-}" in
  up) up "${2:-}" ;;
  down) down ;;
  run) shift; run "$@" ;;
  *) sed -n '2,13p' "$0" >&2; exit 2 ;;
esac
