#!/usr/bin/env bash
# apt-install.sh COMMAND PACKAGE: installs Debian's PACKAGE unless COMMAND
# is already on PATH, then prints where COMMAND is. CI runs as root on
# Debian; elsewhere it needs root or sudo.
set -euo pipefail

cmd=$1 pkg=$2
if ! command -v "$cmd" >/dev/null 2>&1; then
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "apt-install: no apt-get; install $pkg by hand" >&2
		exit 1
	fi
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		sudo="sudo"
	fi
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update
	$sudo apt-get install -y --no-install-recommends "$pkg"
fi
command -v "$cmd"
