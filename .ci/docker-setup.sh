#!/usr/bin/env bash
# Prepare Docker for the sandbox tests: packages, a running daemon and the sandbox image.
#
# Idempotent and cached: installs docker.io, debootstrap and bubblewrap only when missing,
# starts dockerd only when no daemon answers (its pid goes to $JIANMU_CI_STATE/dockerd.pid,
# which .ci/docker-teardown.sh stops), and builds jianmu-sandbox:latest only when
# `docker image inspect` cannot find it, reusing the debootstrap tarball from
# $JIANMU_ROOTFS_CACHE when present. Run it as root (CI machines are).
set -euo pipefail
cd "$(dirname "$0")/.."

STATE_DIR=${JIANMU_CI_STATE:-/tmp/jianmu-ci}
IMAGE=${JIANMU_SANDBOX_IMAGE:-jianmu-sandbox:latest}
ROOTFS_CACHE=${JIANMU_ROOTFS_CACHE:-$PWD/.sandbox-rootfs/rootfs-bookworm.tar}
PY=${PY_VENV:-.venv/bin/python}
mkdir -p "$STATE_DIR"

log() { echo "docker-setup: $*"; }

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
if ((${#missing[@]})); then
    if [ "$(id -u)" != 0 ]; then
        log "need root to install: ${missing[*]}" >&2
        exit 1
    fi
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if docker info >/dev/null 2>&1; then
    log "a Docker daemon already answers; using it"
else
    log "starting dockerd (log: $STATE_DIR/dockerd.log)"
    nohup dockerd >"$STATE_DIR/dockerd.log" 2>&1 &
    echo $! >"$STATE_DIR/dockerd.pid"
    pid=$(cat "$STATE_DIR/dockerd.pid")
    for _ in $(seq 120); do  # at most 60 s
        docker info >/dev/null 2>&1 && break
        if ! kill -0 "$pid" 2>/dev/null; then
            log "dockerd exited while starting; its log ends with:" >&2
            tail -n 20 "$STATE_DIR/dockerd.log" >&2
            rm -f "$STATE_DIR/dockerd.pid"
            exit 1
        fi
        sleep 0.5
    done
    if ! docker info >/dev/null 2>&1; then
        log "dockerd did not answer within 60 s" >&2
        exit 1
    fi
    log "dockerd is up (pid $pid)"
fi

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    log "image $IMAGE is present"
    # skills' instructions say `python scripts/x.py`: an image built before it had `python`
    # gets the link as one more layer, built offline from the local image
    if ! docker run --rm --network none "$IMAGE" python -c pass >/dev/null 2>&1; then
        log "linking python to python3 in $IMAGE"
        printf 'FROM %s\nRUN ln -sf python3 /usr/bin/python\n' "$IMAGE" \
            | docker build -q -t "$IMAGE" - >"$STATE_DIR/python-link.log" 2>&1 \
            || { cat "$STATE_DIR/python-link.log" >&2; exit 1; }
    fi
else
    [ -x "$PY" ] || make -s .venv/.installed
    log "building $IMAGE (rootfs cache: $ROOTFS_CACHE)"
    "$PY" -c 'import sys
from jianmu.execution.image import build_image
build_image(sys.argv[1], rootfs_cache=sys.argv[2], log=print)' "$IMAGE" "$ROOTFS_CACHE"
fi
