#!/usr/bin/env bash
# Installs Debian's Prometheus (2.42 on bookworm) for the dashboard's
# PromQL test (server/prometheus_test.go), unless a prometheus is already
# on PATH, and prints its path. The test runs its own instance on a
# loopback port with its own storage, so a system service the package may
# start does not matter. CI runs as root on Debian; elsewhere it needs
# root or sudo.
set -euo pipefail

if ! command -v prometheus >/dev/null 2>&1; then
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "prometheus.sh: no apt-get; install prometheus by hand" >&2
		exit 1
	fi
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		sudo="sudo"
	fi
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq >&2
	$sudo apt-get install -y -qq --no-install-recommends prometheus >&2
fi
command -v prometheus
