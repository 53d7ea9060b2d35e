#!/usr/bin/env bash
# Installs Debian's redis-server (7.0.15 on bookworm) and valkey-server
# (8.0 from bookworm-backports; trixie and later have it in main) for the
# remote tier's tests (remotetier/, engine/, server/), unless they are
# already on PATH. The tests start their own server on a loopback port in a
# temporary directory (internal/redistest); the packages' own services are
# not used. PREFIXD_REDIS_SERVER=valkey-server runs them on Valkey.
set -euo pipefail
here=$(dirname "$0")
"$here/apt-install.sh" redis-server redis-server
redis-server --version
pkg=valkey-server
if ! command -v valkey-server >/dev/null && ! apt-cache show valkey-server >/dev/null 2>&1; then
	. /etc/os-release
	if [ "${VERSION_CODENAME:-}" != bookworm ]; then
		echo "$(basename "$0"): no valkey-server package for ${VERSION_CODENAME:-this release}" >&2
		exit 1
	fi
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm-backports' \
		'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' |
		$sudo tee /etc/apt/sources.list.d/prefixd-backports.sources >/dev/null
	pkg=valkey-server/bookworm-backports
fi
"$here/apt-install.sh" valkey-server "$pkg"
valkey-server --version
