#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, to try workflow/profiles/slurm-local without a
# cluster and to run the cluster tests (tests/test_slurm_e2e.py). Debian/Ubuntu, as root.
#
#   scripts/slurm-local.sh install   # apt-get install slurm-wlm munge (Debian 12: Slurm 22.05)
#   scripts/slurm-local.sh up        # munged + slurmctld + slurmd, config in $HKT_SLURM_DIR
#   scripts/slurm-local.sh status    # daemons, node and queue
#   scripts/slurm-local.sh down      # cancel the queue, stop the daemons by PID, remove it all
#
# Everything lives in one directory, $HKT_SLURM_DIR (default ${TMPDIR:-/tmp}/hkt-slurm):
# slurm.conf, a fresh munge key and socket, state, logs and PID files. The daemons are started
# and stopped by PID, never through systemd. One file is written outside it: srun inside batch
# jobs reads /etc/slurm/slurm.conf whatever SLURM_CONF says, so `up` links it to ours when no
# slurm.conf is there (and refuses to touch one that is), and `down` removes the link.
# The node: this machine's CPUs and memory as `slurmd -C` reports them, one partition `hkt`,
# no accounting database, MinJobAge=300 so that finished jobs stay visible to `squeue` (the
# profile's status command) well past 3x its first status check.
set -euo pipefail

DIR=${HKT_SLURM_DIR:-${TMPDIR:-/tmp}/hkt-slurm}
CTLD_PORT=${HKT_SLURM_PORT:-6817}
SLURMD_PORT=$((CTLD_PORT + 1))
PARTITION=hkt
ETC_CONF=/etc/slurm/slurm.conf

die() { echo "slurm-local: $*" >&2; exit 1; }
need_root() { [[ $(id -u) -eq 0 ]] || die "$1 needs root (slurmd runs jobs as their user); run it with sudo"; }
need_bins() {
    local b
    for b in munged slurmctld slurmd sinfo sbatch; do
        command -v "$b" >/dev/null || die "$b not found: run \`scripts/slurm-local.sh install\` first"
    done
}
alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
export SLURM_CONF=$DIR/slurm.conf

install() {
    need_root install
    if command -v slurmctld >/dev/null && command -v munged >/dev/null; then
        echo "slurm-local: slurm-wlm and munge already installed ($(slurmctld -V))"; return
    fi
    command -v apt-get >/dev/null || die "install needs apt-get (Debian/Ubuntu); elsewhere install Slurm and MUNGE with your package manager"
    local t0=$SECONDS
    local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurm-wlm munge)
    "${apt[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && "${apt[@]}" >/dev/null; } \
        || die "apt-get install slurm-wlm munge failed (see apt-get's message above)"
    echo "slurm-local: installed $(slurmctld -V) and munge in $((SECONDS - t0)) s"
}

write_conf() {
    local node cpus mem host
    node=$(slurmd -C | head -1)  # NodeName=HOST CPUs=.. Boards=.. ... RealMemory=..
    host=$(hostname -s)
    cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$node")
    mem=$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$node")
    [[ -n $cpus && -n $mem ]] || die "cannot read this node's CPUs and memory from \`slurmd -C\`: $node"
    cat >"$DIR/slurm.conf" <<EOF
# written by scripts/slurm-local.sh up; removed by down
ClusterName=hkt-local
SlurmctldHost=$host
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=300
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

up() {
    need_root up
    need_bins
    if alive "$DIR/slurmctld.pid"; then
        echo "slurm-local: already up ($DIR)"; status; return
    fi
    if [[ -e $ETC_CONF && ! -L $ETC_CONF ]]; then
        die "$ETC_CONF exists and is not ours: this machine has a Slurm configuration; use its cluster (workflow/profiles/slurm) or move the file away"
    fi
    if [[ -L $ETC_CONF && $(readlink "$ETC_CONF") != "$DIR/slurm.conf" ]]; then
        die "$ETC_CONF links to $(readlink "$ETC_CONF"), another one-node cluster; \`HKT_SLURM_DIR=$(dirname "$(readlink "$ETC_CONF")") scripts/slurm-local.sh down\` first"
    fi
    local port
    for port in "$CTLD_PORT" "$SLURMD_PORT"; do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            die "port $port is in use (another slurmctld?): set HKT_SLURM_PORT to a free port"
        fi
    done
    mkdir -p "$DIR"/{munge,state,spool,log}
    chmod 700 "$DIR" "$DIR/munge"
    # a fresh key: this cluster trusts no other munge
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$DIR/munge/munge.key"
    write_conf
    munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
        --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/log/munged.log" \
        --seed-file="$DIR/munge/munged.seed" || die "munged did not start: see $DIR/log/munged.log"
    mkdir -p "$(dirname "$ETC_CONF")"
    [[ -L $ETC_CONF ]] || { ln -s "$DIR/slurm.conf" "$ETC_CONF"; touch "$DIR/etc-link"; }
    slurmctld -f "$DIR/slurm.conf" || die "slurmctld did not start: see $DIR/log/slurmctld.log"
    slurmd -f "$DIR/slurm.conf" || die "slurmd did not start: see $DIR/log/slurmd.log"
    local i state
    for i in $(seq 1 60); do
        state=$(sinfo -h -p "$PARTITION" -o %t 2>/dev/null || true)
        [[ $state == idle ]] && break
        sleep 0.5
    done
    [[ $state == idle ]] || die "the node is '${state:-unreachable}', not idle, after 30 s: see $DIR/log/"
    echo "slurm-local: up in $DIR (partition $PARTITION: $(sinfo -h -o '%c CPUs, %m MB'))"
    echo "  run the workflow on it: snakemake --profile workflow/profiles/slurm-local [...]"
    echo "  stop it:                scripts/slurm-local.sh down"
}

status() {
    local name ok=0
    for name in munge/munged slurmctld slurmd; do
        if alive "$DIR/$name.pid"; then
            echo "  ${name##*/}: running (pid $(cat "$DIR/$name.pid"))"
        else
            echo "  ${name##*/}: not running"; ok=1
        fi
    done
    if [[ $ok -eq 0 ]]; then
        echo "  node: $(sinfo -h -o '%P %t, %c CPUs, %m MB')"
        echo "  queue: $(squeue -h | wc -l) jobs"; squeue -h -o '    %i %j %T %M %R'
    else
        echo "slurm-local: not up (\`scripts/slurm-local.sh up\`)"
    fi
    return $ok
}

down() {
    [[ -d $DIR ]] || { echo "slurm-local: nothing to stop ($DIR does not exist)"; return; }
    if alive "$DIR/slurmctld.pid"; then
        scancel --full --quiet --partition "$PARTITION" 2>/dev/null || true
    fi
    local name pid i
    for name in slurmd slurmctld munge/munged; do
        alive "$DIR/$name.pid" || continue
        pid=$(cat "$DIR/$name.pid")
        kill "$pid"
        for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    done
    # job steps slurmd started and left (a job killed with its daemon)
    pkill -f "slurmstepd: \[" 2>/dev/null || true
    if [[ -f $DIR/etc-link && -L $ETC_CONF ]]; then rm -f "$ETC_CONF"; fi
    rm -rf "$DIR"
    echo "slurm-local: down, $DIR removed"
}

case ${1:-} in
    install) install ;;
    up) up ;;
    down) down ;;
    status) status ;;
    *) echo "usage: scripts/slurm-local.sh install|up|status|down   (directory: \$HKT_SLURM_DIR, now $DIR)" >&2; exit 2 ;;
esac
