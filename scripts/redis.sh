#!/usr/bin/env bash
# Installs Debian's redis-server (7.0.15 on bookworm) for the remote tier's
# tests (remotetier/, engine/, server/), unless one is already on PATH, and
# Debian's valkey-server where the release has one (trixie and later; not
# bookworm): PREFIXD_REDIS_SERVER=valkey-server go test ./remotetier/ runs
# the tests on it. The tests start their own server on a loopback port in a
# temporary directory (internal/redistest); the package's own service is
# not used.
set -euo pipefail
"$(dirname "$0")/apt-install.sh" redis-server redis-server
redis-server --version
if apt-cache show valkey-server >/dev/null 2>&1; then
	"$(dirname "$0")/apt-install.sh" valkey-server valkey-server
	valkey-server --version
else
	echo "$(basename "$0"): this Debian release has no valkey-server package; the tests run on Redis only" >&2
fi
