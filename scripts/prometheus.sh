#!/usr/bin/env bash
# Installs Debian's Prometheus (2.42 on bookworm) for the dashboard's
# PromQL test (server/prometheus_test.go), unless a prometheus is already
# on PATH, and prints its path. The test runs its own instance on a
# loopback port with its own configuration and storage, so a system
# service the package may start does not matter.
set -euo pipefail
exec "$(dirname "$0")/apt-install.sh" prometheus prometheus
