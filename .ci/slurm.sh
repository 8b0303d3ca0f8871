#!/usr/bin/env bash
# A single-node SLURM cluster for the SLURM tests (tests/test_launch.py), built from Debian's
# packages: munge, slurmctld, slurmd and slurm-client (22.05 on bookworm).
#
#   .ci/slurm.sh install      apt-get the packages (as root; nothing to do when they are there)
#   .ci/slurm.sh start DIR    config, keys, state and logs in DIR; start munged, slurmctld and
#                             slurmd; wait for the node; write DIR/env, which exports SLURM_CONF
#                             and SCALING_TEST_SLURM (the partition the tests submit to)
#   .ci/slurm.sh stop DIR     stop the three daemons by the pids they wrote in DIR
#
# The cluster: no cgroups (proctrack/linuxproc, task/none), no accounting (so sacct has nothing
# to say and a task's state comes from squeue), KillWait=2 so a cancel lands in seconds, one
# partition `ci` holding this machine with the CPUs and memory `slurmd -C` reads from it.
# Jobs run as the submitting user (root in CI). Nothing outside DIR is written.
set -euo pipefail

PACKAGES=(munge slurmctld slurmd slurm-client)
PARTITION=ci

install() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
            && command -v sbatch >/dev/null && command -v munged >/dev/null; then
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "slurm.sh: not root, cannot apt-get ${PACKAGES[*]}" >&2
        return 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
}

write_config() {  # DIR
    local dir=$1 node
    node=$(slurmd -C | head -n 1)  # NodeName=<host> CPUs=... RealMemory=...
    cat > "$dir/slurm.conf" <<EOF
ClusterName=scalingci
SlurmctldHost=$(hostname -s)
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
SlurmctldPort=${SLURM_CI_PORT:-6817}
SlurmdPort=$(( ${SLURM_CI_PORT:-6817} + 1 ))
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=2
MinJobAge=600
$node State=UNKNOWN
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {  # DIR
    local dir=$1
    mkdir -p "$dir/munge" "$dir/state" "$dir/spool"
    chmod 700 "$dir/munge"
    mungekey --create --force --keyfile "$dir/munge/munge.key" >/dev/null
    munged --force --socket "$dir/munge/munge.socket" --key-file "$dir/munge/munge.key" \
        --pid-file "$dir/munge/munged.pid" --log-file "$dir/munge/munged.log" \
        --seed-file "$dir/munge/munged.seed"
    write_config "$dir"
    export SLURM_CONF=$dir/slurm.conf
    slurmctld -i
    slurmd
    for _ in $(seq 60); do
        if [ "$(sinfo -h -p "$PARTITION" -o %t 2>/dev/null)" = idle ]; then
            printf 'export SLURM_CONF=%q\nexport SCALING_TEST_SLURM=%q\n' "$SLURM_CONF" "$PARTITION" \
                > "$dir/env"
            echo "slurm.sh: single-node cluster up ($(sinfo -h -o '%P %D node(s) %c CPUs %m MB')), config $SLURM_CONF"
            return 0
        fi
        sleep 1
    done
    echo "slurm.sh: the node did not come up; the logs are in $dir" >&2
    tail -n 5 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
    return 1
}

stop() {  # DIR
    local dir=$1 pidfile pid
    for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
        [ -s "$pidfile" ] || continue
        pid=$(cat "$pidfile")
        kill "$pid" 2>/dev/null || continue
        for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    done
}

case "${1:-}" in
    install) install ;;
    start) start "${2:?usage: slurm.sh start DIR}" ;;
    stop) stop "${2:?usage: slurm.sh stop DIR}" ;;
    *) echo "usage: slurm.sh install | start DIR | stop DIR" >&2; exit 2 ;;
esac
