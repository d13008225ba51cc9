#!/usr/bin/env bash
# Install headless Chromium and its driver (Debian's chromium, chromium-driver) for the studio's
# browser tests when they are missing; start nothing. Run as root (CI machines are).
set -euo pipefail

log() { echo "browser-setup: $*"; }

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    log "chromium and chromedriver are installed; nothing to do"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    log "need root to install the Debian packages chromium and chromium-driver" >&2
    exit 1
fi
log "installing chromium and chromium-driver"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
command -v chromium >/dev/null && command -v chromedriver >/dev/null
log "chromium and chromedriver are installed"
