#!/usr/bin/env bash
# Stop the dockerd that .ci/docker-setup.sh started, by the pid it saved; nothing else.
set -uo pipefail
cd "$(dirname "$0")/.."

STATE_DIR=${JIANMU_CI_STATE:-/tmp/jianmu-ci}
PID_FILE=$STATE_DIR/dockerd.pid
[ -f "$PID_FILE" ] || exit 0  # we did not start one: leave the daemon alone
pid=$(cat "$PID_FILE")
rm -f "$PID_FILE"
if ! kill -0 "$pid" 2>/dev/null; then
    exit 0
fi
# Only signal the process if it still is the dockerd we started (the pid may be reused).
if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != "dockerd" ]; then
    echo "docker-teardown: pid $pid is no longer dockerd; not touching it" >&2
    exit 0
fi
kill -TERM "$pid"
for _ in $(seq 60); do  # dockerd stops its containers and containerd: allow 30 s
    kill -0 "$pid" 2>/dev/null || exit 0
    sleep 0.5
done
echo "docker-teardown: dockerd (pid $pid) ignored SIGTERM for 30 s; killing it" >&2
kill -KILL "$pid" 2>/dev/null
exit 0
