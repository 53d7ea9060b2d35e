#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium for the dashboard page's
# browser test (server/ui_test.go), unless a chromium is already on PATH.
# CI runs as root on Debian; elsewhere it needs root or sudo.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-chromium: no apt-get; install chromium by hand" >&2
	exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
$sudo apt-get install -y --no-install-recommends chromium
command -v chromium
