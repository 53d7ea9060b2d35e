#!/usr/bin/env bash
# Installs Debian's redis-server (7.0.15 on bookworm) for the remote tier's
# tests (remotetier/, engine/, server/), unless one is already on PATH. The
# tests start their own redis-server on a loopback port in a temporary
# directory (internal/redistest); the package's own service is not used.
set -euo pipefail
"$(dirname "$0")/apt-install.sh" redis-server redis-server
redis-server --version
