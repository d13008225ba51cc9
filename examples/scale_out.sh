#!/usr/bin/env bash
# Scale out: two workers on one PostgreSQL, runs enqueued by a client, one approved from the
# CLI, a worker killed with its runs finished by the other. Needs JIANMU_DATABASE_URL.
set -euo pipefail
: "${JIANMU_DATABASE_URL:?set it to postgresql://user:password@host:port/db}"
APP=examples/scale_app.py:engine

# 1. Two workers: each takes runs from the same queue in the database.
jianmu worker "$APP" --id worker-a > worker-a.log 2>&1 &
A=$!
jianmu worker "$APP" --id worker-b > worker-b.log 2>&1 &
B=$!
trap 'kill $A $B 2>/dev/null || true' EXIT

# 2. A client enqueues 20 runs; it never executes one itself.
python examples/scale_app.py enqueue 20

# 3. A run that asks first: it parks (exit 3) and holds no worker thread while it waits.
jianmu run --durable "$APP" --tree deploy --inputs '{"target": "prod"}' || test $? -eq 3
read -r RUN CALL < <(jianmu runs list --app "$APP" --status suspended --json |
    python -c 'import json, sys; r = json.load(sys.stdin)[0]; print(r["run_id"], r["pending"][0]["id"])')
jianmu runs approve "$RUN" "$CALL" --app "$APP"

# 4. Kill worker-a for good. worker-b takes its runs over: at once with `runs recover`, or by
#    itself once worker-a has missed heartbeats for durable.takeover_after_s.
kill -9 "$A"
jianmu runs recover --worker worker-a --app "$APP"
python examples/scale_app.py wait
jianmu runs show "$RUN" --app "$APP"
