#!/usr/bin/env bash
# usage: scripts/apt-install.sh COMMAND PACKAGE
# Installs Debian's PACKAGE, without recommends, unless COMMAND is already
# on PATH, and prints COMMAND's path. The tool installers of the tests
# (install-chromium.sh, prometheus.sh) share it. CI runs as root on Debian;
# elsewhere it needs root or sudo.
set -euo pipefail

cmd=$1 pkg=$2
if ! command -v "$cmd" >/dev/null 2>&1; then
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "$(basename "$0"): no apt-get; install $pkg by hand" >&2
		exit 1
	fi
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		sudo="sudo"
	fi
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq >&2
	$sudo apt-get install -y -qq --no-install-recommends "$pkg" >&2
fi
command -v "$cmd"
