#!/usr/bin/env bash
# Install the PostgreSQL server for the durable-run tests when it is missing; start nothing.
#
# The tests start their own private cluster (tests/support/postgres.py) on 127.0.0.1, so this
# only makes sure initdb, pg_ctl and postgres exist: in $JIANMU_PG_BINDIR when set, else in
# /usr/lib/postgresql/*/bin or `pg_config --bindir`. When none does, it installs the Debian
# package `postgresql` without creating or starting the packaged `main` cluster. Run it as
# root (CI machines are); it does nothing when the binaries are already there.
set -euo pipefail

log() { echo "postgres-setup: $*"; }

has_server() {
    [ -x "$1/initdb" ] && [ -x "$1/pg_ctl" ] && [ -x "$1/postgres" ]
}

found_server() {
    local bindir
    if [ -n "${JIANMU_PG_BINDIR:-}" ]; then
        has_server "$JIANMU_PG_BINDIR" && return 0
        log "JIANMU_PG_BINDIR=$JIANMU_PG_BINDIR does not hold initdb, pg_ctl, postgres" >&2
        exit 1
    fi
    for bindir in /usr/lib/postgresql/*/bin; do
        has_server "$bindir" && return 0
    done
    if command -v pg_config >/dev/null 2>&1; then
        bindir=$(pg_config --bindir 2>/dev/null || true)
        [ -n "$bindir" ] && has_server "$bindir" && return 0
    fi
    return 1
}

if found_server; then
    log "PostgreSQL server binaries are installed; nothing to do"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    log "need root to install the Debian package postgresql" >&2
    exit 1
fi

# postgresql-common reads this before the package's postinst: no `main` cluster, so nothing
# is created or started (the tests run their own). An existing file is left as it is.
if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf
fi

log "installing postgresql"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends postgresql >/dev/null

if ! found_server; then
    log "installed postgresql, but still no initdb, pg_ctl and postgres found" >&2
    exit 1
fi
log "PostgreSQL server binaries are installed"
