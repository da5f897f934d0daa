#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, to try workflow/executors/slurm-local without a
# cluster and to run the cluster tests (tests/test_slurm_e2e.py). Debian/Ubuntu, as root.
#
#   scripts/slurm-local.sh install   # apt-get install slurm-wlm munge (Debian 12: Slurm 22.05)
#   scripts/slurm-local.sh up        # munged + slurmctld + slurmd, config in $HKT_SLURM_DIR
#   scripts/slurm-local.sh status    # daemons, node and queue
#   scripts/slurm-local.sh down      # cancel the queue, stop the daemons by PID, remove it all
#
# Everything lives in one directory, $HKT_SLURM_DIR (default ${TMPDIR:-/tmp}/hkt-slurm; give it
# to sudo too: `sudo HKT_SLURM_DIR=... scripts/slurm-local.sh up`): slurm.conf, a fresh munge key
# and socket, state, logs and PID files. The daemons are started and stopped by PID, never
# through systemd. One file is written outside it, /etc/slurm/slurm.conf, a link to ours: the
# Slurm commands that Snakemake, its job steps and the tests run find their config there (the
# jobstep plugin drops SLURM_* variables, SLURM_CONF included, from a job's environment). `up`
# refuses to touch a slurm.conf that is not such a link, or a link to another cluster still
# running; a link left by a cluster whose daemons are gone (killed before `down`) it replaces.
# `down` removes the link.
# Root starts the cluster; any user may then submit to it (the directory is world-readable,
# the munge key is not).
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
alive() { [[ -f $1 ]] && ps -p "$(cat "$1")" >/dev/null 2>&1; }  # any user, not only root
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
    node=$(slurmd -C)            # NodeName=HOST CPUs=.. Boards=.. ... RealMemory=..
    node=${node%%$'\n'*}
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
        echo "slurm-local: already up ($DIR)"; status || true; return
    fi
    if [[ -L $ETC_CONF && ! -e $ETC_CONF ]]; then
        rm -f "$ETC_CONF"  # a link left by a cluster whose directory is gone
    fi
    if [[ -e $ETC_CONF && ! -L $ETC_CONF ]]; then
        die "$ETC_CONF exists and is not ours: this machine has a Slurm configuration; use its cluster (workflow/executors/slurm) or move the file away"
    fi
    if [[ -L $ETC_CONF && $(readlink "$ETC_CONF") != "$DIR/slurm.conf" ]]; then
        local other
        other=$(dirname "$(readlink "$ETC_CONF")")
        if alive "$other/slurmctld.pid" || alive "$other/slurmd.pid" || alive "$other/munge/munged.pid"; then
            die "$ETC_CONF links to $other/slurm.conf, another one-node cluster, still running: stop it first (HKT_SLURM_DIR=$other scripts/slurm-local.sh down)"
        fi
        # its daemons are gone (a run killed before `down`): the link is stale; its directory is
        # left where it is, for its logs
        echo "slurm-local: $ETC_CONF linked to $other, a cluster no longer running (stopped without \`down\`); linking this one instead" >&2
        rm -f "$ETC_CONF"
    fi
    local port
    for port in "$CTLD_PORT" "$SLURMD_PORT"; do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            die "port $port is in use (another slurmctld?): set HKT_SLURM_PORT to a free port"
        fi
    done
    rm -rf "$DIR/state" "$DIR/spool"  # a clean start: no jobs of an earlier cluster come back
    mkdir -p "$DIR"/{munge,key,state,spool,log}
    chmod 755 "$DIR" "$DIR/munge"
    chmod 700 "$DIR/key"
    # a fresh key: this cluster trusts no other munge
    dd if=/dev/urandom of="$DIR/key/munge.key" bs=1024 count=1 status=none
    chmod 400 "$DIR/key/munge.key"
    write_conf
    # from here on, a failure stops what started and removes it all
    munged --force --key-file="$DIR/key/munge.key" --socket="$DIR/munge/munge.socket" \
        --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/log/munged.log" \
        --seed-file="$DIR/key/munged.seed" || up_failed "munged did not start: see $DIR/log/munged.log"
    mkdir -p "$(dirname "$ETC_CONF")"
    [[ -L $ETC_CONF ]] || ln -s "$DIR/slurm.conf" "$ETC_CONF"
    slurmctld -c -f "$DIR/slurm.conf" || up_failed "slurmctld did not start: see $DIR/log/slurmctld.log"
    slurmd -f "$DIR/slurm.conf" || up_failed "slurmd did not start: see $DIR/log/slurmd.log"
    local i state=""
    for i in $(seq 1 60); do
        state=$(sinfo -h -p "$PARTITION" -o %t 2>/dev/null || true)
        [[ $state == idle ]] && break
        sleep 0.5
    done
    [[ $state == idle ]] || up_failed "the node is '${state:-unreachable}', not idle, after 30 s: see $DIR/log/"
    echo "slurm-local: up in $DIR (partition $PARTITION: $(sinfo -h -o '%c CPUs, %m MB'))"
    echo "  run the workflow on it: snakemake --profile workflow/executors/slurm-local [...]"
    echo "  stop it:                scripts/slurm-local.sh down"
}

up_failed() {
    local logs
    logs=$(tail -n 5 "$DIR"/log/*.log 2>/dev/null || true)
    down >/dev/null 2>&1 || true
    die "$1 (cluster stopped and removed; last log lines:
$logs)"
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
    # the /etc link, if it is ours, even when the directory is already gone
    if [[ -L $ETC_CONF && $(readlink "$ETC_CONF") == "$DIR/slurm.conf" ]]; then
        local unlink=1
    fi
    if [[ ! -d $DIR ]]; then
        [[ -n ${unlink:-} ]] && rm -f "$ETC_CONF"
        echo "slurm-local: nothing to stop ($DIR does not exist)"; return
    fi
    local name pid i
    if alive "$DIR/slurmctld.pid"; then
        # cancel the queue and wait for its jobs (and their processes) to end
        scancel --full --quiet --partition "$PARTITION" 2>/dev/null || true
        for i in $(seq 1 30); do
            [[ -z $(squeue -h -p "$PARTITION" 2>/dev/null) ]] && break
            sleep 0.5
        done
    fi
    for name in slurmd slurmctld munge/munged; do
        alive "$DIR/$name.pid" || continue
        pid=$(cat "$DIR/$name.pid")
        kill "$pid" 2>/dev/null || true
        for i in $(seq 1 50); do ps -p "$pid" >/dev/null 2>&1 || break; sleep 0.1; done
        if ps -p "$pid" >/dev/null 2>&1; then kill -9 "$pid" 2>/dev/null || true; fi
    done
    [[ -n ${unlink:-} ]] && rm -f "$ETC_CONF"
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
