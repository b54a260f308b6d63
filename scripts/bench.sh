#!/usr/bin/env bash
# Measures POST /v1/check against a bare echo/v4 server (tools/baseline)
# with the project's load generator (tools/loadgen) and prints, per
# scenario and round, quotad's req/s over the baseline's, and the round
# trips to PostgreSQL or Redis per check quotad made in the run (from its
# /metrics). `make bench` runs it; docs/benchmarks.md describes the
# scenarios.
#
# Most scenarios prime quotad (one check per customer) before they are
# measured. cold, longtail and sparse do not: each starts by restarting
# quotad (a fresh process, its caches empty). cold measures the first
# BENCH_DURATION after the restart, without warm-up; longtail runs twice
# per round and reports its second run; sparse runs three times per round
# and also reports quotad's memory per customer seen (VmRSS growth over
# the distinct customers its three runs sent). upsert runs sparse's load
# against tools/upsertserver instead of quotad: the naive design, one
# atomic upsert and one commit per check, measured alongside.
#
# Needs Go, curl, psql, createdb and dropdb, and a PostgreSQL on
# $PGHOST:$PGPORT that user $PGUSER reaches without a password, as for
# `make run`. It drops and recreates the database $BENCH_DATABASE.
# The scenarios with Redis (short-redis, mixed-redis, mixed-redis-2proc)
# also need redis-cli and a Redis at $BENCH_REDIS_URL; the script deletes
# every key under $BENCH_REDIS_PREFIX there when it starts and when it ends.
#
# Settings, from the environment (make passes its command-line variables):
#   BENCH_CONC=64         load generator workers, one connection each
#   BENCH_DURATION=8s     measured time of each run
#   BENCH_WARMUP=2s       unmeasured warm-up before each run
#   BENCH_ROUNDS=2        rounds; each runs every scenario
#   BENCH_SCENARIOS="mixed short hot mixed-request-id mixed-2proc short-redis mixed-redis mixed-redis-2proc reserve-commit items credits subjects entitlements"
#                         the default; the others are cold, longtail,
#                         sparse, upsert (BENCH_SCENARIOS="cold longtail
#                         sparse upsert") and short-apikey (short's load
#                         sent by API key, one key per customer), grpc
#                         (mixed's checks over Envoy's rate limit service,
#                         gRPC, paired with quotad's HTTP check rather than
#                         the baseline); items (a check of two metrics,
#                         api_calls and exports, all or nothing), credits (a
#                         check of tokens, which draw on the credit pool
#                         credits at a credit per 100) and subjects (limits
#                         per subject: BENCH_SUBJECT_KEYS subjects, 100 per
#                         customer, drawn Zipf-distributed, exponent 1.1);
#                         entitlements (GET /v1/customers/{id}/entitlements
#                         of warm customers: no check; its per-check figures
#                         are per request).
#                         reserve-commit's requests are
#                         pairs: a reservation of 10 units, then its commit
#                         at a cost drawn from 0..9 (loadgen -commit-below;
#                         net/http client only); its round trips per check
#                         are the reserves' (the commits' are not in the
#                         check histogram)
#   BENCH_KEYS=10000      customers in each customer set of the scenarios
#                         but longtail and sparse
#   BENCH_LONGTAIL_KEYS=100000
#                         customers of longtail, drawn Zipf-distributed
#                         (exponent 1.1, key 0 the most frequent)
#   BENCH_SPARSE_KEYS=1000000
#                         customers of sparse, drawn uniformly (inserted
#                         only when sparse runs)
#   BENCH_SUBJECT_KEYS=100000
#                         subjects of the subjects scenario, a hundred per
#                         customer (inserted only when it runs)
#   BENCH_ALGORITHM=      the algorithm of the plans' short windows
#                         (sliding_window when empty; a sliding_log's limits
#                         are 10000, which the hot scenario passes: leave
#                         hot out of BENCH_SCENARIOS with it)
#   BENCH_CLIENT=net/http how the load generator sends requests: net/http
#                         (an http.Client per worker, as a backend would) or
#                         raw (requests written by hand: a cheaper generator,
#                         so the servers' own cost weighs more in a ratio)
#   BENCH_PROFILE=dir     write a CPU profile of quotad per scenario and
#                         round into dir (PROFILE=1 means bin/profiles),
#                         and one of the load generator (-loadgen.pprof:
#                         its whole run, warm-up included) to see whether
#                         it, not the server, limits a run; durations must
#                         then be whole seconds (8s, 1m)
#   BENCH_REDIS_URL=redis://127.0.0.1:6379/0
#                         the Redis of the *-redis scenarios, whose quotad
#                         processes keep short windows there (QUOTAD_REDIS_URL;
#                         QUOTAD_REDIS_TIMEOUT, if set, reaches them too)
#   BENCH_REDIS_PREFIX=bench:
#                         their keys' prefix (QUOTAD_REDIS_PREFIX): every
#                         key under it is deleted, so never a prefix that
#                         anything else uses (a run beside this one against
#                         the same Redis needs its own, as it needs its own
#                         BENCH_DATABASE and BENCH_PORT)
#   BENCH_DATABASE=quotad_bench
#   BENCH_PORT=18181      quotad; the baseline, a second quotad, the debug
#                         (pprof) listeners and tools/upsertserver take the
#                         next ports
#   PGHOST=127.0.0.1 PGPORT=5432 PGUSER=postgres
#
# Output: a line per run, then a markdown table per scenario of the mean
# ratio, the round trips and PostgreSQL transactions per check and, where
# /proc tells, the CPU time per check of the server and of PostgreSQL's
# backends; with Redis, Redis's own CPU time per check and its scripts'
# time per check (INFO cpu and INFO commandstats: everything that Redis
# did meanwhile, so nothing else should use it); and sparse's memory per
# customer.
# Logs, every load generator output and the raw results are in bin/.
# Exits non-zero if any run saw a non-2xx answer or a transport error, or,
# with Redis, an answer counted in process (degraded) or a failed call to
# Redis: such a run does not measure what it claims to. sparse needs
# Linux's /proc (it reads quotad's VmRSS).
set -euo pipefail
cd "$(dirname "$0")/.."

CONC=${BENCH_CONC:-64}
DURATION=${BENCH_DURATION:-8s}
WARMUP=${BENCH_WARMUP:-2s}
ROUNDS=${BENCH_ROUNDS:-2}
SCENARIOS=${BENCH_SCENARIOS:-mixed short hot mixed-request-id mixed-2proc short-redis mixed-redis mixed-redis-2proc reserve-commit items credits subjects entitlements}
KEYS=${BENCH_KEYS:-10000}
LONGTAIL_KEYS=${BENCH_LONGTAIL_KEYS:-100000}
SPARSE_KEYS=${BENCH_SPARSE_KEYS:-1000000}
SUBJECT_KEYS=${BENCH_SUBJECT_KEYS:-100000}
ALGORITHM=${BENCH_ALGORITHM:-}
CLIENT=${BENCH_CLIENT:-net/http}
PROFILE_DIR=${BENCH_PROFILE:-}
if [ -z "$PROFILE_DIR" ] && [ -n "${PROFILE:-}" ] && [ "${PROFILE:-}" != 0 ]; then
  PROFILE_DIR=bin/profiles
fi
DB=${BENCH_DATABASE:-quotad_bench}
PORT=${BENCH_PORT:-18181}
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
PGUSER=${PGUSER:-postgres}
GO=${GO:-go}
REDIS_URL=${BENCH_REDIS_URL:-redis://127.0.0.1:6379/0}
REDIS_PREFIX=${BENCH_REDIS_PREFIX-bench:}
REDIS_SHOWN=$(printf '%s' "$REDIS_URL" | sed 's#//[^@/]*@#//***@#')  # no password in messages

QUOTAD1=127.0.0.1:$PORT
BASELINE=127.0.0.1:$((PORT + 1))
QUOTAD2=127.0.0.1:$((PORT + 2))
DEBUG1=127.0.0.1:$((PORT + 3))
DEBUG2=127.0.0.1:$((PORT + 4))
UPSERT=127.0.0.1:$((PORT + 5))  # tools/upsertserver, for the upsert scenario
GRPC1=127.0.0.1:$((PORT + 6))   # the first quotad's gRPC rate limit service, for the grpc scenario
# Tokens of this run only: quotad refuses secrets under 16 characters.
ADMIN_TOKEN=adm-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
CHECK_TOKEN=chk-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
LOADGEN_LOG=bin/bench-loadgen.log
RESULTS=bin/bench-results.tsv
MEMORY=bin/bench-memory.tsv  # sparse's memory per customer, per round
SEEN=bin/bench-seen          # the customers sparse's runs sent (loadgen -seen)

die() { printf 'bench: %s\n' "$*" >&2; exit 1; }

# redis_clear: deletes every key under REDIS_PREFIX (SCAN, then UNLINK in
# batches) and prints how many there were.
REDIS_USED=""  # set once the Redis of the scenarios is known to answer
redis_clear() {
  redis-cli --no-auth-warning -u "$REDIS_URL" --scan --pattern "$REDIS_PREFIX*" |
    xargs -r -d '\n' redis-cli --no-auth-warning -u "$REDIS_URL" unlink |
    awk '{ n += $NF } END { print n + 0 }'
}

# ---- processes: every one started is stopped on exit, Ctrl-C included.
SERVERS=""  # quotad and baseline processes
JOBS=""     # the load generator and profile downloads of the current run
cleanup() {
  # shellcheck disable=SC2086 # word splitting of the pid lists is meant
  kill $JOBS $SERVERS 2>/dev/null || true
  for pid in $JOBS $SERVERS; do wait "$pid" 2>/dev/null || true; done
  if [ -n "$REDIS_USED" ]; then
    local n
    if n=$(redis_clear); then echo "deleted $n Redis key(s) under $REDIS_PREFIX"
    else echo "bench: could not delete the Redis keys under $REDIS_PREFIX at $REDIS_SHOWN" >&2; fi
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# seconds DURATION: a duration of whole seconds or minutes, in seconds.
seconds() {
  if [[ $1 =~ ^([0-9]+)s$ ]]; then echo "${BASH_REMATCH[1]}"
  elif [[ $1 =~ ^([0-9]+)m$ ]]; then echo $((BASH_REMATCH[1] * 60))
  else die "with profiling, durations must be whole seconds or minutes (8s, 1m), not $1"
  fi
}

# port_free ADDR: nothing answers there.
port_free() {
  local rc=0
  curl -s -o /dev/null --max-time 1 "http://$1/" || rc=$?
  [ "$rc" -eq 7 ]  # 7: could not connect
}

# wait_ready PID LOG CURL_ARGS...: poll with curl until it succeeds, while
# PID runs.
wait_ready() {
  local pid=$1 log=$2
  shift 2
  for _ in $(seq 1 150); do
    curl -s -o /dev/null "$@" && return 0
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$log" >&2; die "exited before it was ready (log: $log)"; }
    sleep 0.2
  done
  die "not ready after 30 s: $* (log: $log)"
}

# start_quotad ADDR DEBUG_ADDR LOG [REDIS]: a quotad on the bench
# database; with REDIS non-empty, keeping its short windows in the Redis of
# the scenarios (its /metrics checked to say so), else in process whatever
# the environment says. It sets STARTED to its pid; logs are
# appended to.
start_quotad() {
  port_free "$1" || die "$1 is in use: stop what listens there or set BENCH_PORT"
  local debug="" redis=""
  if [ -n "$PROFILE_DIR" ]; then debug=$2; fi
  if [ -n "${4:-}" ]; then redis=$REDIS_URL; fi
  local grpc=""  # the first quotad serves gRPC too (the grpc scenario)
  if [ "$1" = "$QUOTAD1" ]; then grpc=$GRPC1; port_free "$grpc" || die "$grpc is in use: stop what listens there or set BENCH_PORT"; fi
  # No load balancer to drain for: a restart (cold, longtail, sparse) stops at once.
  QUOTAD_LISTEN=$1 QUOTAD_GRPC_LISTEN=$grpc QUOTAD_DEBUG_LISTEN=$debug QUOTAD_REDIS_URL=$redis QUOTAD_REDIS_PREFIX=$REDIS_PREFIX \
    QUOTAD_DRAIN_TIMEOUT=0s bin/quotad >> "$3" 2>&1 &
  STARTED=$!
  SERVERS="$SERVERS $STARTED"
  wait_ready "$STARTED" "$3" -f "http://$1/readyz"
  if [ -n "$redis" ]; then
    read_metrics "http://$1/v1/check"
    [ "$SHARED" = 1 ] || { tail -n 20 "$3" >&2; die "quotad at $1 does not share its short windows in Redis at $REDIS_SHOWN (log: $3)"; }
  fi
}

# read_metrics URL...: reads, from the /metrics of the quotad processes
# whose check URLs are given, the sums of their checks answered degraded
# (short windows counted in process: Redis failed or timed out), failed
# calls to Redis, how many are sharing short windows in Redis now, and the
# sum and count of their histogram of store round trips per check, into
# DEGRADED REDIS_FAILURES SHARED TRIPS_SUM TRIPS_COUNT.
read_metrics() {
  local u out sums d f s ts tc found
  DEGRADED=0 REDIS_FAILURES=0 SHARED=0 TRIPS_SUM=0 TRIPS_COUNT=0
  for u in "$@"; do
    u=${u%/v1/check}
    u=${u%/v1/reservations}
    u=${u%%/v1/customers/*}  # entitlements
    case $u in grpc://*) u=http://$QUOTAD1 ;; esac  # gRPC checks are the first quotad's
    out=$(curl -sf "$u/metrics") || die "GET $u/metrics failed"
    sums=$(printf '%s\n' "$out" | awk '
      $1 == "quotad_checks_total{decision=\"degraded\"}" { d += $2 }
      $1 == "quotad_redis_errors_total" { f += $2 }
      $1 == "quotad_short_window_mode{mode=\"shared\"}" { s += $2 }
      $1 == "quotad_check_store_round_trips_sum" { ts += $2; found++ }
      $1 == "quotad_check_store_round_trips_count" { tc += $2; found++ }
      END { printf "%d %d %d %.0f %.0f %d\n", d, f, s, ts, tc, found }')
    read -r d f s ts tc found <<< "$sums"
    [ "$found" = 2 ] || die "$u/metrics has no quotad_check_store_round_trips histogram"
    DEGRADED=$((DEGRADED + d)) REDIS_FAILURES=$((REDIS_FAILURES + f)) SHARED=$((SHARED + s))
    TRIPS_SUM=$((TRIPS_SUM + ts)) TRIPS_COUNT=$((TRIPS_COUNT + tc))
  done
}

# counts URL...: read_metrics URL..., or for the upsert scenario the
# checks tools/upsertserver has counted (every admitted check adds its
# cost, 1, to a counter of its table), each one round trip.
counts() {
  if [ -z "$NAIVE" ]; then read_metrics "$@"; return; fi
  DEGRADED=0 REDIS_FAILURES=0 SHARED=0
  TRIPS_COUNT=$(psql -qAt -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d "$DB" -v ON_ERROR_STOP=1 \
    -c "SELECT coalesce(sum(used), 0) FROM naive_counters")
  TRIPS_SUM=$TRIPS_COUNT
}

# pg_xacts: sets PG_XACTS to the transactions PostgreSQL counted in the
# bench database so far (pg_stat_database: commits and rollbacks), every
# statement quotad sent there in one: customer loads, grants, claims,
# give-backs, history. Backends report them within a second.
pg_xacts() {
  PG_XACTS=$(psql -qAt -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d "$DB" -v ON_ERROR_STOP=1 \
    -c "SELECT pg_stat_force_next_flush(); SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()" | tail -n 1)
  [ -n "$PG_XACTS" ] || die "pg_stat_database has no row for $DB"
}

# cpu_ticks PID: sets CPU_TICKS to the CPU time process PID has used so
# far (user and system, in clock ticks; /proc/PID/stat), 0 if it is gone.
cpu_ticks() {
  local stat f
  CPU_TICKS=0
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  read -r -a f <<< "${stat##*) }"  # from field 3 (the state) on
  CPU_TICKS=$((f[11] + f[12]))     # fields 14 and 15: utime, stime
}

# pg_backends: sets PG_PIDS to the PostgreSQL backends connected to the
# bench database now (pg_stat_activity), those that run on this machine:
# none when PostgreSQL runs elsewhere.
pg_backends() {
  local pid
  PG_PIDS=""
  for pid in $(psql -qAt -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d "$DB" -v ON_ERROR_STOP=1 \
    -c "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"); do
    if grep -qa -- " $DB " "/proc/$pid/cmdline" 2>/dev/null; then PG_PIDS="$PG_PIDS $pid"; fi
  done
}

# cpu_start PID...: remembers the CPU time the quotad processes PID... and
# the bench database's PostgreSQL backends have used so far.
declare -A CPU0
cpu_start() {
  local pid
  CPU0=()
  pg_backends
  for pid in "$@" $PG_PIDS; do cpu_ticks "$pid"; CPU0[$pid]=$CPU_TICKS; done
}

# cpu_since PID...: sets QUOTAD_US and PG_US to the CPU time (in
# microseconds) the quotad processes PID... and the bench database's
# backends used since cpu_start; a backend that closed meanwhile is
# missed, one opened meanwhile counted whole. Both "-" without /proc.
cpu_since() {
  local pid q=0 g=0
  QUOTAD_US=- PG_US=-
  [ -r /proc/self/stat ] || return 0
  for pid in "$@"; do cpu_ticks "$pid"; q=$((q + CPU_TICKS - ${CPU0[$pid]:-0})); done
  pg_backends
  for pid in $PG_PIDS; do cpu_ticks "$pid"; g=$((g + CPU_TICKS - ${CPU0[$pid]:-0})); done
  QUOTAD_US=$((q * 1000000 / CLK_TCK)) PG_US=$((g * 1000000 / CLK_TCK))
}
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)

# redis_cpu: sets REDIS_CPU_US to the CPU time the Redis of the scenarios
# has used since it started (INFO cpu: its main thread and the others, user
# and system), and REDIS_CMD_US to the time its scripts took (EVAL and
# EVALSHA in INFO commandstats, the commands they call included, measured
# by the clock), both in microseconds, and REDIS_CALLS to the scripts it
# ran (checks that share a call make fewer calls than checks).
redis_cpu() {
  local cpu cmd calls
  cpu=$(redis-cli --no-auth-warning -u "$REDIS_URL" info cpu | tr -d '\r' |
    awk -F: '$1 == "used_cpu_sys" || $1 == "used_cpu_user" { t += $2 } END { printf "%.0f", t * 1000000 }')
  read -r cmd calls < <(redis-cli --no-auth-warning -u "$REDIS_URL" info commandstats | tr -d '\r' |
    awk -F'[=,]' '/^cmdstat_eval/ { n += $2; t += $4 } END { printf "%.0f %.0f\n", t, n }')
  [ -n "$cpu" ] && [ -n "$cmd" ] && [ -n "$calls" ] || die "INFO cpu or INFO commandstats of the Redis at $REDIS_SHOWN gave nothing"
  REDIS_CPU_US=$cpu REDIS_CMD_US=$cmd REDIS_CALLS=$calls
}

# rss_kib PID: sets RSS_KIB to the resident memory of quotad process PID
# (VmRSS in /proc/PID/status).
rss_kib() {
  local comm=""
  comm=$(cat "/proc/$1/comm" 2>/dev/null) || true
  [ "$comm" = quotad ] || die "pid $1 is not a quotad process in /proc (${comm:-no such process}): sparse reads quotad's VmRSS there"
  RSS_KIB=$(awk '$1 == "VmRSS:" && $3 == "kB" { print $2 }' "/proc/$1/status")
  [ -n "$RSS_KIB" ] || die "no VmRSS in /proc/$1/status"
}

# stop_quotad PID: a graceful stop (SIGTERM: it gives its leased units back).
stop_quotad() {
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  local pid rest=""
  for pid in $SERVERS; do [ "$pid" = "$1" ] || rest="$rest $pid"; done
  SERVERS=$rest
}

# ---- load generator runs

BODY=""  # the scenario's body template
# The API key of customer s<i> in short-apikey is this and i: as long as a
# key quotad issues (35 characters) for i of 3 to 4 digits.
BENCH_API_KEY=qk_benchbenchbenchbenchbench
SEED=1   # the round and run: the baseline and quotad runs of a pair draw the same keys
MORE=()  # load generator flags of one run only (sparse's -seen)

# measure LABEL PROFILE_NAME WARM URL...: one load generator run with BODY
# over SET_KEYS keys drawn as DRAW says, with the flags in MORE, after a
# warm-up of WARM, while, when PROFILE_NAME is set and profiling is on,
# quotad is profiled (both processes when there are two URLs). Sets the
# fields parse sets.
measure() {
  local label=$1 profile=$2 warm=$3 out=bin/bench-run.out rc=0 u
  shift 3
  local urls=() draw=() lgprofile=()
  for u in "$@"; do urls+=(-url "$u"); done
  # shellcheck disable=SC2206 # DRAW is a list of flags
  if [ -n "$DRAW" ]; then draw=($DRAW); fi
  if [ -n "$PROFILE_DIR" ] && [ -n "$profile" ]; then lgprofile=(-cpuprofile "$PROFILE_DIR/$profile-loadgen.pprof"); fi
  bin/loadgen -json -client "$CLIENT" -c "$CONC" -d "$DURATION" -warmup "$warm" -keys "$SET_KEYS" -seed "$SEED" \
    ${draw[@]+"${draw[@]}"} ${MORE[@]+"${MORE[@]}"} ${lgprofile[@]+"${lgprofile[@]}"} \
    -H "Authorization: Bearer $CHECK_TOKEN" -H 'Content-Type: application/json' \
    -body "$BODY" "${urls[@]}" > "$out" 2>&1 &
  local lg=$!
  JOBS=$lg
  local profiles=""
  if [ -n "$PROFILE_DIR" ] && [ -n "$profile" ]; then
    # Profile the measured window only: start when the warm-up ends.
    sleep "$(seconds "$warm")"
    curl -sf -o "$PROFILE_DIR/$profile.pprof" "http://$DEBUG1/debug/pprof/profile?seconds=$DURATION_S" &
    JOBS="$JOBS $!"; profiles="$!:$PROFILE_DIR/$profile.pprof"
    if [ $# -gt 1 ]; then
      curl -sf -o "$PROFILE_DIR/$profile-proc2.pprof" "http://$DEBUG2/debug/pprof/profile?seconds=$DURATION_S" &
      JOBS="$JOBS $!"; profiles="$profiles $!:$PROFILE_DIR/$profile-proc2.pprof"
    fi
  fi
  wait "$lg" || rc=$?
  for p in $profiles; do  # pid:file
    if ! wait "${p%%:*}" || [ ! -s "${p#*:}" ]; then echo "!!! no CPU profile written to ${p#*:}" >&2; fi
  done
  JOBS=""
  { echo "== $label ($*)"; cat "$out"; } >> "$LOADGEN_LOG"
  [ "$rc" -eq 0 ] || { cat "$out" >&2; die "load generator failed in $label (exit $rc)"; }
  parse "$out"
}

# parse FILE: reads the load generator's JSON summary line in FILE into
# REQUESTS RPS P50 P99 NON2XX ERRORS CONNECTIONS SEEN_KEYS STATUS FIRST.
parse() {
  local json
  json=$(grep '^{' "$1" | tail -n 1)
  field() { printf '%s\n' "$json" | sed -n "s/.*\"$1\":\\([-0-9.eE+]*\\).*/\\1/p"; }
  REQUESTS=$(field requests); RPS=$(field rps); P50=$(field p50_ms); P99=$(field p99_ms)
  NON2XX=$(field non_2xx); ERRORS=$(field errors); CONNECTIONS=$(field connections); TOTAL=$(field total)
  SEEN_KEYS=$(field seen_keys)
  STATUS=$(printf '%s\n' "$json" | sed -n 's/.*"status":{\([^}]*\)}.*/\1/p')
  FIRST=$(printf '%s\n' "$json" | sed -n 's/.*"first_error":"\([^"]*\)".*/\1/p')
  if [ -z "$RPS" ] || [ -z "$NON2XX" ] || [ -z "$ERRORS" ]; then
    cat "$1" >&2; die "no summary from the load generator in $1"
  fi
}

PROBLEMS=0
# check LABEL: loud if the last run saw anything but 2xx answers.
check() {
  if [ "$NON2XX" != 0 ] || [ "$ERRORS" != 0 ]; then
    PROBLEMS=$((PROBLEMS + 1))
    printf '!!! %s: %s non-2xx answers (status %s), %s transport errors%s\n' \
      "$1" "$NON2XX" "$STATUS" "$ERRORS" "${FIRST:+ (first: $FIRST)}" >&2
    printf '!!! every check should be admitted: this run does not measure what it claims to\n' >&2
  fi
  if [ "$CONNECTIONS" -gt "$CONC" ]; then
    printf '!!! %s: %s connections opened for %s workers: the server closed some; the run paid for reconnecting\n' \
      "$1" "$CONNECTIONS" "$CONC" >&2
  fi
}

# scenario NAME ROUND: sets, for it, BODY, URLS, SET, SET_KEYS, DRAW,
# REDIS, FRESH, PRIME, PRIME_BODY, WARM, RUNS and FIRST_REPORTED.
scenario() {
  URLS="http://$QUOTAD1/v1/check"
  # The customer set the scenario checks: l (plan long) or s (plan short),
  # KEYS customers each; z (plan long, LONGTAIL_KEYS customers) for
  # longtail, u (plan long, SPARSE_KEYS customers) for sparse.
  SET=l SET_KEYS=$KEYS
  DRAW=""   # load generator flags of the key draws: -zipf 1.1 for longtail
  REDIS=""  # 1: its quotad processes keep short windows in Redis
  FRESH=""  # 1: quotad is restarted right before its first run (caches empty)
  PRIME=1   # 1: quotad is primed (a check per customer) before its first run
  PRIME_BODY=""  # the priming checks' body, when not a check of api_calls per customer of SET
  WARM=$WARMUP  # the warm-up of its quotad runs (its baseline runs keep WARMUP)
  RUNS=1 FIRST_REPORTED=1  # quotad runs per round (each after a baseline run), and the first reported
  NAIVE=""  # 1: not quotad but tools/upsertserver, one commit per check
  # VERSUS_URL, VERSUS_BODY: the run each quotad run is paired with, when
  # not the baseline's: grpc is measured against quotad's HTTP check.
  VERSUS_URL="" VERSUS_BODY=""
  BASE_URL=http://$BASELINE/v1/check  # the baseline's route for the same request
  case $1 in
    mixed) ;;
    short) SET=s ;;
    # short's load, each check naming its customer by one of its API keys
    # (inserted at set-up: "qk_benchbenchbenchbenchbench<i>" is s<i>'s).
    short-apikey) SET=s BODY="{\"api_key\":\"$BENCH_API_KEY{{key}}\",\"metric\":\"api_calls\",\"cost\":1}" ;;
    hot) BODY='{"customer":"l0","metric":"api_calls","cost":1}' ;;
    mixed-request-id) BODY="{\"customer\":\"l{{key}}\",\"metric\":\"api_calls\",\"cost\":1,\"request_id\":\"r$2-{{seq}}\"}" ;;
    mixed-2proc) URLS="$URLS http://$QUOTAD2/v1/check" ;;
    short-redis) SET=s; REDIS=1 ;;
    mixed-redis) REDIS=1 ;;
    mixed-redis-2proc) REDIS=1; URLS="$URLS http://$QUOTAD2/v1/check" ;;
    # Costs known afterwards: a reservation, then its commit at less.
    reserve-commit) URLS="http://$QUOTAD1/v1/reservations" ;;
    # What a user meets after a deploy: a fresh process, at once under
    # mixed's load, the first DURATION measured.
    cold) FRESH=1 PRIME="" WARM=0s ;;
    # Many customers, few of them frequent: the second run is reported,
    # when the frequent ones are loaded and the tail keeps arriving.
    longtail) SET=z SET_KEYS=$LONGTAIL_KEYS DRAW="-zipf 1.1" FRESH=1 PRIME="" RUNS=2 FIRST_REPORTED=2 ;;
    # Customers mostly seen once: three runs, and memory per customer.
    sparse) SET=u SET_KEYS=$SPARSE_KEYS FRESH=1 PRIME="" RUNS=3 ;;
    # sparse's load on the naive design leases are meant to beat: one
    # atomic upsert, one commit, per check.
    upsert) SET=u SET_KEYS=$SPARSE_KEYS PRIME="" RUNS=3 NAIVE=1 URLS="http://$UPSERT/v1/check" ;;
    # mixed's checks through Envoy's rate limit service (one descriptor per
    # request, domain api_calls), paired with mixed's HTTP checks on the
    # same process and customers, primed over HTTP before both.
    grpc) URLS="grpc://$GRPC1/api_calls" PRIME="" VERSUS_URL="http://$QUOTAD1/v1/check"
      VERSUS_BODY="{\"customer\":\"l{{key}}\",\"metric\":\"api_calls\",\"cost\":1}" ;;
    # A request that is a call and an export: two metrics, all or nothing
    # (plan long limits both, a second and a day each).
    items) BODY="{\"customer\":\"l{{key}}\",\"items\":[{\"metric\":\"api_calls\",\"cost\":1},{\"metric\":\"exports\",\"cost\":1}]}"
      PRIME_BODY=$BODY ;;
    # An LLM call of 100 tokens: tokens (limited a second) draw on the
    # credit pool credits (a second and a day), a credit per 100 tokens.
    credits) BODY="{\"customer\":\"l{{key}}\",\"metric\":\"tokens\",\"cost\":100}" PRIME_BODY=$BODY ;;
    # Limits per subject: SUBJECT_KEYS end users, a hundred per customer
    # (plan subjects: a second and a minute per subject, a second and a
    # day per customer), Zipf-distributed as longtail's; primed for every
    # subject.
    subjects) SET=p SET_KEYS=$SUBJECT_KEYS DRAW="-zipf 1.1"
      BODY="{\"customer\":\"p{{key/100}}\",\"metric\":\"api_calls\",\"cost\":1,\"subject\":\"u{{key}}\"}" PRIME_BODY=$BODY ;;
    # What a paywall asks: GET /v1/customers/{id}/entitlements of warm
    # customers (primed by a check of every metric of plan long, so each
    # long window has a lease), against the baseline's constant answer of
    # the same size.
    entitlements) URLS="http://$QUOTAD1/v1/customers/l{{key}}/entitlements" BASE_URL="http://$BASELINE/v1/customers/l{{key}}/entitlements"
      BODY="" PRIME_BODY="{\"customer\":\"l{{key}}\",\"items\":[{\"metric\":\"api_calls\",\"cost\":1},{\"metric\":\"exports\",\"cost\":1},{\"metric\":\"tokens\",\"cost\":100}]}" ;;
    *) die "unknown scenario $1 (want mixed, short, hot, mixed-request-id, mixed-2proc, short-redis, mixed-redis, mixed-redis-2proc, reserve-commit, cold, longtail, sparse, upsert, short-apikey, grpc, items, credits, subjects or entitlements)" ;;
  esac
  case $1 in
    hot | mixed-request-id | short-apikey | items | credits | subjects | entitlements) ;;
    reserve-commit) BODY="{\"customer\":\"$SET{{key}}\",\"metric\":\"api_calls\",\"cost\":10}" ;;
    grpc) BODY="customer=$SET{{key}}" ;;
    *) BODY="{\"customer\":\"$SET{{key}}\",\"metric\":\"api_calls\",\"cost\":1}" ;;
  esac
}

# prime SET URL...: one check for each customer of SET at each URL. quotad
# loads a customer from PostgreSQL the first time it sees it, and a process
# reserves a block of a customer's long-window units on its first check
# (given back after 30 s idle): priming right before a run makes it measure
# checks, not first-time loads and reservations.
# The processes are primed at the same time. A scenario that sets
# PRIME_BODY is primed with it, each of its SET_KEYS keys once.
prime() {
  local set=$1 url i=0 pids="" keys=$KEYS body="{\"customer\":\"$1{{key}}\",\"metric\":\"api_calls\",\"cost\":1}"
  shift
  if [ -n "$PRIME_BODY" ]; then keys=$SET_KEYS body=$PRIME_BODY; fi
  for url in "$@"; do
    i=$((i + 1))
    case $url in */v1/reservations) url=${url%/v1/reservations}/v1/check ;; esac  # reserve-commit: primed by checks
    case $url in */v1/customers/*) url=${url%%/v1/customers/*}/v1/check ;; esac  # entitlements: primed by checks
    bin/loadgen -json -sweep -keys "$keys" -c "$CONC" -d 5m -url "$url" \
      -H "Authorization: Bearer $CHECK_TOKEN" -H 'Content-Type: application/json' \
      -body "$body" > "bin/bench-prime$i.out" 2>&1 &
    pids="$pids $!"
  done
  # shellcheck disable=SC2086 # pids is a list
  wait $pids || die "priming failed (see bin/bench-prime*.out)"
  i=0
  for url in "$@"; do
    i=$((i + 1))
    case $url in */v1/reservations) url=${url%/v1/reservations}/v1/check ;; esac
    case $url in */v1/customers/*) url=${url%%/v1/customers/*}/v1/check ;; esac
    { echo "== priming $set on $url"; cat "bin/bench-prime$i.out"; } >> "$LOADGEN_LOG"
    parse "bin/bench-prime$i.out"
    if [ "$REQUESTS" != "$keys" ] || [ "$NON2XX" != 0 ] || [ "$ERRORS" != 0 ]; then
      cat "bin/bench-prime$i.out" >&2; die "priming $set on $url: not $keys admitted checks"
    fi
  done
}

# ---- set-up

WITH_REDIS=""  # the scenarios with Redis asked for
SETS=""        # the customer sets of their own (z, u) they check
for s in $SCENARIOS; do  # reject unknown names early
  scenario "$s" 1
  if [ -n "$REDIS" ]; then WITH_REDIS="$WITH_REDIS $s"; fi
  case $SET in z | u) SETS="$SETS $SET:$SET_KEYS" ;; esac
done
[[ $LONGTAIL_KEYS =~ ^[1-9][0-9]*$ ]] || die "BENCH_LONGTAIL_KEYS=$LONGTAIL_KEYS: want a number of customers"
[[ $SPARSE_KEYS =~ ^[1-9][0-9]*$ ]] || die "BENCH_SPARSE_KEYS=$SPARSE_KEYS: want a number of customers"
[[ $SUBJECT_KEYS =~ ^[1-9][0-9]*00$ ]] || die "BENCH_SUBJECT_KEYS=$SUBJECT_KEYS: want a number of subjects, a multiple of 100"
case " $SCENARIOS " in
  *" sparse "*) [ -r /proc/self/status ] || die "sparse reads quotad's memory (VmRSS) in /proc/PID/status: no /proc here; leave sparse out of BENCH_SCENARIOS" ;;
esac
for tool in curl psql createdb dropdb; do
  command -v "$tool" >/dev/null || die "$tool not found (see the comment at the top of $0)"
done
if [ -n "$WITH_REDIS" ]; then
  command -v redis-cli >/dev/null ||
    die "redis-cli not found: scenarios$WITH_REDIS need it and a Redis at $REDIS_SHOWN (BENCH_REDIS_URL); leave them out of BENCH_SCENARIOS to run without Redis"
  # Every key under the prefix is deleted: never all of them, nor a pattern.
  case $REDIS_PREFIX in
    "") die "BENCH_REDIS_PREFIX is empty: the script deletes every key under it, so it must be a prefix of the bench's own" ;;
    *[][*?\\]*) die "BENCH_REDIS_PREFIX=$REDIS_PREFIX: no *, ?, [, ] or \\ (it is matched as a pattern to delete the keys)" ;;
  esac
  pong=$(redis-cli --no-auth-warning -u "$REDIS_URL" ping 2>&1) || true
  [ "$pong" = PONG ] ||
    die "no Redis answers at $REDIS_SHOWN (BENCH_REDIS_URL): redis-cli ping said: ${pong:-nothing}; scenarios$WITH_REDIS need one"
  REDIS_USED=1
  n=$(redis_clear)  # left by a run that could not clean up
  if [ "$n" != 0 ]; then echo "deleted $n Redis key(s) under $REDIS_PREFIX left by an earlier run"; fi
fi
if [ -n "$PROFILE_DIR" ]; then
  seconds "$WARMUP" > /dev/null; DURATION_S=$(seconds "$DURATION")
  mkdir -p "$PROFILE_DIR"
fi
case " $SCENARIOS " in *" mixed-2proc "* | *" mixed-redis-2proc "*) TWO_PROC=1 ;; *) TWO_PROC="" ;; esac
mkdir -p bin
echo "building bin/quotad, bin/baseline, bin/loadgen"
"$GO" build -o bin/quotad ./cmd/quotad
"$GO" build -o bin/baseline ./tools/baseline
"$GO" build -o bin/loadgen ./tools/loadgen
case " $SCENARIOS " in *" upsert "*) UPSERT_USED=1 ;; *) UPSERT_USED="" ;; esac
if [ -n "$UPSERT_USED" ]; then "$GO" build -o bin/upsertserver ./tools/upsertserver; fi
: > "$LOADGEN_LOG"

PGOPTIONS='-c client_min_messages=warning' dropdb -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" --if-exists "$DB"
createdb -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" "$DB"
export QUOTAD_DATABASE_URL="postgres://$PGUSER@$PGHOST:$PGPORT/$DB?sslmode=disable"
export QUOTAD_ADMIN_TOKENS=ops:$ADMIN_TOKEN QUOTAD_CHECK_TOKENS=backend:$CHECK_TOKEN QUOTAD_LOG_LEVEL=warn

: > bin/bench-quotad.log
start_quotad "$QUOTAD1" "$DEBUG1" bin/bench-quotad.log
Q1=$STARTED Q1_REDIS=""  # the first quotad, and whether it runs with Redis
port_free "$BASELINE" || die "$BASELINE is in use: stop what listens there or set BENCH_PORT"
bin/baseline -listen "$BASELINE" > bin/bench-baseline.log 2>&1 &
SERVERS="$SERVERS $!"
wait_ready "$!" bin/bench-baseline.log -f -X POST "http://$BASELINE/v1/check"
if [ -n "$UPSERT_USED" ]; then
  port_free "$UPSERT" || die "$UPSERT is in use: stop what listens there or set BENCH_PORT"
  bin/upsertserver -listen "$UPSERT" -database "$QUOTAD_DATABASE_URL" > bin/bench-upsert.log 2>&1 &
  UPSERT_PID=$!
  SERVERS="$SERVERS $UPSERT_PID"
  wait_ready "$UPSERT_PID" bin/bench-upsert.log -f -X POST -H 'Content-Type: application/json' \
    -d '{"customer":"ready","metric":"probe","cost":1}' "http://$UPSERT/v1/check"
fi

admin() {
  curl -sS -f -o /dev/null -X PUT "http://$QUOTAD1$1" -H "Authorization: Bearer $ADMIN_TOKEN" \
    -H 'Content-Type: application/json' -d "$2" || die "PUT $1 failed"
}
# Limits far above what a run can use: every check is admitted, so this
# measures deciding and counting, not denying.
admin /v1/metrics/api_calls '{}'
SECOND_LIMIT=1000000 MINUTE_LIMIT=60000000 ALG=""
if [ -n "$ALGORITHM" ]; then ALG=",\"algorithm\":\"$ALGORITHM\""; fi
if [ "$ALGORITHM" = sliding_log ]; then SECOND_LIMIT=10000 MINUTE_LIMIT=10000; fi
admin /v1/plans/short "{\"name\":\"Short\",\"limits\":[{\"metric\":\"api_calls\",\"window\":\"second\",\"limit\":$SECOND_LIMIT$ALG},{\"metric\":\"api_calls\",\"window\":\"minute\",\"limit\":$MINUTE_LIMIT$ALG}]}"
# items checks exports beside api_calls; credits checks tokens, which draw
# on the pool credits; the subjects scenario's plan limits per subject.
admin /v1/metrics/exports '{}'
admin /v1/metrics/tokens '{}'
admin /v1/metrics/credits '{"credit_schema":[{"metric":"tokens","credits":1,"per":100}]}'
admin /v1/plans/long "{\"name\":\"Long\",\"limits\":[{\"metric\":\"api_calls\",\"window\":\"second\",\"limit\":$SECOND_LIMIT$ALG},{\"metric\":\"api_calls\",\"window\":\"day\",\"limit\":1000000000},
  {\"metric\":\"exports\",\"window\":\"second\",\"limit\":$SECOND_LIMIT$ALG},{\"metric\":\"exports\",\"window\":\"day\",\"limit\":1000000000},
  {\"metric\":\"tokens\",\"window\":\"second\",\"limit\":1000000000},
  {\"metric\":\"credits\",\"window\":\"second\",\"limit\":$SECOND_LIMIT$ALG},{\"metric\":\"credits\",\"window\":\"day\",\"limit\":1000000000}]}"
admin /v1/plans/subjects "{\"name\":\"Subjects\",\"limits\":[{\"metric\":\"api_calls\",\"window\":\"second\",\"limit\":$SECOND_LIMIT$ALG},{\"metric\":\"api_calls\",\"window\":\"day\",\"limit\":1000000000},
  {\"metric\":\"api_calls\",\"window\":\"second\",\"limit\":$SECOND_LIMIT$ALG,\"per\":\"subject\"},{\"metric\":\"api_calls\",\"window\":\"minute\",\"limit\":$MINUTE_LIMIT$ALG,\"per\":\"subject\"}]}"
# Customers straight into the table: the admin API's per-write audit and
# notification make 20,000 PUTs a slow way to seed a benchmark.
psql -q -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d "$DB" -v ON_ERROR_STOP=1 -c "
  INSERT INTO customers (id, plan_key, created_at, updated_at)
  SELECT p || i, CASE p WHEN 's' THEN 'short' ELSE 'long' END, now(), now()
  FROM generate_series(0, $KEYS - 1) AS i, unnest(ARRAY['s', 'l']) AS p"
# The customers of the subjects scenario, a hundred subjects each.
case " $SCENARIOS " in
  *" subjects "*)
    psql -q -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d "$DB" -v ON_ERROR_STOP=1 -c "
      INSERT INTO customers (id, plan_key, created_at, updated_at)
      SELECT 'p' || i, 'subjects', now(), now() FROM generate_series(0, $SUBJECT_KEYS / 100 - 1) AS i" ;;
esac
# The sets of longtail and sparse, only when they run (a million rows take
# seconds), in the order of the primary key's index. VACUUM ANALYZE, so
# that the runs neither set the new rows' hint bits as they first read them
# nor meet autovacuum working on them.
INSERTED=""
# shellcheck disable=SC2086 # SETS is a list
for cs in $(printf '%s\n' $SETS | sort -u); do  # SET:COUNT
  t0=${EPOCHREALTIME:-$(date +%s)}
  psql -q -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d "$DB" -v ON_ERROR_STOP=1 -c "
    INSERT INTO customers (id, plan_key, created_at, updated_at)
    SELECT id, 'long', now(), now()
    FROM (SELECT '${cs%%:*}' || i AS id FROM generate_series(0, ${cs#*:} - 1) AS i) AS c
    ORDER BY id COLLATE \"C\"" \
    -c "VACUUM ANALYZE customers"
  INSERTED="$INSERTED; $(awk -v t0="$t0" -v t1="${EPOCHREALTIME:-$(date +%s)}" -v n="${cs#*:}" -v p="${cs%%:*}" \
    'BEGIN { printf "%s0..%s%d (plan long) inserted in %.1f s", p, p, n - 1, t1 - t0 }')"
done

# short-apikey's keys, one per customer of the short set, straight into
# the table as the customers are (their SHA-256 computed by PostgreSQL);
# then quotad restarts, loading the live keys as it starts.
case " $SCENARIOS " in
  *" short-apikey "*)
    psql -q -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d "$DB" -v ON_ERROR_STOP=1 -c "
      INSERT INTO api_keys (id, customer_id, name, prefix, digest, created_at)
      SELECT 'key_bench' || lpad(i::text, 12, '0'), 's' || i, 'bench', left('$BENCH_API_KEY', 8),
             sha256(convert_to('$BENCH_API_KEY' || i, 'UTF8')), now()
      FROM generate_series(0, $KEYS - 1) AS i"
    stop_quotad "$Q1"
    start_quotad "$QUOTAD1" "$DEBUG1" bin/bench-quotad.log
    Q1=$STARTED
    ;;
esac

if [ -n "$TWO_PROC" ]; then : > bin/bench-quotad2.log; fi

# ---- rounds
#
# Each scenario runs right after a baseline run with the same command line
# (only the URL differs), and its ratio uses that baseline. The machine is
# shared and its spare capacity drifts from minute to minute; a baseline
# measured seconds before the scenario reflects the machine the scenario
# ran on better than one baseline per round would, at the cost of twice
# the run time.

printf 'quotad bench: %s, %s cores, c=%s, %s measured after %s warm-up, %s round(s), %s customers per set, client %s, short windows %s%s\n' \
  "$(git describe --always --dirty 2>/dev/null || echo unknown)" "$(nproc 2>/dev/null || echo '?')" \
  "$CONC" "$DURATION" "$WARMUP" "$ROUNDS" "$KEYS" "$CLIENT" "${ALGORITHM:-sliding_window}" "${PROFILE_DIR:+, CPU profiles on}"
if [ -n "$WITH_REDIS" ]; then
  printf 'Redis %s (%s), keys under %s\n' "$REDIS_SHOWN" \
    "$(redis-cli --no-auth-warning -u "$REDIS_URL" info server | sed -n 's/^redis_version:\([^[:space:]]*\).*/Redis \1/p')" "$REDIS_PREFIX"
fi
if [ -n "$INSERTED" ]; then echo "customers ${INSERTED#; }"; fi
printf 'scenario\tround\tquotad_rps\tbaseline_rps\tratio\tp50_ms\tp99_ms\tnon_2xx\ttrips_per_check\ttrips_sum\ttrips_count\trun\tpg_xacts\tquotad_cpu_us\tpg_cpu_us\tredis_cpu_us\tredis_cmd_us\n' > "$RESULTS"
printf 'round\trss_before_kib\trss_after_kib\tcustomers_seen\tbytes_per_customer\trss_after_run1_kib\tcustomers_seen_run1\tbytes_per_customer_after_run1\n' > "$MEMORY"
line() { # ROUND NAME WHAT [RATIO TRIPS [NOTE [XACTS [CPU [REDIS]]]]]
  printf 'round %s  %-17s %-8s %8.0f req/s  p50 %7.3f ms  p99 %8.3f ms  non-2xx %s%s%s%s%s%s%s%s\n' "$1" "$2" "$3" \
    "$RPS" "$P50" "$P99" "$NON2XX" "${4:+  ratio $4}" "${5:+  trips/check $5}" "${7:+  pg xacts/check $7}" "${8:+  CPU/check $8}" "${9:+, Redis $9}" \
    "$([ "$ERRORS" = 0 ] || echo "  ERRORS $ERRORS")" "${6:+  ($6)}"
}
MEMORY_LINES=""  # sparse's, for the summary
AFTER_FRESH=""   # 1: the last scenario restarted quotad (cold, longtail, sparse)
for r in $(seq 1 "$ROUNDS"); do
  for s in $SCENARIOS; do
    scenario "$s" "$r"
    for run in $(seq 1 "$RUNS"); do
      # The first run of a round draws the round's keys, later ones keys
      # of their own.
      SEED=$((r + 1000 * (run - 1)))
      name=$s of="" profile=$s-round$r
      if [ "$RUNS" -gt 1 ]; then name="$s $run/$RUNS" of=", run $run of $RUNS" profile=$profile-run$run; fi
      MORE=()
      ref=baseline ref_url=$BASE_URL body=$BODY ref_profile=""
      if [ -n "$VERSUS_URL" ]; then
        # quotad's own HTTP run: profiled too, to compare with the scenario's
        ref=http ref_url=$VERSUS_URL BODY=$VERSUS_BODY ref_profile=$profile-http
        if [ "$run" = 1 ]; then
          # The HTTP run it is paired with measures the same process, so
          # that process is restarted (as below) and primed first.
          if [ "$REDIS" != "$Q1_REDIS" ] || [ -n "$AFTER_FRESH" ]; then
            stop_quotad "$Q1"
            start_quotad "$QUOTAD1" "$DEBUG1" bin/bench-quotad.log "$REDIS"
            Q1=$STARTED Q1_REDIS=$REDIS AFTER_FRESH=""
          fi
          prime "$SET" "$VERSUS_URL"
        fi
      fi
      measure "$ref for $s, round $r$of" "$ref_profile" "$WARMUP" "$ref_url"
      BODY=$body
      check "$ref for $s, round $r$of"
      base=$RPS
      line "$r" "$name" "$ref"
      if [ "$run" = 1 ]; then
        # With Redis, the first process is restarted with it (gracefully:
        # it gives its leases back), and without it again for a scenario
        # without: a third process would make those with Redis measure
        # processes no longer alone on the database. cold, longtail and
        # sparse restart it whatever: a fresh process, its caches empty.
        # So does the scenario after them, which would otherwise measure a
        # process still holding (and giving back, after 30 s idle) the
        # leases of tens of thousands of customers it does not check.
        if [ "$REDIS" != "$Q1_REDIS" ] || [ -n "$FRESH" ] || [ -n "$AFTER_FRESH" ]; then
          stop_quotad "$Q1"
          start_quotad "$QUOTAD1" "$DEBUG1" bin/bench-quotad.log "$REDIS"
          Q1=$STARTED Q1_REDIS=$REDIS AFTER_FRESH=""
        fi
        # The second process runs for the 2proc scenarios only: a process
        # alone on the database does work that several share differently
        # (it reports what its leases hold only when another one may read
        # it).
        second=""
        case $s in *-2proc) start_quotad "$QUOTAD2" "$DEBUG2" bin/bench-quotad2.log "$REDIS"; second=$STARTED ;; esac
        # shellcheck disable=SC2086 # URLS is a list
        if [ -n "$PRIME" ]; then prime "$SET" $URLS; fi
        if [ "$s" = sparse ]; then rm -f "$SEEN"; rss_kib "$Q1"; rss0=$RSS_KIB; fi
      fi
      if [ "$s" = sparse ]; then MORE=(-seen "$SEEN"); fi
      if [ "$s" = reserve-commit ]; then
        [ "$CLIENT" = net/http ] || die "reserve-commit needs BENCH_CLIENT=net/http (loadgen -commit-below)"
        MORE=(-commit-below 10)
      fi
      who=quotad pids="$Q1 $second"
      if [ -n "$NAIVE" ]; then who=upsert pids=$UPSERT_PID; fi
      # shellcheck disable=SC2086 # URLS is a list
      counts $URLS
      d0=$DEGRADED f0=$REDIS_FAILURES t0=$TRIPS_SUM c0=$TRIPS_COUNT
      pg_xacts; x0=$PG_XACTS
      # shellcheck disable=SC2086 # pids is a list
      cpu_start $pids
      if [ -n "$REDIS" ]; then redis_cpu; rc0=$REDIS_CPU_US rm0=$REDIS_CMD_US rn0=$REDIS_CALLS; fi
      # shellcheck disable=SC2086 # URLS is a list
      measure "$s, round $r$of" "$profile" "$WARM" $URLS
      # shellcheck disable=SC2086 # pids is a list
      cpu_since $pids
      redis_us=- redis_cmd_us=- redis_calls=-
      if [ -n "$REDIS" ]; then
        redis_cpu; redis_us=$((REDIS_CPU_US - rc0)) redis_cmd_us=$((REDIS_CMD_US - rm0)) redis_calls=$((REDIS_CALLS - rn0))
      fi
      seen=$SEEN_KEYS
      if [ "$s" = sparse ] && [ "$run" = 1 ]; then rss_kib "$Q1"; rss1=$RSS_KIB seen1=$seen; fi
      # shellcheck disable=SC2086 # URLS is a list
      counts $URLS
      pg_xacts; xacts=$((PG_XACTS - x0))
      if [ -n "$second" ] && [ "$run" = "$RUNS" ]; then stop_quotad "$second"; fi
      check "$s, round $r$of"
      if [ -n "$REDIS" ]; then
        # Answers that were not decided in Redis are 200s all the same.
        degraded=$((DEGRADED - d0)) failures=$((REDIS_FAILURES - f0))
        if [ "$degraded" != 0 ] || [ "$failures" != 0 ] || [ "$SHARED" != "$(wc -w <<< "$URLS")" ]; then
          PROBLEMS=$((PROBLEMS + 1))
          printf '!!! %s, round %s%s: %s answers degraded (short windows counted in process), %s failed calls to Redis; %s of %s processes sharing in Redis at the end\n' \
            "$s" "$r" "$of" "$degraded" "$failures" "$SHARED" "$(wc -w <<< "$URLS")" >&2
          printf '!!! every check should be decided in Redis: this run does not measure what it claims to\n' >&2
        fi
      fi
      # Round trips per check over the whole run: warm-up and the checks
      # still in flight when the measured window closed included.
      trips_sum=$((TRIPS_SUM - t0)) trips_count=$((TRIPS_COUNT - c0))
      if [ "$s" = grpc ] || [ "$s" = entitlements ]; then
        # gRPC checks are not in the HTTP checks' histogram, nor are
        # entitlements requests, which are no checks: counted by the load
        # generator (every answer, warm-up included), their round trips
        # not known (PostgreSQL's transactions per request are).
        trips_sum=- trips_count=$TOTAL
      fi
      [ "$trips_count" -gt 0 ] || die "$s, round $r$of: $who counted no check during the run"
      trips=$(awk -v s="$trips_sum" -v n="$trips_count" 'BEGIN { if (s == "-") print "-"; else printf "%.3f", s / n }')
      xpc=$(awk -v s="$xacts" -v n="$trips_count" 'BEGIN { printf "%.3f", s / n }')
      cpu=""
      if [ "$QUOTAD_US" != - ]; then
        cpu=$(awk -v w="$who" -v q="$QUOTAD_US" -v g="$PG_US" -v n="$trips_count" 'BEGIN { printf "%s %.0f µs, PostgreSQL %.0f µs", w, q / n, g / n }')
      fi
      rcpu=""
      if [ -n "$REDIS" ]; then
        rcpu=$(awk -v c="$redis_us" -v m="$redis_cmd_us" -v k="$redis_calls" -v n="$trips_count" \
          'BEGIN { printf "%.1f µs (%.1f µs in scripts, %.2f script calls)", c / n, m / n, k / n }')
      fi
      ratio=$(awk -v q="$RPS" -v b="$base" 'BEGIN { printf "%.3f", (b > 0 ? q / b : 0) }')
      row=$s note=""
      if [ "$run" -lt "$FIRST_REPORTED" ]; then
        row="$s (run $run of $RUNS, not reported)" note="not reported: $s reports run $FIRST_REPORTED of each round"
      fi
      line "$r" "$name" "$who" "$ratio" "$trips" "$note" "$xpc" "$cpu" "$rcpu"
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$row" "$r" "$RPS" "$base" "$ratio" "$P50" "$P99" "$NON2XX" \
        "$trips" "$trips_sum" "$trips_count" "$run" "$xacts" "$QUOTAD_US" "$PG_US" "$redis_us" "$redis_cmd_us" >> "$RESULTS"
    done
    AFTER_FRESH=$FRESH
    if [ "$s" = sparse ]; then
      # Memory per customer: quotad's resident memory grown over the runs,
      # over the distinct customers they sent it (warm-ups included). The
      # growth from the end of the first run, over the customers the later
      # runs added, leaves out what a fresh process grows by at its first
      # load whatever the customers (buffers, goroutines, the heap's first
      # steps).
      rss_kib "$Q1"
      if [ -z "$seen" ] || [ "$seen" -le "$seen1" ] || [ "$seen1" -le 0 ]; then
        die "sparse, round $r: the load generator counted ${seen1:-no} customers sent in the first run, ${seen:-none} in all (seen_keys)"
      fi
      mem=$(awk -v a="$rss0" -v a1="$rss1" -v b="$RSS_KIB" -v n1="$seen1" -v n="$seen" -v r="$r" -v runs="$RUNS" 'BEGIN {
        printf "round %s  sparse: quotad VmRSS %.1f MiB before its first run, %.1f MiB after its last: %+.1f MiB for %d distinct customers sent in %d runs: %.0f bytes per customer",
          r, a / 1024, b / 1024, (b - a) / 1024, n, runs, (b - a) * 1024 / n
        printf " (after the first run: %+.1f MiB for %d more customers, %.0f bytes per customer)",
          (b - a1) / 1024, n - n1, (b - a1) * 1024 / (n - n1) }')
      echo "$mem"
      MEMORY_LINES="$MEMORY_LINES$mem"$'\n'
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$rss0" "$RSS_KIB" "$seen" \
        "$(awk -v a="$rss0" -v b="$RSS_KIB" -v n="$seen" 'BEGIN { printf "%.0f", (b - a) * 1024 / n }')" \
        "$rss1" "$seen1" "$(awk -v a="$rss1" -v b="$RSS_KIB" -v n="$((seen - seen1))" 'BEGIN { printf "%.0f", (b - a) * 1024 / n }')" >> "$MEMORY"
    fi
  done
done

# ---- summary
echo
echo "c=$CONC, $DURATION, $ROUNDS round(s), client $CLIENT; ratio = the server's req/s (quotad's; tools/upsertserver's for upsert) / baseline req/s of the baseline run just before;"
case " $SCENARIOS " in *" grpc "*) echo "for grpc, the baseline column is quotad's HTTP check (mixed's body, same process and customers) run just before: ratio = gRPC checks/s / HTTP checks/s; its round trips are not counted (-);" ;; esac
echo "round trips per check = PostgreSQL and Redis round trips of quotad's checks over their number (quotad's /metrics, whole runs);"
echo "PostgreSQL transactions per check = every transaction PostgreSQL counted in the bench database over the checks (pg_stat_database);"
echo "CPU per check = CPU time of the server's processes, and of PostgreSQL's backends of the bench database, over the checks (/proc, whole runs);"
echo "Redis CPU per check = Redis's CPU time (INFO cpu) and its scripts' time (INFO commandstats) over the checks, with Redis (whole runs)"
echo
awk -F '\t' '
  NR == 1 { next }
  !($1 in n) { order[++k] = $1 }
  { n[$1]++; q[$1] += $3; b[$1] += $4; sum[$1] += $5; bad[$1] += $8; per[$1] = per[$1] (n[$1] > 1 ? ", " : "") $5
    ts[$1] += $10; tc[$1] += $11; notrips[$1] += ($10 == "-"); xs[$1] += $13; qc[$1] += $14; pc[$1] += $15; nocpu[$1] += ($14 == "-")
    rc[$1] += $16; rm[$1] += $17; noredis[$1] += ($16 == "-") }
  END {
    print "| scenario | server req/s (mean) | baseline req/s (mean) | ratio per run | mean ratio | round trips per check | PostgreSQL transactions per check | server CPU per check | PostgreSQL CPU per check | Redis CPU per check (in scripts) | non-2xx |"
    print "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    for (i = 1; i <= k; i++) {
      s = order[i]
      cpu = nocpu[s] ? "- | -" : sprintf("%.0f µs | %.0f µs", qc[s] / tc[s], pc[s] / tc[s])
      redis = noredis[s] ? "-" : sprintf("%.1f µs (%.1f µs)", rc[s] / tc[s], rm[s] / tc[s])
      trips = notrips[s] ? "-" : sprintf("%.3f", ts[s] / tc[s])
      printf "| %s | %.0f | %.0f | %s | %.3f | %s | %.3f | %s | %s | %d |\n", s, q[s] / n[s], b[s] / n[s], per[s], sum[s] / n[s], trips, xs[s] / tc[s], cpu, redis, bad[s]
    }
  }' "$RESULTS"
echo
if [ -n "$MEMORY_LINES" ]; then printf '%s\n' "$MEMORY_LINES"; fi
echo "logs: bin/bench-quotad.log${TWO_PROC:+, bin/bench-quotad2.log}, bin/bench-baseline.log; load generator output: $LOADGEN_LOG; results: $RESULTS${MEMORY_LINES:+, $MEMORY}"
if [ -n "$PROFILE_DIR" ]; then
  read -r first _ <<< "$SCENARIOS"
  echo "CPU profiles of quotad in $PROFILE_DIR/ (<scenario>-round<r>.pprof, -run<n> for longtail and sparse, -http for grpc's HTTP run), e.g.: go tool pprof -top bin/quotad $PROFILE_DIR/$first-round1.pprof;"
  echo "the load generator's beside them (<scenario>-round<r>-loadgen.pprof, its whole run): go tool pprof -top bin/loadgen $PROFILE_DIR/$first-round1-loadgen.pprof"
fi
if [ "$PROBLEMS" -gt 0 ]; then
  printf '!!! %s run(s) saw non-2xx answers, transport errors or (with Redis) answers not decided in Redis (see above and %s): their figures are wrong\n' "$PROBLEMS" "$LOADGEN_LOG" >&2
  exit 1
fi
