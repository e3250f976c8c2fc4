#!/usr/bin/env bash
# A multi-node SLURM cluster on one Linux machine, to try curate's SLURM path (and to test it).
#
#   sudo scripts/minicluster.sh up   [DIR] [NODES]   start it (default DIR /tmp/curate-minicluster, 3 nodes)
#   eval "$(scripts/minicluster.sh env [DIR])"       point sbatch/srun/squeue/sinfo at it (SLURM_CONF)
#   sudo scripts/minicluster.sh down [DIR]           stop it and remove everything it created
#   sudo scripts/minicluster.sh kill-node DIR NODE   lose a node: SIGKILL every process in its namespace
#   sudo scripts/minicluster.sh start-node DIR NODE  bring a lost node back (its slurmd again)
#
# Each node is a network namespace with its own address on a private bridge, its own hostname (a
# UTS namespace) and its own slurmd (-N nodeN, its own spool, log and pid files). slurmctld and a
# private munged (own key and socket, so the machine's munge is left alone) run on the bridge side.
# The file system is shared, as on a real cluster. The namespaces have no default route: a node
# reaches the other nodes and the bridge address, nothing else. The subnet is the first 10.77.X.0/24
# that no route of the machine uses (MINICLUSTER_SUBNET=10.77.5 to choose). Everything started is
# recorded in DIR/pids and stopped by pid; DIR/names lists the namespaces and links to delete.
# Needs root (namespaces, slurmd), iproute2, util-linux (unshare) and the slurm-wlm and munge packages.
set -euo pipefail

cmd=${1:-}
dir=${2:-/tmp/curate-minicluster}
nodes=${3:-3}

die() { echo "minicluster: $*" >&2; exit 1; }

run_ip() { ip "$@" >/dev/null; }

free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 20000))
    [ -z "$(ss -Hltn "sport = :$p" 2>/dev/null)" ] && { echo "$p"; return; }
  done
}

start_slurmd() {  # start_slurmd I: node I's slurmd inside its namespace, with a hostname of its own
  local i=$1 ns
  ns=$(awk -v n="node$i" '$1 == n { print $2 }' "$dir/nodes")
  [ -n "$ns" ] || die "no node$i in $dir/nodes"
  # nsenter rather than `ip netns exec`, which remounts /sys without the cgroup tree slurmd needs;
  # nsenter, unshare and sh all exec, so the recorded pid is slurmd's
  start_bg "slurmd-node$i" "$dir/log/slurmd-node$i.out" nsenter --net="/run/netns/$ns" unshare --uts \
    sh -c "hostname node$i && exec /usr/sbin/slurmd -D -N node$i -f '$dir/etc/node$i/slurm.conf'"
}

start_bg() {  # start_bg NAME LOG CMD...: start CMD in the background, record its pid under NAME
  local name=$1 log=$2
  shift 2
  "$@" >>"$log" 2>&1 </dev/null &
  echo "$! $name" >>"$dir/pids"
}

up() {
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces, slurmd)"
  for tool in ip ss unshare nsenter /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged mungekey sinfo; do
    command -v "$tool" >/dev/null || die "$tool not found: run scripts/setup.sh (slurm-wlm, munge) and install iproute2"
  done
  [ ! -e "$dir/pids" ] || die "$dir/pids exists: a cluster is up there (scripts/minicluster.sh down $dir)"
  mkdir -p "$dir"
  chmod 700 "$dir"
  dir=$(cd "$dir" && pwd)
  mkdir -p "$dir/munge" "$dir/state" "$dir/log" "$dir/run"
  : >"$dir/pids"
  : >"$dir/names"
  # a short tag keeps the names of two clusters (two test runs) apart; interface names have 15 chars
  local tag
  tag=$(od -An -N2 -tx2 /dev/urandom | tr -d ' \n')
  local net=${MINICLUSTER_SUBNET:-}
  if [ -z "$net" ]; then
    local x
    for x in $(seq 0 255); do
      if ! ip -4 route show | grep -q "^10\.77\.$x\." && ! ip -4 addr show | grep -q "inet 10\.77\.$x\."; then
        net=10.77.$x; break
      fi
    done
    [ -n "$net" ] || die "no free 10.77.X.0/24 subnet"
  fi
  echo "$net" >"$dir/subnet"
  local br=cmb$tag
  run_ip link add "$br" type bridge
  echo "link $br" >>"$dir/names"
  run_ip addr add "$net.1/24" dev "$br"
  run_ip link set "$br" up
  # bridged frames must not go through the machine's iptables (Docker sets FORWARD to DROP)
  [ -w /proc/sys/net/bridge/bridge-nf-call-iptables ] && echo "note: bridge-nf-call-iptables is on" >>"$dir/log/net.log"

  local i ns
  for i in $(seq 1 "$nodes"); do
    ns=curate-$tag-node$i
    run_ip netns add "$ns"
    echo "netns $ns" >>"$dir/names"
    run_ip link add "cmv$tag$i" type veth peer name eth0 netns "$ns"
    echo "link cmv$tag$i" >>"$dir/names"
    run_ip link set "cmv$tag$i" master "$br" up
    run_ip -n "$ns" addr add "$net.$((10 + i))/24" dev eth0
    run_ip -n "$ns" link set lo up
    run_ip -n "$ns" link set eth0 up
    echo "node$i $ns $net.$((10 + i))" >>"$dir/nodes"
  done

  # munged of our own: own key, own socket; slurm finds it through AuthInfo
  mungekey --create --keyfile="$dir/munge/munge.key" --force >/dev/null 2>&1 \
    || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 600 "$dir/munge/munge.key"
  start_bg munged "$dir/log/munged.out" /usr/sbin/munged -F --force --socket="$dir/munge/munge.socket" \
    --key-file="$dir/munge/munge.key" --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed"

  local host cpus ctld_port
  host=$(hostname -s)
  # slurmctld listens on all of the machine's addresses: a port no one else (another minicluster,
  # the machine's own SLURM) uses
  ctld_port=$(free_port)
  # nproc honours OMP_NUM_THREADS, which Dask and numeric libraries set in their processes: count CPUs
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
  {
    echo "ClusterName=curatemini"
    echo "SlurmctldHost=$host($net.1)"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "AuthInfo=socket=$dir/munge/munge.socket"
    echo "CredType=cred/munge"
    echo "StateSaveLocation=$dir/state"
    echo "SlurmdSpoolDir=$dir/spool/%n"
    echo "SlurmctldPidFile=$dir/run/slurmctld.pid"
    echo "SlurmdPidFile=$dir/run/slurmd-%n.pid"
    echo "SlurmctldLogFile=$dir/log/slurmctld.log"
    echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
    echo "SlurmctldPort=$ctld_port"
    echo "SlurmdPort=6818"  # each slurmd listens in its own namespace
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "MpiDefault=none"
    echo "SchedulerType=sched/builtin"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "ReturnToService=2"
    echo "SlurmdTimeout=30"
    echo "JobCompType=jobcomp/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    for i in $(seq 1 "$nodes"); do
      echo "NodeName=node$i NodeAddr=$net.$((10 + i)) NodeHostname=node$i CPUs=$cpus State=UNKNOWN"
    done
    echo "PartitionName=mini Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$dir/slurm.conf"
  export SLURM_CONF=$dir/slurm.conf

  for _ in $(seq 50); do [ -S "$dir/munge/munge.socket" ] && break; sleep 0.1; done
  [ -S "$dir/munge/munge.socket" ] || die "munged did not start: $(cat "$dir/log/munged.out" "$dir/log/munged.log" 2>/dev/null)"
  start_bg slurmctld "$dir/log/slurmctld.out" /usr/sbin/slurmctld -D -i -f "$dir/slurm.conf"
  for i in $(seq 1 "$nodes"); do
    mkdir -p "$dir/spool/node$i" "$dir/etc/node$i" "$dir/tmp/node$i"
    # every node its own configuration folder: the same slurm.conf, but PMIx's per-job folders
    # (made under /tmp by default, which here is shared) in a folder of the node's own
    cp "$dir/slurm.conf" "$dir/etc/node$i/slurm.conf"
    echo "PMIxCliTmpDirBase=$dir/tmp/node$i" >"$dir/etc/node$i/mpi.conf"
    start_slurmd "$i"
  done
  for _ in $(seq 120); do
    if [ "$(sinfo -h -N -o '%T' 2>/dev/null | grep -c -E '^(idle|mixed|allocated)$')" = "$nodes" ]; then
      echo "minicluster: up in $dir: $nodes nodes on $net.0/24 (node1 = $net.11, ...)"
      echo "minicluster: eval \"\$(scripts/minicluster.sh env $dir)\" then sbatch -N $nodes ..."
      return 0
    fi
    sleep 0.5
  done
  echo "minicluster: SLURM did not come up; logs:" >&2
  tail -n 20 "$dir"/log/*.log "$dir"/log/*.out >&2 || true
  down
  exit 1
}

down() {
  [ -d "$dir" ] || die "no cluster in $dir"
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/slurm.conf" ] && [ -f "$dir/pids" ]; then
    SLURM_CONF=$dir/slurm.conf timeout 10 scancel --user="$(id -un)" >/dev/null 2>&1 || true
  fi
  if [ -f "$dir/pids" ]; then
    local pid name
    # slurmds first (they end their job steps), then slurmctld, munged last
    tac "$dir/pids" | while read -r pid name; do kill -TERM "$pid" 2>/dev/null || true; done
    for _ in $(seq 100); do
      local alive=0
      while read -r pid name; do kill -0 "$pid" 2>/dev/null && alive=1; done <"$dir/pids"
      [ "$alive" = 0 ] && break
      sleep 0.1
    done
    while read -r pid name; do kill -KILL "$pid" 2>/dev/null || true; done <"$dir/pids"
    # any process still inside a node namespace (a job step that outlived its slurmd) is ours
    if [ -f "$dir/names" ]; then
      while read -r kind name; do
        [ "$kind" = netns ] || continue
        for pid in $(ip netns pids "$name" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
      done <"$dir/names"
    fi
    rm -f "$dir/pids"
  fi
  if [ -f "$dir/names" ]; then
    tac "$dir/names" | while read -r kind name; do
      case $kind in
        netns) ip netns delete "$name" 2>/dev/null || true ;;
        link) ip link delete "$name" 2>/dev/null || true ;;
      esac
    done
    rm -f "$dir/names" "$dir/nodes"
  fi
  echo "minicluster: down ($dir)"
}

node_ns() {  # node_ns NODE: the namespace of a node of the cluster in $dir
  [ -f "$dir/nodes" ] || die "no cluster in $dir"
  local ns
  ns=$(awk -v n="$1" '$1 == n { print $2 }' "$dir/nodes")
  [ -n "$ns" ] || die "$1 is not a node of the cluster in $dir (see $dir/nodes)"
  echo "$ns"
}

kill_node() {  # what a node crash leaves: no slurmd, no slurmstepd, no task; the namespace stays
  local node=$1 ns pids
  ns=$(node_ns "$node")
  # a slurmstepd can fork while we kill: repeat until the namespace is empty
  for _ in $(seq 50); do
    pids=$(ip netns pids "$ns")
    [ -z "$pids" ] && break
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  done
  [ -z "$(ip netns pids "$ns")" ] || die "processes left in $ns: $(ip netns pids "$ns" | tr '\n' ' ')"
  # the dead slurmd's pid must not be signalled by `down` once the kernel hands it to another process
  grep -v " slurmd-$node\$" "$dir/pids" >"$dir/pids.new" || true
  mv "$dir/pids.new" "$dir/pids"
  echo "minicluster: $node killed (every process in $ns)"
}

start_node() {
  local node=$1 ns
  ns=$(node_ns "$node")
  [ -z "$(ip netns pids "$ns")" ] || die "$node is running (processes in $ns); kill-node first"
  export SLURM_CONF=$dir/slurm.conf
  start_slurmd "${node#node}"
  echo "minicluster: $node started again"
}

case $cmd in
  up) up ;;
  down) down ;;
  env) echo "export SLURM_CONF=$(cd "$dir" && pwd)/slurm.conf" ;;
  kill-node) [ -n "${3:-}" ] || die "usage: scripts/minicluster.sh kill-node DIR NODE"; dir=$(cd "$dir" && pwd); kill_node "$3" ;;
  start-node) [ -n "${3:-}" ] || die "usage: scripts/minicluster.sh start-node DIR NODE"; dir=$(cd "$dir" && pwd); start_node "$3" ;;
  *) echo "usage: scripts/minicluster.sh up|down|env|kill-node|start-node [DIR] [NODES|NODE]" >&2; exit 2 ;;
esac
