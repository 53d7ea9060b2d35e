#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium for the dashboard page's
# browser test (server/ui_test.go), unless a chromium is already on PATH.
set -euo pipefail
exec "$(dirname "$0")/apt-install.sh" chromium chromium
