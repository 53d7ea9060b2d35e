#!/usr/bin/env bash
# Installs llama.cpp's CPU build, as the node-llama-cpp npm package ships
# it, into DIR (default: $HOME/.cache/prefixd-llamacpp) for model/'s
# cross-check: PREFIXD_LLAMACPP_NODE=DIR go test -run LlamaCpp ./model/
# Only the x64 Linux binary is installed (about 85 MB), not the GPU builds;
# install scripts are skipped, as they would try to build llama.cpp from
# source when the prebuilt binary does not fit.
set -euo pipefail
dir=${1:-$HOME/.cache/prefixd-llamacpp}
version=3.22.1
if [ -f "$dir/node_modules/node-llama-cpp/package.json" ] &&
	grep -q "\"version\": \"$version\"" "$dir/node_modules/node-llama-cpp/package.json"; then
	echo "$dir"; exit 0
fi
mkdir -p "$dir"
npm install --prefix "$dir" --omit=optional --ignore-scripts --no-audit --no-fund \
	"node-llama-cpp@$version" "@node-llama-cpp/linux-x64@$version" >&2
echo "$dir"
