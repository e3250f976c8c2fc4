#!/usr/bin/env bash
# A multi-node SLURM cluster on one Linux machine, to try curate's SLURM path (and to test it).
#
#   sudo scripts/minicluster.sh up   [DIR] [NODES] [--head] [--node-cpus C] [--node-memory SIZE] [--link RATE]
#                                                    start it (default DIR /tmp/curate-minicluster, 3 nodes)
#   eval "$(scripts/minicluster.sh env [DIR])"       point sbatch/srun/squeue/sinfo at it (SLURM_CONF)
#   sudo scripts/minicluster.sh down [DIR]           stop it and remove everything it created
#   sudo scripts/minicluster.sh kill-node DIR NODE   lose a node: SIGKILL every process in its namespace
#   sudo scripts/minicluster.sh start-node DIR NODE  bring a lost node back (its slurmd again)
#   sudo scripts/minicluster.sh exec DIR NODE CMD... run CMD as the node's processes run: its caps, its namespace
#   sudo scripts/minicluster.sh status DIR [--reset] each node's caps, CPU-seconds and memory (now, peak);
#                                                    --reset zeroes the CPU-seconds and peaks first
#
# Nodes of a fixed size (all three options are optional and apply to every node, the head too):
#   --node-cpus C       at most C CPUs per node (C may be a fraction: 0.25), a CFS quota
#   --node-memory SIZE  at most SIZE of memory per node (512MiB, 3GiB, ...; K/M/G/T are powers of 1024)
#   --link RATE         each node's link to the bridge shaped to RATE both ways (tc htb: 100mbit, 1gbit)
#   --head              one more node, `head` ($net.10), first in the node list: the place for the Dask
#                       scheduler and the job rank, so that k worker nodes give the workers k x C CPUs
#                       (slurm/strong_scaling.sbatch with CURATE_HEAD=1 puts ranks 0 and 1 there)
# The CPU and memory caps are cgroup v1 groups curate-mini-TAG/NODE (cpu, cpuacct, memory), made under
# the cgroup of the process that runs `up` (a container's own limits still hold); each slurmd starts
# inside its node's groups, so every job step and task it runs inherits them.
#
# Each node is a network namespace with its own address on a private bridge, its own hostname (a
# UTS namespace) and its own slurmd (-N nodeN, its own spool, log and pid files). slurmctld and a
# private munged (own key and socket, so the machine's munge is left alone) run on the bridge side.
# The file system is shared, as on a real cluster. The namespaces have no default route: a node
# reaches the other nodes and the bridge address, nothing else. The subnet is the first 10.77.X.0/24
# that no route of the machine uses (MINICLUSTER_SUBNET=10.77.5 to choose). Everything started is
# recorded in DIR/pids and stopped by pid; DIR/names lists the namespaces, links and cgroups to delete
# (`down` kills what is left in a node's cgroups by pid before it removes them).
# Needs root (namespaces, slurmd), iproute2 (ip, tc), util-linux (unshare, nsenter) and the slurm-wlm
# and munge packages; the caps need cgroup v1's cpu, cpuacct and memory controllers.
set -euo pipefail

die() { echo "minicluster: $*" >&2; exit 1; }

self=$(readlink -f "$0")
cmd=${1:-}
[ $# -gt 0 ] && shift
node_cpus="" node_memory="" link_rate="" head=0 reset=0
args=()
if [ "$cmd" = exec ] || [ "$cmd" = _run ]; then
  args=("$@")  # CMD's own options are its own
else
  while [ $# -gt 0 ]; do
    case $1 in
      --node-cpus) node_cpus=${2:?--node-cpus needs a value}; shift 2 ;;
      --node-memory) node_memory=${2:?--node-memory needs a value}; shift 2 ;;
      --link) link_rate=${2:?--link needs a value}; shift 2 ;;
      --head) head=1; shift ;;
      --reset) reset=1; shift ;;
      -*) die "unknown option $1" ;;
      *) args+=("$1"); shift ;;
    esac
  done
fi
dir=${args[0]:-/tmp/curate-minicluster}
nodes=${args[1]:-3}

run_ip() { ip "$@" >/dev/null; }

free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 20000))
    [ -z "$(ss -Hltn "sport = :$p" 2>/dev/null)" ] && { echo "$p"; return; }
  done
}

start_slurmd() {  # start_slurmd NODE: the node's slurmd in its cgroups and namespace, with a hostname of its own
  local node=$1
  node_ns "$node" >/dev/null
  # `_run` joins the node's cgroups and execs nsenter, which execs unshare, sh and slurmd: the
  # recorded pid is slurmd's, and everything slurmd starts inherits the caps
  start_bg "slurmd-$node" "$dir/log/slurmd-$node.out" "$self" _run "$dir" "$node" unshare --uts \
    sh -c "hostname $node && exec /usr/sbin/slurmd -D -N $node -f '$dir/etc/$node/slurm.conf'"
}

to_bytes() {  # to_bytes SIZE: 3GiB, 3G, 512MiB, 1024 -> bytes (K/M/G/T as powers of 1024, like SLURM)
  local v=${1%B}
  v=${v%i}
  case $v in
    *[kK]) echo $(( ${v%?} * 1024 )) ;;
    *M) echo $(( ${v%?} * 1024 ** 2 )) ;;
    *G) echo $(( ${v%?} * 1024 ** 3 )) ;;
    *T) echo $(( ${v%?} * 1024 ** 4 )) ;;
    *[0-9]) echo "$v" ;;
    *) die "bad size $1 (e.g. 512MiB, 3GiB)" ;;
  esac
}

cgroup_base() {  # cgroup_base CONTROLLER: where our groups go, under this process's own group
  local ctl=$1 rel
  [ -f "/sys/fs/cgroup/$ctl/cgroup.procs" ] || die "no cgroup v1 $ctl controller at /sys/fs/cgroup/$ctl"
  rel=$(awk -F: -v c="$ctl" '{ n = split($2, a, ","); for (i = 1; i <= n; i++) if (a[i] == c) print $3 }' /proc/self/cgroup)
  echo "/sys/fs/cgroup/$ctl${rel%/}"
}

make_cgroups() {  # make_cgroups TAG NODE...: cpu, cpuacct and memory groups per node, with the caps
  local tag=$1 ctl base node g quota bytes
  shift
  for ctl in cpu cpuacct memory; do
    base=$(cgroup_base "$ctl")/curate-mini-$tag
    # where cpu and cpuacct share a hierarchy (cpu,cpuacct), the cpu pass made the groups already
    local made=0
    [ -d "$base" ] && made=1
    [ "$made" = 1 ] || { mkdir "$base"; echo "cgroup $base" >>"$dir/names"; }
    for node in "$@"; do
      g=$base/$node
      echo "$node $g" >>"$dir/cgroups"
      [ "$made" = 1 ] && continue
      mkdir "$g"
      echo "cgroup $g" >>"$dir/names"
      if [ "$ctl" = cpu ] && [ -n "$node_cpus" ]; then
        # C CPUs = C periods of CPU time per period, spread over any of the machine's cores
        quota=$(awk -v c="$node_cpus" 'BEGIN { q = int(c * 100000 + 0.5); if (q < 1000) q = 1000; print q }')
        echo 100000 >"$g/cpu.cfs_period_us"
        echo "$quota" >"$g/cpu.cfs_quota_us"
      fi
      if [ "$ctl" = memory ] && [ -n "$node_memory" ]; then
        bytes=$(to_bytes "$node_memory")
        echo "$bytes" >"$g/memory.limit_in_bytes"
        # with swap accounting, memory+swap too: the node must not page its way past its size
        [ -f "$g/memory.memsw.limit_in_bytes" ] && echo "$bytes" >"$g/memory.memsw.limit_in_bytes"
      fi
    done
  done
}

node_cgroups() {  # node_cgroups NODE: the node's cgroup folders (none for a cluster without caps)
  [ -f "$dir/cgroups" ] && awk -v n="$1" '$1 == n { print $2 }' "$dir/cgroups"
  return 0
}

shape_link() {  # shape_link DEV [NETNS]: RATE both ways; htb works out its own burst for any rate
  local dev=$1 ns=${2:-} tcx=(tc)
  [ -n "$ns" ] && tcx=(tc -n "$ns")
  "${tcx[@]}" qdisc add dev "$dev" root handle 1: htb default 10
  "${tcx[@]}" class add dev "$dev" parent 1: classid 1:10 htb rate "$link_rate" ceil "$link_rate" quantum 60000
}

run_in_node() {  # run_in_node NODE UTS CMD...: join the node's cgroups, then exec CMD in its namespace
  local node=$1 uts=$2 ns g
  shift 2
  ns=$(node_ns "$node")
  for g in $(node_cgroups "$node"); do echo $$ >"$g/cgroup.procs"; done
  # nsenter rather than `ip netns exec`, which remounts /sys without the cgroup tree slurmd needs
  if [ -n "$uts" ]; then exec nsenter --net="/run/netns/$ns" --uts="$uts" "$@"; fi
  exec nsenter --net="/run/netns/$ns" "$@"
}

exec_in_node() {  # as the node's processes run: caps, network namespace and (if slurmd lives) hostname
  local node=$1 pid uts=""
  shift
  [ $# -gt 0 ] || die "usage: scripts/minicluster.sh exec DIR NODE CMD..."
  pid=$(awk -v n="slurmd-$node" '$2 == n { print $1 }' "$dir/pids" 2>/dev/null | tail -n 1)
  [ -n "$pid" ] && [ -e "/proc/$pid/ns/uts" ] && uts=/proc/$pid/ns/uts
  run_in_node "$node" "$uts" "$@"
}

status() {  # one line per node: caps, CPU-seconds used, memory now and at its peak (bytes)
  [ -f "$dir/nodes" ] || die "no cluster in $dir"
  local node ns addr cpus mem link g secs now peak
  echo "node cpus memory link cpu_seconds memory_now memory_peak"
  while read -r node ns addr; do
    read -r cpus mem link < <(awk -v n="$node" '$1 == n { print $2, $3, $4 }' "$dir/caps" 2>/dev/null) || true
    secs=- now=- peak=-
    for g in $(node_cgroups "$node"); do
      case $g in
        */cpuacct/*)
          [ "$reset" = 1 ] && echo 0 >"$g/cpuacct.usage"
          secs=$(awk '{ printf "%.3f", $1 / 1e9 }' "$g/cpuacct.usage") ;;
        */memory/*)
          [ "$reset" = 1 ] && echo 0 >"$g/memory.max_usage_in_bytes"
          now=$(cat "$g/memory.usage_in_bytes"); peak=$(cat "$g/memory.max_usage_in_bytes") ;;
      esac
    done
    echo "$node ${cpus:--} ${mem:--} ${link:--} $secs $now $peak"
  done <"$dir/nodes"
}

start_bg() {  # start_bg NAME LOG CMD...: start CMD in the background, record its pid under NAME
  local name=$1 log=$2
  shift 2
  "$@" >>"$log" 2>&1 </dev/null &
  echo "$! $name" >>"$dir/pids"
}

valid_up_args() {  # everything up is told, checked before it touches anything
  case $nodes in ''|*[!0-9]*) die "NODES must be a whole number from 1 to 200; got '$nodes'" ;; esac
  [ "$nodes" -ge 1 ] && [ "$nodes" -le 200 ] || die "NODES must be a whole number from 1 to 200; got '$nodes'"
  # DIR ends up inside sh -c strings run as root: only plain path characters
  case $dir in *[!A-Za-z0-9_./+-]*) die "DIR may hold only letters, digits and _ . / + -; got '$dir'" ;; esac
  if [ -n "$link_rate" ]; then
    printf '%s' "$link_rate" | grep -Eqi '^[0-9]+(\.[0-9]+)?([kmgt]?bit|[kmgt]?bps)$' \
      || die "--link must be a rate such as 100mbit or 1gbit; got '$link_rate'"
  fi
}

up() {
  valid_up_args
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces, slurmd)"
  for tool in ip tc ss unshare nsenter /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged mungekey sinfo; do
    command -v "$tool" >/dev/null || die "$tool not found: run scripts/setup.sh (slurm-wlm, munge) and install iproute2"
  done
  [ ! -e "$dir/pids" ] || die "$dir/pids exists: a cluster is up there (scripts/minicluster.sh down $dir)"
  # a step that fails part-way takes down what the steps before it made (by the names they recorded)
  trap 'rc=$?; trap - EXIT; if [ "$rc" != 0 ]; then echo "minicluster: up failed; removing what it made" >&2; down; fi; exit "$rc"' EXIT
  mkdir -p "$dir"
  chmod 700 "$dir"
  dir=$(cd "$dir" && pwd)
  mkdir -p "$dir/munge" "$dir/state" "$dir/log" "$dir/run"
  : >"$dir/pids"
  : >"$dir/names"
  : >"$dir/nodes"
  : >"$dir/cgroups"
  [ -z "$node_cpus" ] || awk -v c="$node_cpus" 'BEGIN { exit !(c > 0) }' || die "--node-cpus must be > 0; got $node_cpus"
  [ -z "$node_memory" ] || to_bytes "$node_memory" >/dev/null
  # the node names: the head (if any) first, so that it is the first node of an allocation's list
  local names=()
  [ "$head" = 1 ] && names+=(head)
  for i in $(seq 1 "$nodes"); do names+=("node$i"); done
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

  local i ns node addr veth
  for node in "${names[@]}"; do
    i=${node#node}
    [ "$node" = head ] && i=0
    ns=curate-$tag-$node
    veth=cmv$tag${node#node}
    [ "$node" = head ] && veth=cmv${tag}h
    addr=$net.$((10 + i))
    run_ip netns add "$ns"
    echo "netns $ns" >>"$dir/names"
    run_ip link add "$veth" type veth peer name eth0 netns "$ns"
    echo "link $veth" >>"$dir/names"
    run_ip link set "$veth" master "$br" up
    run_ip -n "$ns" addr add "$addr/24" dev eth0
    run_ip -n "$ns" link set lo up
    run_ip -n "$ns" link set eth0 up
    if [ -n "$link_rate" ]; then
      # towards the node on the bridge side, from the node inside it: both directions at RATE
      shape_link "$veth"
      shape_link eth0 "$ns"
    fi
    echo "$node $ns $addr" >>"$dir/nodes"
    echo "$node ${node_cpus:--} ${node_memory:--} ${link_rate:--}" >>"$dir/caps"
  done
  [ -z "$node_cpus$node_memory" ] || make_cgroups "$tag" "${names[@]}"

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
    while read -r node ns addr; do
      echo "NodeName=$node NodeAddr=$addr NodeHostname=$node CPUs=$cpus State=UNKNOWN"
    done <"$dir/nodes"
    echo "PartitionName=mini Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$dir/slurm.conf"
  export SLURM_CONF=$dir/slurm.conf

  for _ in $(seq 50); do [ -S "$dir/munge/munge.socket" ] && break; sleep 0.1; done
  [ -S "$dir/munge/munge.socket" ] || die "munged did not start: $(cat "$dir/log/munged.out" "$dir/log/munged.log" 2>/dev/null)"
  start_bg slurmctld "$dir/log/slurmctld.out" /usr/sbin/slurmctld -D -i -f "$dir/slurm.conf"
  for node in "${names[@]}"; do
    mkdir -p "$dir/spool/$node" "$dir/etc/$node" "$dir/tmp/$node"
    # every node its own configuration folder: the same slurm.conf, but PMIx's per-job folders
    # (made under /tmp by default, which here is shared) in a folder of the node's own
    cp "$dir/slurm.conf" "$dir/etc/$node/slurm.conf"
    echo "PMIxCliTmpDirBase=$dir/tmp/$node" >"$dir/etc/$node/mpi.conf"
    start_slurmd "$node"
  done
  for _ in $(seq 120); do
    if [ "$(sinfo -h -N -o '%T' 2>/dev/null | grep -c -E '^(idle|mixed|allocated)$')" = "${#names[@]}" ]; then
      echo "minicluster: up in $dir: ${names[*]} on $net.0/24 (node1 = $net.11, ...${node_cpus:+; $node_cpus CPUs}${node_memory:+; $node_memory}${link_rate:+; link $link_rate} per node)"
      echo "minicluster: eval \"\$(scripts/minicluster.sh env $dir)\" then sbatch -N ${#names[@]} ..."
      trap - EXIT
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
    # any process still inside a node namespace or a node cgroup (a job step that outlived its
    # slurmd, a command of `exec`) is ours
    if [ -f "$dir/names" ]; then
      while read -r kind name; do
        case $kind in
          netns) for pid in $(ip netns pids "$name" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done ;;
          cgroup) [ -f "$name/cgroup.procs" ] && for pid in $(cat "$name/cgroup.procs"); do kill -KILL "$pid" 2>/dev/null || true; done ;;
        esac
      done <"$dir/names"
    fi
    rm -f "$dir/pids"
  fi
  if [ -f "$dir/names" ]; then
    tac "$dir/names" | while read -r kind name; do
      case $kind in
        netns) ip netns delete "$name" 2>/dev/null || true ;;
        link) ip link delete "$name" 2>/dev/null || true ;;
        # a killed process leaves its group a moment later: rmdir until it goes (nodes before their parent)
        cgroup) for _ in $(seq 50); do [ -d "$name" ] || break; rmdir "$name" 2>/dev/null || sleep 0.1; done
                [ -d "$name" ] && echo "minicluster: could not remove $name" >&2 ;;
      esac
    done
    rm -f "$dir/names" "$dir/nodes" "$dir/cgroups" "$dir/caps"
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
  # a slurmstepd can fork while we kill: repeat until the namespace (and the node's cgroups) are empty
  for _ in $(seq 50); do
    pids=$(ip netns pids "$ns"; for g in $(node_cgroups "$node"); do cat "$g/cgroup.procs"; done)
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
  start_slurmd "$node"
  echo "minicluster: $node started again"
}

node=${args[1]:-}
case $cmd in
  up) up ;;
  down) down ;;
  env) echo "export SLURM_CONF=$(cd "$dir" && pwd)/slurm.conf" ;;
  kill-node) [ -n "$node" ] || die "usage: scripts/minicluster.sh kill-node DIR NODE"; dir=$(cd "$dir" && pwd); kill_node "$node" ;;
  start-node) [ -n "$node" ] || die "usage: scripts/minicluster.sh start-node DIR NODE"; dir=$(cd "$dir" && pwd); start_node "$node" ;;
  exec) [ -n "$node" ] || die "usage: scripts/minicluster.sh exec DIR NODE CMD..."; dir=$(cd "$dir" && pwd); exec_in_node "$node" "${args[@]:2}" ;;
  # internal: start_slurmd's way into a node (no hostname: the command makes its own)
  _run) dir=$(cd "$dir" && pwd); run_in_node "$node" "" "${args[@]:2}" ;;
  status) [ -d "$dir" ] || die "no cluster in $dir"; dir=$(cd "$dir" && pwd); status ;;
  *) echo "usage: scripts/minicluster.sh up|down|env|kill-node|start-node|exec|status [DIR] [NODES|NODE] [options]" >&2; exit 2 ;;
esac
