#!/usr/bin/env bash
# Installs Hugging Face's tokenizers (the Rust library, as its npm package
# ships it prebuilt) into DIR (default: $HOME/.cache/prefixd-hftokenizers)
# and prints DIR, for tokenizer/bpe's cross-check:
#   PREFIXD_HF_TOKENIZERS=$(scripts/hftokenizers/install.sh) go test -run HFTokenizersReference ./tokenizer/bpe/
# The package carries its native binaries for every platform (about 60 MB).
set -euo pipefail
dir=${1:-$HOME/.cache/prefixd-hftokenizers}
want=0.23.2
have=$(node -p "require('$dir/node_modules/tokenizers/package.json').version" 2>/dev/null || true)
if [ "$have" != "$want" ]; then
	mkdir -p "$dir"
	npm install --prefix "$dir" --ignore-scripts --no-audit --no-fund "tokenizers@$want" >&2
fi
echo "$dir"
