#!/bin/sh
# slurm_sweep.sh — `wlower sweep --scheduler slurm` against a real one-node Slurm that this
# script starts and stops itself (Debian's slurm-wlm and munge; as root): submit, wait,
# collect, and the same results.csv as the ninja run of the same sweep.
#
# Usage: sh bench/slurm_sweep.sh [BUILD_DIR] [WORKDIR]   (defaults: build, /tmp/wlower-slurm-sweep)
# Also the meson test slurm-sweep (tests/meson.build).
# Installs slurm-wlm and munge with apt-get if they are missing. The daemons run with a private
# configuration under WORKDIR (SLURM_CONF), on this host only, and are stopped on exit.
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${1:-build}
WORK=${2:-/tmp/wlower-slurm-sweep}
case $BUILD in /*) W="$BUILD/wlower" ;; *) W="$ROOT/$BUILD/wlower" ;; esac
PY=/usr/bin/python3
command -v slurmctld >/dev/null && command -v munged >/dev/null ||
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurm-wlm munge
rm -rf "$WORK" && mkdir -p "$WORK/state" "$WORK/spool" "$WORK/munge"
HOST=$(hostname -s)
CPUS=$(nproc)
MEM=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)

# munge: a key of our own, its socket under WORKDIR
dd if=/dev/urandom of="$WORK/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 600 "$WORK/munge/munge.key"
munged --force --key-file="$WORK/munge/munge.key" --socket="$WORK/munge/socket" \
	--pid-file="$WORK/munge/munged.pid" --log-file="$WORK/munge/munged.log" --seed-file="$WORK/munge/seed"
cat > "$WORK/slurm.conf" <<CONF
ClusterName=wlower
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$WORK/munge/socket
CredType=cred/munge
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/slurmctld.log
SlurmdLogFile=$WORK/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$WORK/slurm.conf"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
stop() {
	for p in "$WORK/slurmd.pid" "$WORK/slurmctld.pid" "$WORK/munge/munged.pid"; do
		[ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null || true
	done
}
trap stop EXIT INT TERM
i=0
until sinfo -h -o %t 2>/dev/null | grep -q idle; do
	i=$((i + 1)); [ $i -le 60 ] || { echo "slurm did not come up"; tail "$WORK"/*.log; exit 1; }
	sleep 1
done
echo "slurm up: $(sinfo -h -o '%P %D %t %c CPUs')"

# a small sweep (tests/sweep/make_tiny.py), ninja and slurm
$PY tests/sweep/make_tiny.py "$WORK/m"
"$W" quantize "$WORK/m/tiny.onnx" --nbits 4 --block-size 32 -o "$WORK/m/tiny4.onnx"
"$W" calibrate "$WORK/m/tiny4.onnx" --samples x="$WORK/m/x.npy" -o "$WORK/m/tiny4.tranges"
LISTS="--target qc-n,qc-p,qc-u --cores 1,4 --ocm 1MB,4XB --macs-per-pe 16"
# shellcheck disable=SC2086
"$W" sweep "$WORK/m/tiny4.onnx" --tranges "$WORK/m/tiny4.tranges" $LISTS -o "$WORK/ninja" -j "$CPUS"
t0=$(date +%s)
# shellcheck disable=SC2086
"$W" sweep "$WORK/m/tiny4.onnx" --tranges "$WORK/m/tiny4.tranges" $LISTS -o "$WORK/slurm" --scheduler slurm --wait
echo "slurm: submit + wait + collect $(( $(date +%s) - t0 )) s"
if cmp "$WORK/ninja/results.csv" "$WORK/slurm/results.csv"; then
	echo "results.csv: slurm == ninja ($(($(wc -l < "$WORK/slurm/results.csv") - 1)) points)"
else
	echo "results.csv: DIFFERENT"; diff "$WORK/ninja/results.csv" "$WORK/slurm/results.csv" | head; exit 1
fi
