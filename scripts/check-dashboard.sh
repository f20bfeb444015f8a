#!/usr/bin/env bash
# Checks every query of grafana/dashboards/sns-gateway.json against a real Prometheus.
#
# Runs, all on 127.0.0.1: the RPC simulator (demo chain), the gateway with ROLE=all (API and
# worker metrics), and Prometheus scraping both every second with its data in a temporary
# directory. Sends some traffic (misses, hits, a stale entry, derivations, 400s, a 404, overrides
# to a dead allowlisted RPC for errors and retries), waits for scrapes, then runs each dashboard
# query with `promtool query instant` (Grafana's $__rate_interval -> 1m, $__interval -> 15s,
# $__range -> 5m) and prints how many series it returned. Exits 1 if any query returns none.
# On exit it stops everything it started and deletes the Redis keys under its queue prefix.
#
# Needs: node (with `npm ci` done), Debian's `prometheus` package (prometheus, promtool), curl,
# redis-cli and a Redis at REDIS_URL.
#
#   scripts/check-dashboard.sh
#   API_PORT=3100 WORKER_METRICS_PORT=9201 PROM_PORT=9190 SIM_PORT=8999 scripts/check-dashboard.sh
#   FROM_SOURCE=1 scripts/check-dashboard.sh   # run main.ts with tsx instead of building
set -euo pipefail
cd "$(dirname "$0")/.."

SIM_PORT=${SIM_PORT:-8899}
API_PORT=${API_PORT:-3000}
WORKER_METRICS_PORT=${WORKER_METRICS_PORT:-9101}
PROM_PORT=${PROM_PORT:-9090}
DEAD_RPC_PORT=${DEAD_RPC_PORT:-8898}
QUEUE_PREFIX=${QUEUE_PREFIX:-manualcheck}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
FRESH_SECONDS=${FRESH_SECONDS:-4}
DASHBOARD=${DASHBOARD:-grafana/dashboards/sns-gateway.json}

for tool in node curl prometheus promtool redis-cli; do
  command -v "$tool" > /dev/null || {
    echo "check-dashboard: $tool not found (apt-get install -y prometheus redis-tools curl)" >&2
    exit 2
  }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/check-dashboard.XXXXXX")
pids=()

cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2> /dev/null || true; done
  local deleted=0 key
  while IFS= read -r key; do
    [ -n "$key" ] || continue
    redis-cli -u "$REDIS_URL" del "$key" > /dev/null
    deleted=$((deleted + 1))
  done < <(redis-cli -u "$REDIS_URL" --scan --pattern "${QUEUE_PREFIX}:*")
  echo "cleanup: stopped ${#pids[@]} processes, deleted $deleted keys under ${QUEUE_PREFIX}:"
  if [ "$status" -ne 0 ] && [ -d "$work" ]; then
    echo "logs kept in $work" >&2
  else
    rm -rf "$work"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Polls a URL until it answers with an HTTP status (any status for the simulator, which only
# speaks POST), or gives up after ~30 s.
wait_http() {
  local url=$1 want=${2:-200} code
  for _ in $(seq 1 150); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$url" || true)
    if [ "$want" = any ] && [ "$code" != 000 ]; then return 0; fi
    if [ "$code" = "$want" ]; then return 0; fi
    sleep 0.2
  done
  echo "check-dashboard: $url did not answer $want (last: $code)" >&2
  return 1
}

echo "== RPC simulator on 127.0.0.1:$SIM_PORT"
RPC_SIM_PORT=$SIM_PORT node --import tsx tools/rpc-sim/cli.ts > "$work/sim.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$SIM_PORT/" any

echo "== gateway (ROLE=all) API 127.0.0.1:$API_PORT, worker metrics 127.0.0.1:$WORKER_METRICS_PORT"
gateway=(node dist/main.js)
if [ "${FROM_SOURCE:-0}" = 1 ]; then
  gateway=(node --import tsx main.ts)
else
  npm run build > "$work/build.log" 2>&1 || {
    echo "check-dashboard: npm run build failed, see $work/build.log (or FROM_SOURCE=1)" >&2
    exit 1
  }
fi
env ROLE=all HOST=127.0.0.1 PORT="$API_PORT" WORKER_METRICS_PORT="$WORKER_METRICS_PORT" \
  REDIS_URL="$REDIS_URL" RPC_URL="http://127.0.0.1:$SIM_PORT" QUEUE_PREFIX="$QUEUE_PREFIX" \
  RPC_OVERRIDE_ALLOWLIST="http://127.0.0.1:$DEAD_RPC_PORT" CACHE_FRESH_SECONDS="$FRESH_SECONDS" \
  RPC_RETRIES=1 JOB_ATTEMPTS=2 JOB_BACKOFF_MS=500 SUBDOMAINS_WAIT_MS=5000 LOG_LEVEL=warn \
  "${gateway[@]}" > "$work/gateway.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$API_PORT/readyz"
wait_http "http://127.0.0.1:$WORKER_METRICS_PORT/healthz"

echo "== Prometheus on 127.0.0.1:$PROM_PORT (data in $work/data, scrape every 1s)"
cat > "$work/prometheus.yml" << EOF
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: sns-api
    static_configs: [{ targets: ['127.0.0.1:$API_PORT'] }]
  - job_name: sns-worker
    static_configs: [{ targets: ['127.0.0.1:$WORKER_METRICS_PORT'] }]
EOF
promtool check config "$work/prometheus.yml" > /dev/null
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn > "$work/prometheus.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$PROM_PORT/-/ready"

api() {
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$API_PORT$1")
  printf '  %s %s\n' "$code" "$1"
}

echo "== traffic"
for path in /subdomains/67679 /subdomains/67679 /subdomains/demo /subdomains/demo \
  /subdomains/bonfida /subdomains/empty /record-key-v2/bonfida/SOL /record-key-v2/demo/email \
  /types/record /subdomains/a.b /record-key-v2/bonfida/sol /no/such/route; do
  api "$path"
done
# An allowlisted override nobody listens on: refused connections, retries, a failed refresh.
api "/subdomains/67679?rpc=http%3A%2F%2F127.0.0.1%3A$DEAD_RPC_PORT%2F"
sleep $((FRESH_SECONDS + 1))
api /subdomains/67679 # stale: served at once, refreshed in the background
api /subdomains/demo
sleep 1
api /subdomains/67679

echo "== waiting for three scrapes after the traffic"
after=$(date +%s)
for _ in $(seq 1 60); do
  last=$(promtool query instant "http://127.0.0.1:$PROM_PORT" 'min(timestamp(up))' 2> /dev/null |
    sed -n 's/.*=> \([0-9.]*\) @.*/\1/p')
  if [ -n "$last" ] && [ "${last%.*}" -ge $((after + 3)) ]; then break; fi
  sleep 0.5
done
promtool query instant "http://127.0.0.1:$PROM_PORT" 'up'

echo "== dashboard queries ($DASHBOARD)"
# shellcheck disable=SC2016 # JavaScript, not shell: nothing to expand.
node -e '
  const d = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const panels = (d.panels || []).flatMap((p) => [p, ...(p.panels || [])]);
  for (const p of panels)
    for (const t of p.targets || [])
      if (t.expr) {
        const expr = t.expr
          .replace(/\$__rate_interval|\$\{__rate_interval\}/g, "1m")
          .replace(/\$__interval|\$\{__interval\}/g, "15s")
          .replace(/\$__range|\$\{__range\}/g, "5m");
        console.log(`${p.title} [${t.refId}]\t${expr}`);
      }
' "$DASHBOARD" > "$work/queries.tsv"

total=0
empty=0
while IFS=$'\t' read -r title expr; do
  total=$((total + 1))
  if ! out=$(promtool query instant "http://127.0.0.1:$PROM_PORT" "$expr" 2>&1); then
    printf 'ERROR  %s\n       %s\n       %s\n' "$title" "$expr" "$out"
    empty=$((empty + 1))
    continue
  fi
  series=$(grep -c '=>' <<< "$out" || true)
  if [ "$series" -eq 0 ]; then
    printf 'EMPTY  %s\n       %s\n' "$title" "$expr"
    empty=$((empty + 1))
  else
    printf 'OK %3d series  %s\n' "$series" "$title"
  fi
done < "$work/queries.tsv"

echo "== $((total - empty)) of $total dashboard queries returned series"
[ "$empty" -eq 0 ]
