#!/usr/bin/env bash
# Extracts llama.cpp's vocabulary-only GGUF files and their tokenizer test
# pairs (models/ggml-vocab-*) from the llama.cpp source bundle that the npm
# package node-llama-cpp 3.22.1 ships (llama/gitRelease.bundle, release
# de3ff81), into DIR (default: $HOME/.cache/prefixd-llamacpp-vocab), and
# prints DIR, for model/'s reference test:
#   PREFIXD_LLAMACPP_VOCAB=$(scripts/llamacpp/vocab.sh) go test -run LlamaCppVocab ./model/
# The bundle comes from scripts/llamacpp/install.sh's install if it is
# there, else from `npm pack` of the package into the cache. No clone or
# archive: the bundle is fetched into a bare cache repository and each file
# read with git show.
set -euo pipefail
dir=${1:-$HOME/.cache/prefixd-llamacpp-vocab}
version=3.22.1
commit=de3ff815ea7d559ee917f063901b8986f038abc6
stamp="$dir/.extracted-$commit"
if [ -f "$stamp" ]; then
	echo "$dir"; exit 0
fi
mkdir -p "$dir"
bundle=${PREFIXD_LLAMACPP_NODE:-$HOME/.cache/prefixd-llamacpp}/node_modules/node-llama-cpp/llama/gitRelease.bundle
if [ ! -f "$bundle" ]; then
	pack="$dir/.pack"
	mkdir -p "$pack"
	if [ ! -f "$pack/package/llama/gitRelease.bundle" ]; then
		(cd "$pack" && npm pack --silent "node-llama-cpp@$version" >/dev/null &&
			tar -xzf "node-llama-cpp-$version.tgz" package/llama/gitRelease.bundle &&
			rm -f "node-llama-cpp-$version.tgz")
	fi
	bundle="$pack/package/llama/gitRelease.bundle"
fi
repo="$dir/.git-cache"
[ -d "$repo" ] || git init -q --bare "$repo"
git -C "$repo" fetch -q "$bundle"
got=$(git -C "$repo" rev-parse FETCH_HEAD)
if [ "$got" != "$commit" ]; then
	echo "vocab.sh: $bundle holds $got, not llama.cpp $commit" >&2; exit 1
fi
n=0
while IFS= read -r path; do
	git -C "$repo" show "$commit:$path" >"$dir/${path#models/}.tmp"
	mv "$dir/${path#models/}.tmp" "$dir/${path#models/}"
	n=$((n + 1))
done < <(git -C "$repo" ls-tree --name-only "$commit" models/ | grep '^models/ggml-vocab-')
if [ "$n" -eq 0 ]; then
	echo "vocab.sh: no models/ggml-vocab-* in $bundle" >&2; exit 1
fi
touch "$stamp"
echo "$dir"
