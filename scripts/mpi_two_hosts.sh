#!/bin/bash
# Usage: mpi_two_hosts.sh [--ranks-per-host K] -- <program> [args...]
#
# Runs `mpirun -np 2K <program> [args...]` with K ranks on each of two simulated hosts: two network
# namespaces joined by a veth pair, each with its own hostname (a UTS namespace), so that Open MPI
# sees two nodes and the ranks of different hosts talk over TCP across the veth (btl tcp,self; no
# shared memory). mpirun runs in namespace A; it starts the daemon of host B through a generated
# rsh agent that enters namespace B with `ip netns exec` instead of ssh. The file system, the
# working directory, the process ids and the environment are shared by both hosts: only the network
# and the hostname are separate (unlike ssh, the daemon of B inherits mpirun's whole environment).
#
# Exit status: the status of mpirun (so the program's own non-zero exit code, or 128+signal when a
# rank was killed); 77 with one line "skipped: cannot create network namespaces here: <reason>" on
# stderr when this machine cannot do it (not root and no password-less sudo, no `ip netns`, no veth,
# no `unshare --uts`, no mpirun), so that ctest can count it as skipped (SKIP_RETURN_CODE 77);
# 2 for a usage error.
#
# Needs root. Not root: re-runs itself with `sudo -n` if that works, else skips. As root it sets
# OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
# Extra mpirun options (word-split) can be given in MPI_TWO_HOSTS_MPIRUN_ARGS, for example
# MPI_TWO_HOSTS_MPIRUN_ARGS="--mca odls_base_sigkill_timeout 3".
# Every rank gets MPI_TWO_HOSTS=1 in its environment (besides Open MPI's own OMPI_COMM_WORLD_*).
# The namespaces, the veth pair and the temp directory are removed on any exit of this script,
# including SIGINT/SIGTERM/SIGHUP, which are first passed on to mpirun.
# shellcheck disable=SC2317  # cleanup, kill_ns_procs and on_signal are called by traps only
set -u

prog_name=mpi_two_hosts
usage() {
  echo "usage: $0 [--ranks-per-host K] -- <program> [args...]" >&2
  exit 2
}
skip() {
  echo "skipped: cannot create network namespaces here: $*" >&2
  exit 77
}

ranks_per_host=1
while [ $# -gt 0 ]; do
  case $1 in
    --ranks-per-host)
      [ $# -ge 2 ] || usage
      ranks_per_host=$2
      shift 2
      ;;
    --ranks-per-host=*)
      ranks_per_host=${1#*=}
      shift
      ;;
    --)
      shift
      break
      ;;
    -h | --help) usage ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
case $ranks_per_host in
  '' | *[!0-9]* | 0*) echo "$prog_name: --ranks-per-host needs a positive integer, got '$ranks_per_host'" >&2; exit 2 ;;
esac

# --- privileges: root, or password-less sudo, or skip
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    exec sudo -n -E -- "$0" --ranks-per-host "$ranks_per_host" -- "$@"
  fi
  skip "not root and 'sudo -n' is not allowed"
fi

for tool in mpirun ip unshare hostname; do
  command -v "$tool" >/dev/null 2>&1 || skip "'$tool' not found"
done

# --- names, unique per run: the pid of this script plus a random part. The subnet lives only inside the
# two new namespaces (the host's own interfaces and routes never see it), so it cannot collide with the
# host's networks nor with another run's; 10.213.X.0/24 is just an unlikely-looking choice.
rnd=$(printf '%03x' $((RANDOM % 4096)))
tag=$$-$rnd
ns_a=tgmpi-$tag-a
ns_b=tgmpi-$tag-b
veth_a=tg$$${rnd}a   # interface names: at most 15 characters (pid_max 4194304: 7 digits)
veth_b=tg$$${rnd}b
octet=$(( ($$ + RANDOM) % 250 + 1 ))
subnet=10.213.$octet.0/24
addr_a=10.213.$octet.1
addr_b=10.213.$octet.2
host_a=tgmpi-a-$$
host_b=tgmpi-b-$$

tmp=
created_a=0
created_b=0
mpirun_pid=

kill_ns_procs() {  # kill every process still inside namespace $1
  local pids
  pids=$(ip netns pids "$1" 2>/dev/null) || return 0
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null
}
cleanup() {
  trap - EXIT INT TERM HUP
  if [ -n "$mpirun_pid" ] && kill -0 "$mpirun_pid" 2>/dev/null; then
    kill -KILL "$mpirun_pid" 2>/dev/null
  fi
  if [ "$created_a" = 1 ]; then kill_ns_procs "$ns_a"; fi
  if [ "$created_b" = 1 ]; then kill_ns_procs "$ns_b"; fi
  # deleting a namespace also deletes its end of the veth pair, and with it the other end
  if [ "$created_a" = 1 ]; then ip netns del "$ns_a" 2>/dev/null; fi
  if [ "$created_b" = 1 ]; then ip netns del "$ns_b" 2>/dev/null; fi
  ip link del "$veth_a" 2>/dev/null   # only if the move into the namespace failed
  if [ -n "$tmp" ]; then rm -rf "$tmp"; fi
}
trap cleanup EXIT

on_signal() {  # pass the signal on to mpirun (which stops the ranks), give it 10 s, then clean up
  local sig=$1 code=$2
  if [ -n "$mpirun_pid" ] && kill -0 "$mpirun_pid" 2>/dev/null; then
    kill -"$sig" "$mpirun_pid" 2>/dev/null
    for _ in $(seq 100); do
      kill -0 "$mpirun_pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  exit "$code"
}
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP

# --- leftovers of runs of this script that were killed with SIGKILL before their watchdog could act
# (the name holds the pid of the run; that pid no longer exists)
tmp_base=${TMPDIR:-/tmp}
for stale in $(ip netns list 2>/dev/null | sed -n 's/^\(tgmpi-[0-9][0-9]*-[0-9a-f]*-[ab]\)\( .*\)\{0,1\}$/\1/p'); do
  stale_pid=${stale#tgmpi-}
  stale_pid=${stale_pid%%-*}
  if ! kill -0 "$stale_pid" 2>/dev/null; then
    kill_ns_procs "$stale"
    ip netns del "$stale" 2>/dev/null
  fi
done
for stale in "$tmp_base"/tgmpi-[0-9]*-[0-9a-f][0-9a-f][0-9a-f].??????; do
  if [ ! -d "$stale" ] || [ ! -O "$stale" ]; then continue; fi
  stale_pid=${stale##*/tgmpi-}
  stale_pid=${stale_pid%%-*}
  kill -0 "$stale_pid" 2>/dev/null || rm -rf "$stale"
done

# --- the two hosts
err=$(ip netns add "$ns_a" 2>&1) || skip "ip netns add: $err"
created_a=1
err=$(ip netns add "$ns_b" 2>&1) || skip "ip netns add: $err"
created_b=1
err=$(ip link add "$veth_a" type veth peer name "$veth_b" 2>&1) || skip "veth: $err"
err=$( { ip link set "$veth_a" netns "$ns_a" && ip link set "$veth_b" netns "$ns_b"; } 2>&1) ||
  skip "moving veth into namespace: $err"
err=$( {
  ip -n "$ns_a" link set lo up &&
  ip -n "$ns_b" link set lo up &&
  ip -n "$ns_a" addr add "$addr_a/24" dev "$veth_a" &&
  ip -n "$ns_b" addr add "$addr_b/24" dev "$veth_b" &&
  ip -n "$ns_a" link set "$veth_a" up &&
  ip -n "$ns_b" link set "$veth_b" up
} 2>&1) || skip "configuring addresses: $err"
err=$(ip netns exec "$ns_b" unshare --uts sh -c "hostname $host_b" 2>&1) || skip "unshare --uts: $err"
# wait (at most 5 s) until both ends of the veth report carrier
for _ in $(seq 50); do
  ip -n "$ns_a" -o link show "$veth_a" 2>/dev/null | grep -q LOWER_UP &&
    ip -n "$ns_b" -o link show "$veth_b" 2>/dev/null | grep -q LOWER_UP && break
  sleep 0.1
done

tmp=$(mktemp -d "$tmp_base/tgmpi-$tag.XXXXXX") || skip "mktemp failed"

# A watchdog outside this script's process tree and session (ctest kills a timed-out test and its
# descendants with SIGKILL, and no trap runs then): when this script's pid is gone it kills whatever
# still runs in the two namespaces, deletes them and the temp directory. After a normal exit it finds
# nothing left to do.
# shellcheck disable=SC2016  # the inner shell expands its own positional parameters
( setsid sh -c '
  while kill -0 "$0" 2>/dev/null; do sleep 0.5; done
  for ns in "$1" "$2"; do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$3"
' "$$" "$ns_a" "$ns_b" "$tmp" </dev/null >/dev/null 2>&1 & )
hostfile=$tmp/hostfile
agent=$tmp/netns_rsh
printf '%s slots=%s\n%s slots=%s\n' "$addr_a" "$ranks_per_host" "$addr_b" "$ranks_per_host" >"$hostfile"

# The rsh agent: mpirun calls `agent <host> <command words...>` as it would call ssh; like ssh we join
# the words and hand them to a shell, here inside the namespace (and UTS namespace) of <host>.
cat >"$agent" <<EOF
#!/bin/sh
# generated by $0 for one run; mpirun's rsh agent: <host> <command...>
host=\$1
shift
case \$host in
  $addr_a | $host_a) ns=$ns_a; name=$host_a ;;
  $addr_b | $host_b) ns=$ns_b; name=$host_b ;;
  *) echo "netns_rsh: unknown host '\$host'" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$name && \$*"
EOF
chmod 755 "$agent"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MPI_TWO_HOSTS=1

np=$((2 * ranks_per_host))
# shellcheck disable=SC2206  # word splitting of the extra options is intended
extra=(${MPI_TWO_HOSTS_MPIRUN_ARGS:-})
# shellcheck disable=SC2054  # the commas belong to the MCA values
mpirun_cmd=(mpirun -np "$np" --hostfile "$hostfile" --bind-to none
  --mca plm rsh --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1
  --mca btl tcp,self --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet"
  -x MPI_TWO_HOSTS --stdin none
  "${extra[@]}" -- "$@")

# mpirun runs in namespace A with its own hostname, in the background so that the traps can act, and
# (set -m) in a process group of its own, so that a Ctrl-C on the terminal reaches it once, through
# on_signal, and not twice (a second SIGINT makes mpirun quit at once without stopping the ranks).
# For the same reason it does not read the terminal: --stdin none.
set -m
# shellcheck disable=SC2016  # $0 and $@ are for the inner shell
ip netns exec "$ns_a" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host_a" "${mpirun_cmd[@]}" &
mpirun_pid=$!
set +m
wait "$mpirun_pid"
rc=$?
mpirun_pid=
exit "$rc"
