#!/usr/bin/env bash
# Measures POST /v1/check against the bare echo baseline, alternated, with
# the same load generator command line (see docs/benchmarks.md).
#
# Needs: a local PostgreSQL (as for `make run`), and the shared load
# generator built as bin/loadgen. Usage: scripts/bench.sh [duration] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-15s}
ROUNDS=${2:-2}
CONC=${CONC:-32}
KEYS=${KEYS:-10000}
DB=${BENCH_DATABASE:-quotad_bench}
PGHOST=${PGHOST:-127.0.0.1}
PGUSER=${PGUSER:-postgres}
QUOTAD_ADDR=127.0.0.1:18181
BASE_ADDR=127.0.0.1:18182

[ -x bin/loadgen ] || { echo "bin/loadgen missing: build the shared load generator into bin/loadgen" >&2; exit 1; }
go build -o bin/quotad ./cmd/quotad
go build -o bin/baseline ./tools/baseline

dropdb -h "$PGHOST" -U "$PGUSER" --if-exists "$DB"
createdb -h "$PGHOST" -U "$PGUSER" "$DB"
export QUOTAD_DATABASE_URL="postgres://$PGUSER@$PGHOST:5432/$DB?sslmode=disable"
export QUOTAD_LISTEN=$QUOTAD_ADDR QUOTAD_ADMIN_TOKENS=ops:adm-secret QUOTAD_CHECK_TOKENS=backend:chk-secret QUOTAD_LOG_LEVEL=warn

bin/quotad > bin/bench-quotad.log 2>&1 & QPID=$!
bin/baseline -listen $BASE_ADDR > bin/bench-baseline.log 2>&1 & BPID=$!
trap 'kill $QPID $BPID 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do curl -sf "http://$QUOTAD_ADDR/readyz" >/dev/null && break; sleep 0.2; done

admin() { curl -sf -o /dev/null -X PUT "http://$QUOTAD_ADDR$1" -H 'Authorization: Bearer adm-secret' -H 'Content-Type: application/json' -d "$2"; }
admin /v1/metrics/api_calls '{}'
admin /v1/plans/short '{"name":"Short","limits":[{"metric":"api_calls","window":"second","limit":1000000},{"metric":"api_calls","window":"minute","limit":60000000}]}'
admin /v1/plans/long '{"name":"Long","limits":[{"metric":"api_calls","window":"second","limit":1000000},{"metric":"api_calls","window":"day","limit":1000000000}]}'
# Customers straight into the table: the admin API's per-write audit and
# notification make 20,000 PUTs a slow way to seed a benchmark.
psql -q -h "$PGHOST" -U "$PGUSER" -d "$DB" -v ON_ERROR_STOP=1 -c "
  INSERT INTO customers (id, plan_key, created_at, updated_at)
  SELECT p || i, CASE p WHEN 's' THEN 'short' ELSE 'long' END, now(), now()
  FROM generate_series(0, $KEYS - 1) AS i, unnest(ARRAY['s', 'l']) AS p"

run() { # name url body
  echo "== $1"
  bin/loadgen -url "$2" -c "$CONC" -d "$DURATION" -warmup 2s -keys "$KEYS" \
    -H 'Authorization: Bearer chk-secret' -H 'Content-Type: application/json' -body "$3"
}
# quotad loads each customer into its cache on first sight; prime the cache
# so that the runs measure checks, not 20,000 first-time loads.
for p in s l; do
  bin/loadgen -url "http://$QUOTAD_ADDR/v1/check" -c "$CONC" -d 8s -keys "$KEYS" \
    -H 'Authorization: Bearer chk-secret' -H 'Content-Type: application/json' \
    -body "{\"customer\":\"$p{{key}}\",\"metric\":\"api_calls\",\"cost\":1}" > /dev/null
done
for r in $(seq 1 "$ROUNDS"); do
  echo "#### round $r"
  run "baseline" "http://$BASE_ADDR/v1/check" '{"customer":"s{{key}}","metric":"api_calls","cost":1}'
  run "quotad short windows (memory)" "http://$QUOTAD_ADDR/v1/check" '{"customer":"s{{key}}","metric":"api_calls","cost":1}'
  run "quotad second + day window (PostgreSQL)" "http://$QUOTAD_ADDR/v1/check" '{"customer":"l{{key}}","metric":"api_calls","cost":1}'
  run "quotad one hot customer, second + day" "http://$QUOTAD_ADDR/v1/check" '{"customer":"l0","metric":"api_calls","cost":1}'
done
