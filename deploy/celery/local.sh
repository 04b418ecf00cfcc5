#!/usr/bin/env bash
# fw_assets on Dagster's Celery integration, every service on this machine: Redis (broker and result
# backend), PostgreSQL (the instance), FW_WORKERS Celery workers (default 2), each a host of its own
# (worker-1, worker-2, ...), the daemon and the webserver. Each runs in its own process group, its
# pid written down under $DAGSTER_HOME/local/pids. For trying the deployment out, and for the tests.
#
#   deploy/celery/local.sh up       start whatever of it is not running, a line on stderr for each;
#                                   prints the webserver's URL last
#   deploy/celery/local.sh status   one line per running process: <role> <host> <pid>
#   deploy/celery/local.sh down     stop every process `up` started, and nothing else
#   deploy/celery/local.sh env      the environment the dagster CLI needs for this instance:
#                                   eval "$(deploy/celery/local.sh env)"
#
# Honours FW_SOURCE_DIR and FW_OUTPUT_DIR (fw_assets' defaults when unset) and DAGSTER_HOME (default
# ./.dagster-celery), where the instance's dagster.yaml is written from deploy/celery/dagster.yaml
# and local/ keeps the pids, logs, ports, passwords, folders and both databases (kept by `down`,
# reused by `up`). local/ belongs to the user running local.sh: mode 0700 (0710 as root, whose
# PostgreSQL runs as the postgres user), every file in it 0600. Redis and PostgreSQL listen on
# 127.0.0.1 and ask for passwords generated at the first `up`; none is ever on a command line.
# `up` and `down` wait for each other (a lock in local/).
# FW_WORKER_CORES: cores per worker (default: this machine's cores shared out, one set per worker).
# Needs Debian's redis-server and postgresql, and fw_assets installed with the postgres and celery
# extras (in the active virtualenv, else the repo's .venv, else python3's on the PATH).
set -euo pipefail
USER_UMASK=$(umask)  # the services write outputs and logs as the user's other programs do
umask 077            # what local.sh itself writes is the user's alone

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [ -n "${VIRTUAL_ENV:-}" ]; then BIN=$VIRTUAL_ENV/bin
elif [ -x "$REPO/.venv/bin/python" ]; then BIN=$REPO/.venv/bin
else BIN=$(dirname "$(command -v python3)")
fi
PYTHON=$BIN/python
export DAGSTER_HOME=$(realpath -m "${DAGSTER_HOME:-.dagster-celery}")
STATE=$DAGSTER_HOME/local
PIDS=$STATE/pids
LOGS=$STATE/logs
WORKERS=${FW_WORKERS:-2}
MARK="# Written by deploy/celery/local.sh from deploy/celery/dagster.yaml."
STOP_GRACE_SECONDS=30

die() { echo "local.sh: $*" >&2; exit 1; }

free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

password() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }

# The ports and passwords of this deployment: chosen at the first `up`, the same ever after.
write_env_once() {
    [ -f "$STATE/env" ] && return
    cat > "$STATE/env" <<EOF
DAGSTER_HOME=$DAGSTER_HOME
FW_REDIS_URL=redis://:$(password)@127.0.0.1:$(free_port)/0
DAGSTER_PG_HOST=127.0.0.1
DAGSTER_PG_PORT=$(free_port)
DAGSTER_PG_USERNAME=fw_dagster
DAGSTER_PG_PASSWORD=$(password)
DAGSTER_PG_DB=fw_dagster
FW_WEBSERVER_PORT=$(free_port)
EOF
}

# A deployment whose env an older local.sh wrote has a Redis without a password: give it one.
add_redis_password() {
    grep -q '^FW_REDIS_URL=redis://:[0-9a-f]*@' "$STATE/env" && return
    alive "$PIDS/redis" && die "this deployment's Redis runs without a password (local/ written by an older local.sh): run down, then up"
    sed -i "s|^FW_REDIS_URL=redis://|FW_REDIS_URL=redis://:$(password)@|" "$STATE/env"
}

# The state folder, private to this user; as root, PostgreSQL's user may pass through it (and the
# logs folder) to its data and its log, which it owns.
make_state_private() {
    (umask "$USER_UMASK"; mkdir -p "$DAGSTER_HOME")
    mkdir -p "$STATE" "$PIDS" "$LOGS"
    chmod -R go-rwx "$STATE"  # also what an older local.sh left readable
    if [ "$(id -u)" = 0 ]; then
        getent group postgres > /dev/null || die "PostgreSQL is not installed: apt-get install postgresql"
        chgrp postgres "$STATE" "$LOGS" && chmod 0710 "$STATE" "$LOGS"
    fi
}

# `up` and `down` one at a time: a second waits for the first (fd 9, closed in every service).
take_lock() {
    exec 9> "$STATE/lock"
    flock -n 9 || { echo "local.sh: waiting for another local.sh up or down on $DAGSTER_HOME" >&2; flock 9; }
}

default_folder() {  # fw_assets' default of FW_SOURCE_DIR or FW_OUTPUT_DIR, as an absolute path
    local function=source_dir
    [ "$1" = FW_OUTPUT_DIR ] && function=output_dir
    env -u FW_SOURCE_DIR -u FW_OUTPUT_DIR "$PYTHON" -c "from fw_assets import settings; print(settings.$function().resolve())"
}

# The folders every process reads: FW_SOURCE_DIR and FW_OUTPUT_DIR as given, else those the
# deployment runs with, else fw_assets' defaults. Changing them needs `down` first.
write_folders() {
    local name folder recorded
    for name in FW_SOURCE_DIR FW_OUTPUT_DIR; do
        recorded=$(sed -n "s/^$name=//p" "$STATE/folders" 2>/dev/null || true)
        folder=${!name:-}
        if [ -n "$folder" ]; then folder=$(realpath -m "$folder")
        elif [ -n "$recorded" ]; then folder=$recorded
        else folder=$(default_folder "$name")
        fi
        if [ -n "$recorded" ] && [ "$folder" != "$recorded" ] && running; then
            die "the running deployment reads $name=$recorded: run down first to change it"
        fi
        echo "$name=$folder"
    done > "$STATE/folders.new"
    mv "$STATE/folders.new" "$STATE/folders"
}

running() {  # a process of the deployment is running
    local file
    for file in "$PIDS"/*; do alive "$file" && return 0; done
    return 1
}

load_env() { set -a; . "$STATE/env"; [ ! -f "$STATE/folders" ] || . "$STATE/folders"; set +a; }

started_at() {  # the start time of process $1 (/proc/<pid>/stat field 22), empty if gone or a zombie
    local fields
    fields=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 0
    set -- $fields
    [ "$1" = Z ] || echo "${20}"
}

record() {  # record NAME PID: the pid and its start time (a pid reused later is not taken for it)
    echo "$2 $(started_at "$2")" > "$PIDS/$1"
}

pid_of() { cut -d' ' -f1 "$1"; }

alive() {  # the process recorded in pid file $1 is running
    local pid start
    [ -f "$1" ] || return 1
    read -r pid start < "$1"
    [ -n "$start" ] && [ "$(started_at "$pid")" = "$start" ]
}

start_group() {  # start_group NAME COMMAND...: in a new process group, recorded in pids/NAME; its files
    local name=$1; shift # made with the user's umask, or service_umask's
    (umask "${service_umask:-$USER_UMASK}"; exec setsid "$@") > "$LOGS/$name.log" 2>&1 < /dev/null 9>&- &
    record "$name" $!
}

wait_for() {  # wait_for WHAT SECONDS LOG COMMAND...
    local what=$1 seconds=$2 log=$3; shift 3
    local deadline=$((SECONDS + seconds))
    until "$@" > /dev/null; do
        if [ $SECONDS -ge $deadline ]; then
            echo "local.sh: gave up after ${seconds}s waiting for $what; the end of $log:" >&2
            tail -n 30 "$log" >&2 || true
            exit 1
        fi
        sleep 0.5
    done
}

postgres_binaries() {
    local folder
    folder=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -n "$folder" ] || folder=$(dirname "$(command -v initdb 2>/dev/null || echo /missing/initdb)")
    [ -x "$folder/initdb" ] || die "PostgreSQL is not installed: apt-get install postgresql"
    echo "$folder"
}

as_server_user() {  # initdb refuses root: as root, PostgreSQL runs as the user Debian's package made
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start_postgres() {
    local bin data=$STATE/postgres
    bin=$(postgres_binaries)
    if [ ! -f "$data/PG_VERSION" ]; then
        mkdir -p "$data"
        [ "$(id -u)" = 0 ] && chown postgres "$data"
        as_server_user test -w "$data" || die "the postgres user cannot write $data: put DAGSTER_HOME where the postgres user may enter"
        local pwfile
        pwfile=$(mktemp)
        echo "$DAGSTER_PG_PASSWORD" > "$pwfile"
        [ "$(id -u)" = 0 ] && chown postgres "$pwfile"
        as_server_user "$bin/initdb" -D "$data" -U "$DAGSTER_PG_USERNAME" --auth=scram-sha-256 \
            --pwfile="$pwfile" --encoding=UTF8 --locale=C > "$LOGS/initdb.log" 2>&1 || { rm -f "$pwfile"; die "initdb failed: $LOGS/initdb.log"; }
        rm -f "$pwfile"
    fi
    [ "$(id -u)" = 0 ] && touch "$LOGS/postgres.log" && chown postgres "$LOGS/postgres.log"
    as_server_user "$bin/pg_ctl" -D "$data" -l "$LOGS/postgres.log" -w -t 60 start \
        -o "-c listen_addresses=$DAGSTER_PG_HOST -p $DAGSTER_PG_PORT -c unix_socket_directories=''" > /dev/null 9>&- \
        || die "PostgreSQL did not start: $LOGS/postgres.log"
    record postgres "$(head -n 1 "$data/postmaster.pid")"  # pg_ctl starts it in a session of its own
    PGPASSWORD=$DAGSTER_PG_PASSWORD "$bin/psql" -h "$DAGSTER_PG_HOST" -p "$DAGSTER_PG_PORT" -U "$DAGSTER_PG_USERNAME" \
        -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DAGSTER_PG_DB'" | grep -q 1 \
        || PGPASSWORD=$DAGSTER_PG_PASSWORD "$bin/createdb" -h "$DAGSTER_PG_HOST" -p "$DAGSTER_PG_PORT" \
            -U "$DAGSTER_PG_USERNAME" "$DAGSTER_PG_DB"
}

redis_port() { echo "${FW_REDIS_URL##*:}" | cut -d/ -f1; }
redis_password() { local credentials=${FW_REDIS_URL#redis://:}; echo "${credentials%%@*}"; }

# Its settings in a file of this user's alone: the password never appears in `ps`.
start_redis() {
    command -v redis-server > /dev/null || die "Redis is not installed: apt-get install redis-server"
    mkdir -p "$STATE/redis"
    # Append-only file: queued runs and heartbeats survive a restart of Redis.
    cat > "$STATE/redis.conf" <<EOF
bind 127.0.0.1
port $(redis_port)
protected-mode yes
requirepass $(redis_password)
dir $STATE/redis
appendonly yes
save ""
EOF
    service_umask=077 start_group redis redis-server "$STATE/redis.conf"  # its files hold queued runs
    wait_for "Redis" 30 "$LOGS/redis.log" redis_answers
}

redis_answers() { REDISCLI_AUTH=$(redis_password) redis-cli -p "$(redis_port)" ping 2> /dev/null | grep -q PONG; }

write_instance_yaml() {
    local target=$DAGSTER_HOME/dagster.yaml
    if [ -f "$target" ] && ! head -n 1 "$target" | grep -qF "$MARK"; then
        die "$target exists and was not written by local.sh: give local.sh a DAGSTER_HOME of its own"
    fi
    { echo "$MARK"; sed "s/^\(    max_concurrent_runs:\).*/\1 $WORKERS/" "$REPO/deploy/celery/dagster.yaml"; } > "$target"
}

worker_cpus() {  # worker_cpus I: the CPUs of worker I (1-based), FW_WORKER_CORES of them
    "$PYTHON" - "$1" "$WORKERS" "${FW_WORKER_CORES:-}" <<'EOF'
import os, sys
index, workers, cores = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
cpus = sorted(os.sched_getaffinity(0))
cores = int(cores) if cores else max(1, len(cpus) // workers)
print(",".join(str(cpus[((index - 1) * cores + i) % len(cpus)]) for i in range(cores)))
EOF
}

started() {  # started NAME PATTERN: process NAME is running and its log says PATTERN (dies if it exited)
    alive "$PIDS/$1" || { tail -n 30 "$LOGS/$1.log" >&2; die "$1 exited (its log: $LOGS/$1.log)"; }
    grep -q "$2" "$LOGS/$1.log"
}

start_worker() {
    local index=$1 cpus
    cpus=$(worker_cpus "$index")
    start_group "worker-$index" taskset -c "$cpus" "$PYTHON" -m fw_assets.deploy.celery_worker --host "worker-$index"
    wait_for "worker-$index" 120 "$LOGS/worker-$index.log" started "worker-$index" "ready\."
}

webserver_answers() { curl -sf "http://127.0.0.1:$FW_WEBSERVER_PORT/server_info" > /dev/null; }

starting() {  # starting WHAT LOG: one line on stderr per service `up` starts, before its wait
    echo "local.sh: starting $1 (log: $LOGS/$2.log)" >&2
}

up() {
    make_state_private
    take_lock
    write_env_once
    add_redis_password
    write_folders
    load_env
    (umask "$USER_UMASK"; mkdir -p "$FW_OUTPUT_DIR")
    write_instance_yaml
    alive "$PIDS/redis" || starting "Redis on 127.0.0.1:$(redis_port)" redis
    alive "$PIDS/redis" || start_redis
    alive "$PIDS/postgres" || starting "PostgreSQL on $DAGSTER_PG_HOST:$DAGSTER_PG_PORT" postgres
    alive "$PIDS/postgres" || start_postgres
    # The schemas first: two services creating them at once race.
    (cd "$DAGSTER_HOME" && "$BIN/dagster" instance migrate > "$LOGS/migrate.log" 2>&1) \
        || die "dagster instance migrate failed: $LOGS/migrate.log"
    local index
    for index in $(seq 1 "$WORKERS"); do
        alive "$PIDS/worker-$index" || starting "Celery worker worker-$index" "worker-$index"
        alive "$PIDS/worker-$index" || start_worker "$index"
    done
    alive "$PIDS/daemon" || starting "the Dagster daemon" daemon
    # A backfill launched while PostgreSQL is away waits for it (docs/operations.md).
    alive "$PIDS/daemon" || start_group daemon env DAGSTER_BACKFILL_RETRY_DEFINITION_CHANGED_ERROR=1 \
        "$BIN/dagster-daemon" run -w "$REPO/workspace.yaml"
    if ! alive "$PIDS/webserver"; then
        starting "the webserver on http://127.0.0.1:$FW_WEBSERVER_PORT" webserver
        start_group webserver "$BIN/dagster-webserver" -h 127.0.0.1 -p "$FW_WEBSERVER_PORT" \
            -w "$REPO/workspace.yaml"
    fi
    wait_for "the webserver" 180 "$LOGS/webserver.log" webserver_answers
    echo "http://127.0.0.1:$FW_WEBSERVER_PORT"
}

role_and_host() {  # of pid file $1
    case $(basename "$1") in
        worker-*) echo "worker $(basename "$1")" ;;
        *) echo "$(basename "$1") $(hostname)" ;;
    esac
}

status() {
    local file missing=0
    for file in "$PIDS"/*; do
        [ -e "$file" ] || continue
        if alive "$file"; then echo "$(role_and_host "$file") $(pid_of "$file")"; else missing=1; fi
    done
    return $((missing * 3))
}

descendants() {  # every process below pid $1 (some start sessions of their own)
    ps -eo pid=,ppid= | awk -v root="$1" '
        { parent[$1] = $2 }
        END { for (pid in parent) { p = parent[pid]; while (p > 1) { if (p == root) { print pid; break } p = parent[p] } } }'
}

stop_groups() {  # SIGTERM the groups of the pid files given, all at once, then SIGKILL what is left of them and below them
    local file pid leaders=() family=()
    for file in "$@"; do
        alive "$file" || continue
        pid=$(pid_of "$file")
        leaders+=("$pid")
        family+=($(descendants "$pid"))
        kill -TERM -- "-$pid" 2>/dev/null || true
    done
    local deadline=$((SECONDS + STOP_GRACE_SECONDS))
    for pid in "${leaders[@]}"; do
        while [ -n "$(started_at "$pid")" ] && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    done
    for pid in "${leaders[@]}"; do
        kill -KILL -- "-$pid" 2>/dev/null || true
        family+=("$pid" $(descendants "$pid"))
    done
    for pid in "${family[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    rm -f "$@"
}

down() {
    [ -d "$PIDS" ] || return 0
    take_lock
    [ -f "$STATE/env" ] && load_env
    # Together: a worker stopped mid-run marks its run failed (to be retried) in PostgreSQL.
    stop_groups "$PIDS/webserver" "$PIDS/daemon" "$PIDS"/worker-*
    if alive "$PIDS/postgres"; then
        as_server_user "$(postgres_binaries)/pg_ctl" -D "$STATE/postgres" -m fast -w stop > /dev/null || stop_groups "$PIDS/postgres"
    fi
    rm -f "$PIDS/postgres"
    stop_groups "$PIDS/redis"
    return 0
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) status ;;
    env) [ -f "$STATE/folders" ] || die "nothing set up under $DAGSTER_HOME yet: run up first"
         cat "$STATE/env" "$STATE/folders" | sed 's/^/export /' ;;
    *) echo "usage: $0 up|status|down|env" >&2; exit 2 ;;
esac
