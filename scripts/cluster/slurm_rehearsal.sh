#!/usr/bin/env bash
# SLURM rehearsal: a one-node SLURM cluster on this machine (Debian's slurm-wlm + munge + slurmdbd on MariaDB, for
# the `sacct` the executor plugin polls), then the DAG through `snakemake --profile profiles/slurm-rehearsal`: every
# job goes through `sbatch`.  Then profiles/slurm itself (the GPU cluster's profile, unchanged) with config/paper.yaml
# is checked against the same controller: each sbatch call it makes is asked with --test-only on the 2-CPU node (GPU
# requests are refused for lack of GPUs, never for their syntax) and submitted held to a phantom 8 x A100 node that
# never comes up (accepted, then cancelled).  Every daemon the script starts is stopped on exit.
#
#   bash scripts/cluster/slurm_rehearsal.sh                                   # config/ci.yaml (~13 min on 2 cores)
#   bash scripts/cluster/slurm_rehearsal.sh config/paper.yaml config/rehearsal.yaml    # any --configfile list
#   REHEARSAL_TRAIN_ONLY=bd_pad_1.5b bash scripts/cluster/slurm_rehearsal.sh             # one training job (~5 min)
#   REHEARSAL_TRAIN_ONLY=bd_pad_1.5b REHEARSAL_TIME_LIMIT=2 bash scripts/cluster/slurm_rehearsal.sh  # past its limit
#   REHEARSAL_TRAIN_ONLY=bd_pad_1.5b REHEARSAL_NODES=2 bash scripts/cluster/slurm_rehearsal.sh       # on two nodes
#
# Options (environment): REHEARSAL_DIR (scratch, default /tmp/slurm-rehearsal: the cluster's state and logs, and a
# copy of the repository's working tree -- tracked and untracked, not ignored files -- that the DAG runs in, with a
# fresh results/), REHEARSAL_SKIP_INSTALL=1 (do not apt-get), REHEARSAL_SKIP_WORKLOAD=1 / REHEARSAL_SKIP_TESTONLY=1
# (skip the DAG run / the profiles/slurm check), REHEARSAL_TESTONLY_CONFIGS (the --configfile list of the profiles/slurm
# check, default config/paper.yaml; add a config with data.train_files to put train_model's request to it too),
# REHEARSAL_SNAKEMAKE_ARGS (extra arguments before --configfile, e.g. a target), REHEARSAL_TRAIN_ONLY=<model> (only
# that model's train_model job and the jobs it needs; configs default to config/paper.yaml config/rehearsal.yaml;
# no profiles/slurm check): the training job is then checked with
# `sacct -j <id>` against profiles/slurm-rehearsal's train_model request (scripts/cluster/slurm_train_check.py: every
# step COMPLETED, the nodes and CPUs asked for, one task per node, nodes x cpus_per_task training processes).
# REHEARSAL_TIME_LIMIT=<minutes> (with REHEARSAL_TRAIN_ONLY): the job asks SLURM for that limit
# (training_plan.job_minutes) and is sized to ~1.4 jobs of training here (its inputs built first, so that the plan --
# the rule's retries -- can be made); the first job stops with a checkpoint REHEARSAL_STOP_MARGIN_S (default 20) s
# before its limit, the next one resumes and finishes; checked: sacct shows both, losses and weights equal an
# uninterrupted run's (timelimit_check.txt).
# REHEARSAL_NODES=N (2..9, with REHEARSAL_TRAIN_ONLY): the nodes are N network namespaces of this machine (each its
# own address, hostname, slurmd and 2 CPUs: scripts/cluster/slurm_netns.sh) and the plan asks for N nodes, 2 processes
# each; checked: one task on each node, world size 2N, losses against a 1-process run (nodes_check.txt).
# Overlays and checks of both: scripts/cluster/slurm_scenarios.py.  Needs root (daemons, apt-get, namespaces).
# Output: $REHEARSAL_DIR/evidence/ (summary.txt, snakemake.log, sacct.txt, slurmctld_jobs.txt, testonly.txt,
# profile_settings.txt: what Snakemake resolves for --profile profiles/slurm and profiles/slurm-rehearsal
# (scripts/cluster/profile_settings.py); train_sacct.txt, train_check.txt with REHEARSAL_TRAIN_ONLY).
# Exit status: the DAG run's, else 1 when the training job's check fails.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CONFIGFILES=("$@")
TRAIN_ONLY="${REHEARSAL_TRAIN_ONLY:-}"
if [ ${#CONFIGFILES[@]} -eq 0 ]; then
  CONFIGFILES=(config/ci.yaml)
  [ -z "$TRAIN_ONLY" ] || CONFIGFILES=(config/paper.yaml config/rehearsal.yaml)
fi
[ -z "$TRAIN_ONLY" ] || REHEARSAL_SKIP_TESTONLY=1
TIME_LIMIT="${REHEARSAL_TIME_LIMIT:-}" STOP_MARGIN="${REHEARSAL_STOP_MARGIN_S:-20}"
if [ -n "$TIME_LIMIT" ] && { [ -z "$TRAIN_ONLY" ] || ! [[ "$TIME_LIMIT" =~ ^[1-9][0-9]*$ ]]; }; then
  echo "REHEARSAL_TIME_LIMIT=$TIME_LIMIT: give whole minutes (>= 1) and REHEARSAL_TRAIN_ONLY=<model>" >&2; exit 2
fi
NODES="${REHEARSAL_NODES:-1}"
if [ "$NODES" != 1 ] && { [ -z "$TRAIN_ONLY" ] || ! [[ "$NODES" =~ ^[2-9]$ ]]; }; then
  echo "REHEARSAL_NODES=$NODES: give 2..9 nodes and REHEARSAL_TRAIN_ONLY=<model>" >&2; exit 2
fi
[ "$NODES" = 1 ] || [ -z "$TIME_LIMIT" ] || { echo "REHEARSAL_NODES and REHEARSAL_TIME_LIMIT: one at a time" >&2; exit 2; }
T="${REHEARSAL_DIR:-/tmp/slurm-rehearsal}"
CLUSTER=rehearsal PARTITION=rehearsal ACCOUNT=rehearsal
# ports of their own, so that a SLURM or MariaDB already on this machine is not touched
CTLD_PORT=16817 SLURMD_PORT=16818 DBD_PORT=16819 DB_PORT=13306

log() { echo "[rehearsal $(date +%T)] $*" >&2; }
[ "$(id -u)" = 0 ] || { echo "needs root (it starts munged, slurmctld, slurmd, slurmdbd, mariadbd)" >&2; exit 1; }

if [ -z "${REHEARSAL_SKIP_INSTALL:-}" ] && { ! command -v slurmctld || ! command -v slurmd || ! command -v slurmdbd \
    || ! command -v munged || ! command -v mariadbd; } >/dev/null; then
  log "installing slurm-wlm, slurmdbd, munge, mariadb-server (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm slurmdbd munge mariadb-server >/dev/null
fi

# ---- stop whatever a previous run of this script left behind (its own pid files only), start afresh ----------------
stop_daemons() {
  local f pid
  for f in "$T"/run/slurmd*.pid "$T"/run/{slurmctld,slurmdbd,mariadbd,munged}.pid; do
    [ -f "$f" ] || continue
    pid="$(cat "$f" 2>/dev/null || true)"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
  done
  [ "$NODES" = 1 ] || bash "$REPO/scripts/cluster/slurm_netns.sh" down
  # slurmd's link to its cached configuration (configless): only when it points into this scratch directory
  case "$(readlink /run/slurm/conf 2>/dev/null)" in "$T"/*) rm -f /run/slurm/conf ;; esac
}
stop_daemons
rm -rf "$T/etc" "$T/state" "$T/spool" "$T/log" "$T/run" "$T/db" "$T/work" "$T/bin"
mkdir -p "$T"/{etc,state,spool,log,run,db,work,bin,evidence}
rm -f "$T"/evidence/*
trap 'rc=$?; log "stopping the daemons"; stop_daemons; exit $rc' EXIT
trap 'exit 130' INT TERM

HOST="$(hostname -s)"
read -r MEM_MB < <(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo)
CPUS=2  # what this machine's jobs share (issue 24); the node declares no GPU
CTLD_ADDR="$HOST" NODE_LINES="NodeName=$HOST CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN" PART_NODES="$HOST" SLURMD_AT=
if [ "$NODES" != 1 ]; then  # N nodes in network namespaces, each declaring the machine's 2 CPUs (they share them)
  CTLD_ADDR="$HOST(10.77.0.1)" PART_NODES="rh-node[1-$NODES]" SLURMD_AT=-%n NODE_LINES=
  for i in $(seq "$NODES"); do
    NODE_LINES+="NodeName=rh-node$i NodeAddr=10.77.0.$((i + 1)) CPUs=$CPUS RealMemory=$((MEM_MB / NODES)) State=UNKNOWN"$'\n'
  done
fi

# ---- configuration (SLURM_CONF points every client -- sbatch, sacct, squeue, the plugin's calls -- here) ----------
export SLURM_CONF="$T/etc/slurm.conf"
cat >"$SLURM_CONF" <<EOF
ClusterName=$CLUSTER
SlurmctldHost=$CTLD_ADDR
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool$SLURMD_AT
SlurmctldPidFile=$T/run/slurmctld.pid
SlurmdPidFile=$T/run/slurmd$SLURMD_AT.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd$SLURMD_AT.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups in a container: track processes by their parent, bind nothing
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=10
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
# a GPU cluster declares gpu GRES: --gpus=<model>:<n> is then a valid request that this GPU-less node cannot meet
GresTypes=gpu
# refuse at submission (not: pend forever) a job beyond the partition's limits, or with an unknown account
EnforcePartLimits=ALL
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
AccountingStorageEnforce=associations,limits
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
AccountingStoreFlags=job_comment
MinJobAge=300
ReturnToService=2
SlurmdParameters=config_overrides
MpiDefault=none
# configless, like many clusters: slurmd fetches this file from slurmctld and caches it where the clients on the
# node (srun inside a job: the executor plugin's job step drops SLURM_CONF from its environment) find it
SlurmctldParameters=enable_configless
$NODE_LINES
PartitionName=$PARTITION Nodes=$PART_NODES Default=YES MaxTime=2-00:00:00 State=UP
# a GPU node that never comes up (no slurmd answers on its port; DOWN): a held job submitted to it is checked for its
# syntax, partition, account, CPU count and time limit (GPU type/count and memory only once a node is up), then
# cancelled; nothing ever runs there (--test-only refuses any request on a DOWN or not-responding node)
NodeName=gpu-phantom NodeAddr=127.0.0.1 Port=16899 CPUs=64 RealMemory=1000000 Gres=gpu:a100:8 State=DOWN Reason=phantom
PartitionName=gpu-phantom Nodes=gpu-phantom Default=NO MaxTime=2-00:00:00 State=UP
EOF
printf 'ConstrainCores=no\nConstrainRAMSpace=no\n' >"$T/etc/cgroup.conf"
: >"$T/etc/gres.conf"
cat >"$T/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
LogFile=$T/log/slurmdbd.log
PidFile=$T/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=rehearsal
StorageLoc=slurm_acct_db
EOF
chmod 600 "$T/etc/slurmdbd.conf"

# ---- munge (the packaged key; its socket is the default one every SLURM daemon and client uses) ------------------
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  [ -s /etc/munge/munge.key ] || { mungekey --create 2>/dev/null || /usr/sbin/create-munge-key; }
  chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
  mkdir -p /run/munge /var/log/munge /var/lib/munge; chown munge:munge /run/munge /var/log/munge /var/lib/munge
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
  sleep 1
  cp /run/munge/munged.pid "$T/run/munged.pid"
  munge -n | unmunge >/dev/null
  log "munged started"
else
  log "munged already running (kept)"
fi

# ---- MariaDB: a private data directory on 127.0.0.1:$DB_PORT --------------------------------------------------------
chown mysql:mysql "$T/db"
mariadb-install-db --user=mysql --datadir="$T/db/data" --auth-root-authentication-method=socket >"$T/log/mariadb-install.log" 2>&1
chown -R mysql:mysql "$T/db"
mariadbd --user=mysql --datadir="$T/db/data" --socket="$T/db/mysqld.sock" --port=$DB_PORT --bind-address=127.0.0.1 \
  --pid-file="$T/db/mariadbd.pid" --log-error="$T/db/mariadbd.log" --innodb-buffer-pool-size=64M \
  --skip-log-bin >/dev/null 2>&1 &  # (runs as mysql: its files under $T/db)
echo $! >"$T/run/mariadbd.pid"
for _ in $(seq 120); do mariadb --socket="$T/db/mysqld.sock" -e 'select 1' >/dev/null 2>&1 && break; sleep 0.5; done
mariadb --socket="$T/db/mysqld.sock" -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'rehearsal';
  CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'rehearsal';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
log "mariadbd up (port $DB_PORT)"

# ---- slurmdbd, slurmctld, slurmd ------------------------------------------------------------------------------------
slurmdbd
for _ in $(seq 60); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.5; done
sacctmgr -i add cluster "$CLUSTER" >/dev/null
sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description=rehearsal Organization=rehearsal >/dev/null
sacctmgr -i add user root Account="$ACCOUNT" DefaultAccount="$ACCOUNT" Cluster="$CLUSTER" >/dev/null
log "slurmdbd up; account $ACCOUNT"
slurmctld
for _ in $(seq 60); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.5; done
if [ "$NODES" = 1 ]; then
  env -u SLURM_CONF slurmd --conf-server "$HOST:$CTLD_PORT"
else
  bash "$REPO/scripts/cluster/slurm_netns.sh" up "$NODES"
  for i in $(seq "$NODES"); do
    bash "$REPO/scripts/cluster/slurm_netns.sh" run "$i" env -u SLURM_CONF slurmd -N "rh-node$i" --conf-server "10.77.0.1:$CTLD_PORT"
  done
fi
idle() { [ "$(sinfo -h -N -p "$PARTITION" -o %T 2>/dev/null | grep -cx idle)" = "$NODES" ]; }
for _ in $(seq 60); do idle && break; sleep 0.5; done
sinfo -N -o '%N %c %m %G %P %T' | tee "$T/evidence/sinfo.txt" >&2
idle || { log "$NODES node(s) not idle"; tail -20 "$T"/log/slurmd*.log "$T/log/slurmctld.log"; exit 1; }

# ---- the workload: a copy of the working tree with a fresh results/ ------------------------------------------------
W="$T/work/repo"
# a clone at the working tree's commit (the results record it), then the working tree's files over it: uncommitted
# changes are rehearsed too
copy_tree() {
  git clone -q --shared --no-checkout "$REPO" "$1"
  git -C "$1" checkout -q --detach "$(git -C "$REPO" rev-parse HEAD)"
  (cd "$REPO" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$1"
}
copy_tree "$W"
[ -e "$REPO/../shared" ] && ln -sfn "$(cd "$REPO/../shared" && pwd)" "$T/work/shared"  # shared_dir: ../shared
cd "$W"
export PYTHONPATH="$W${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# the settings Snakemake resolves for both profiles (each with the workflow profile profiles/default beside it)
if python scripts/cluster/profile_settings.py profiles/slurm profiles/slurm-rehearsal >"$T/evidence/profile_settings.txt" 2>&1; then
  profiles="resolved settings of profiles/slurm and profiles/slurm-rehearsal in profile_settings.txt"
else
  profiles="FAILED to resolve them (profile_settings.txt)"
fi
TARGET=()
if [ -n "$TRAIN_ONLY" ]; then  # the model's training metrics under the run's results directory (plan.run_dir)
  TARGET=("$(python - "$TRAIN_ONLY" "${CONFIGFILES[@]}" <<'PY'
import sys
from fastdllm_core.cli.plan_training import load_config  # the DAG's merge over config/config.yaml, its schema
config = load_config(sys.argv[2:])
from fastdllm_dag.plan import models as plan
model = sys.argv[1]
if "train" not in (config["models"].get(model) or {}):
    sys.exit(f"REHEARSAL_TRAIN_ONLY={model!r}: no such trained model in {sys.argv[2:]} "
             f"(trained: {sorted(m for m, v in config['models'].items() if 'train' in (v or {}))})")
print(f"{plan.run_dir(config)}/models/{model}/training_metrics.csv")
PY
)")
fi
if [ -n "$TIME_LIMIT" ]; then
  log "time-limit scenario: the training job's inputs first, then its size on this machine"
  snakemake --profile profiles/slurm-rehearsal "${TARGET[@]}" --omit-from train_model --configfile "${CONFIGFILES[@]}" \
    >"$T/evidence/snakemake_inputs.log" 2>&1 || { log "inputs failed"; tail -20 "$T/evidence/snakemake_inputs.log"; exit 1; }
  python scripts/cluster/slurm_scenarios.py timelimit-overlay "$TRAIN_ONLY" "$TIME_LIMIT" "$STOP_MARGIN" "$T/evidence/timelimit.yaml" \
    "${CONFIGFILES[@]}" 2>"$T/evidence/timelimit_overlay.log" | tail -1 >&2
  CONFIGFILES+=("$T/evidence/timelimit.yaml")
  export FASTDLLM_STOP_MARGIN_S="$STOP_MARGIN"
fi
if [ "$NODES" != 1 ]; then
  python scripts/cluster/slurm_scenarios.py nodes-overlay "$TRAIN_ONLY" "$NODES" "$T/evidence/nodes.yaml"
  CONFIGFILES+=("$T/evidence/nodes.yaml")
fi
# shellcheck disable=SC2206
CMD=(snakemake --profile profiles/slurm-rehearsal ${REHEARSAL_SNAKEMAKE_ARGS:-} "${TARGET[@]}" --configfile "${CONFIGFILES[@]}")
log "running: ${CMD[*]}  (in $W)"
start=$(date +%s)
set +e
if [ -z "${REHEARSAL_SKIP_WORKLOAD:-}" ]; then "${CMD[@]}" >"$T/evidence/snakemake.log" 2>&1; else : >"$T/evidence/snakemake.log"; fi
smk_rc=$?
set -e
wall=$(( $(date +%s) - start ))
tail -5 "$T/evidence/snakemake.log" >&2

sleep 2
sacct -X --allocations --starttime "$(date -d @"$start" +%Y-%m-%dT%H:%M:%S)" \
  --format=JobID,JobName%38,Partition,Account,AllocCPUS,ReqMem,Timelimit,State,ExitCode,Elapsed,Comment%60 \
  >"$T/evidence/sacct.txt" 2>&1 || true
n_sub=$(grep -c 'has been submitted with SLURM jobid' "$T/evidence/snakemake.log" || true)
n_done=$(sacct -X -n -P --starttime "$(date -d @"$start" +%Y-%m-%dT%H:%M:%S)" -o State | grep -c '^COMPLETED$' || true)
n_other=$(sacct -X -n -P --starttime "$(date -d @"$start" +%Y-%m-%dT%H:%M:%S)" -o State | grep -vc '^COMPLETED$' || true)
grep -E 'sched: Allocate|_job_complete: JobId=.* done' "$T/log/slurmctld.log" >"$T/evidence/slurmctld_jobs.txt" || true

# ---- the training job against the profile's request (REHEARSAL_TRAIN_ONLY) -----------------------------------------
train="not run (REHEARSAL_TRAIN_ONLY unset)"; check_rc=0
if [ -n "$TRAIN_ONLY" ]; then
  train_id=$(sacct -X -n -P --starttime "$(date -d @"$start" +%Y-%m-%dT%H:%M:%S)" -o JobID,Comment \
    | awk -F'|' -v c="rule_train_model_wildcards_$TRAIN_ONLY" '$2 == c {print $1}' | tail -1)
  if [ -z "$train_id" ]; then
    echo "TRAIN CHECK FAILED: no train_model job of $TRAIN_ONLY in sacct" | tee "$T/evidence/train_check.txt" >&2
    check_rc=1
  else
    fmt=JobID,JobName,NNodes,NTasks,AllocCPUS,State
    sacct -j "$train_id" --format="$fmt%12,ExitCode,Elapsed" >"$T/evidence/train_sacct.txt" 2>&1 || true
    sacct -j "$train_id" -n -P --format="$fmt" >"$T/evidence/train_sacct_parsable.txt"
    grep -E 'training processes|final checkpoint|torch.distributed|rank' "$W/$(dirname "${TARGET[0]}")/../../logs/train/$TRAIN_ONLY.log" \
      >"$T/evidence/train_log_excerpt.txt" 2>/dev/null || true
    set +e
    python "$REPO/scripts/cluster/slurm_train_check.py" "$T/evidence/train_sacct_parsable.txt" \
      profiles/slurm-rehearsal/config.yaml "${TARGET[0]}" "$NODES" >"$T/evidence/train_check.txt" 2>&1
    check_rc=$?
    set -e
    cat "$T/evidence/train_sacct.txt" "$T/evidence/train_check.txt" >&2
  fi
  train="job $train_id: $(tail -1 "$T/evidence/train_check.txt")"
  if [ -n "$TIME_LIMIT" ]; then
    sacct -X -n -P --starttime "$(date -d @"$start" +%Y-%m-%dT%H:%M:%S)" -o JobID,Comment,State,ExitCode,Timelimit \
      >"$T/evidence/timelimit_sacct.txt"
    set +e
    python scripts/cluster/slurm_scenarios.py timelimit-check "$TRAIN_ONLY" "$T/evidence/timelimit_sacct.txt" \
      "$(dirname "${TARGET[0]}")/run" .snakemake/slurm_logs/rule_train_model "$(dirname "${TARGET[0]}")/../../logs/train" \
      2>"$T/evidence/timelimit_check.log" \
      | tee "$T/evidence/timelimit_check.txt" >&2
    [ "${PIPESTATUS[0]}" = 0 ] || check_rc=1
    set -e
    train="$train; $(tail -1 "$T/evidence/timelimit_check.txt")"
  fi
  if [ "$NODES" != 1 ]; then
    set +e
    python scripts/cluster/slurm_scenarios.py nodes-check "$(dirname "${TARGET[0]}")/run" 2>"$T/evidence/nodes_check.log" \
      | tee "$T/evidence/nodes_check.txt" >&2
    [ "${PIPESTATUS[0]}" = 0 ] || check_rc=1
    set -e
    train="$train; $(tail -1 "$T/evidence/nodes_check.txt")"
  fi
fi

# ---- profiles/slurm (the GPU cluster's profile) against this controller: sbatch --test-only ------------------------
testonly=skipped
if [ -z "${REHEARSAL_SKIP_TESTONLY:-}" ]; then
  # a `sbatch` first on PATH that asks the controller with --test-only (nothing is queued), records the call and its
  # answer, and then fails, so that Snakemake submits each job that is ready once (+ the profile's retry) and stops
  # (asked twice: as Snakemake built it with --test-only, on this 2-CPU node's partition: the GPU-less node refuses
  # GPUs; then the same call held on the phantom GPU node's partition, then cancelled)
  cat >"$T/bin/sbatch" <<EOF
#!/usr/bin/env bash
args=("\$@")
gpu=(); prev=; for a in "\${args[@]}"; do if [ "\$prev" = -p ]; then gpu+=(gpu-phantom); else gpu+=("\$a"); fi; prev=\$a; done
out=\$(/usr/bin/sbatch --test-only "\${args[@]}" 2>&1); rc=\$?
# a DOWN node fails every --test-only; a held submission is checked against its configuration, then cancelled
out2=\$(/usr/bin/sbatch --hold "\${gpu[@]}" 2>&1); rc2=\$?
if [ \$rc2 = 0 ]; then id=\${out2%%;*}; out2="accepted: \$(/usr/bin/squeue -h -j "\$id" -O 'JobID:6,State:8,Reason:12,Partition:12,tres-per-job:16,NumCPUs:4,MinMemory:8,TimeLimit:12')"; /usr/bin/scancel "\$id"; fi
exec 9>>"$T/evidence/testonly_calls.lock"; flock 9
{ printf 'CALL: sbatch --test-only'; for a in "\${args[@]}"; do case "\$a" in --wrap=*) printf ' --wrap=...';; *) printf ' %q' "\$a";; esac; done
  printf '\nRC: %s\nANSWER: %s\nRC(-p gpu-phantom --hold): %s\nANSWER(-p gpu-phantom --hold): %s\n\n' "\$rc" "\$out" "\$rc2" "\$out2"
} >>"$T/evidence/testonly_calls.txt"
echo "test-only: \$out / on gpu-phantom: \$out2" >&2
exit 1
EOF
  chmod +x "$T/bin/sbatch"
  TW="$T/work/testonly"
  copy_tree "$TW"
  # shellcheck disable=SC2086
  ( cd "$TW" && PATH="$T/bin:$PATH" timeout 300 snakemake --profile profiles/slurm \
      --configfile ${REHEARSAL_TESTONLY_CONFIGS:-config/paper.yaml} --keep-going --slurm-init-seconds-before-status-checks 1 >"$T/evidence/testonly_snakemake.log" 2>&1 ) || true
  grep -E '^(CALL|RC|ANSWER)' "$T/evidence/testonly_calls.txt" >"$T/evidence/testonly.txt" 2>/dev/null || true
  # controls: what a held submission on the phantom node refuses (syntax, CPUs, time, account) and what it defers
  # to a node that is up (GPU type and count, memory): "accepted" above means no more than the first
  for req in "--gpus=a100:x" "--gpus=a100:8 --cpus-per-task=65" "--gpus=a100:1 -t 4000" "--gpus=a100:1 -A nosuchaccount" \
             "--gpus=a100:9" "--gpus=h100:1" "--gpus=a100:1 --mem 2000000"; do
    # shellcheck disable=SC2086
    if out=$(sbatch --parsable --hold -p gpu-phantom --ntasks=1 $req --wrap=true 2>&1); then
      scancel "${out%%;*}" || true; out="accepted (job $out)"
    fi
    echo "CONTROL: sbatch --hold -p gpu-phantom $req -> $out"
  done >>"$T/evidence/testonly.txt" 2>&1 || true
  testonly="$(grep -c '^CALL' "$T/evidence/testonly.txt" || true) sbatch calls; on gpu-phantom accepted: \
$(grep -c '^RC(-p gpu-phantom --hold): 0' "$T/evidence/testonly.txt" || true), refused: \
$(grep -c '^RC(-p gpu-phantom --hold): [1-9]' "$T/evidence/testonly.txt" || true) (testonly.txt)"
fi

{
  echo "command:   (cd <copy of the working tree>; ${CMD[*]})"
  echo "configs:   ${CONFIGFILES[*]}"
  echo "result:    snakemake exit $smk_rc; $n_sub jobs submitted through sbatch; sacct: $n_done COMPLETED, $n_other other"
  echo "wall time: ${wall} s (snakemake alone; cluster start-up not counted)"
  echo "nodes:     $(grep " $PARTITION\* " "$T/evidence/sinfo.txt" | paste -sd ';')"
  echo "profiles:  $profiles"
  echo "profiles/slurm check: $testonly"
  echo "training job check: $train"
} | tee "$T/evidence/summary.txt" >&2
cp "$T/log/slurmctld.log" "$T/log/slurmdbd.log" "$T/evidence/" 2>/dev/null || true
[ "$smk_rc" != 0 ] || smk_rc=$check_rc
exit "$smk_rc"
