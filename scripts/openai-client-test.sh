#!/usr/bin/env bash
# Runs the official OpenAI Node client (npm package openai, pinned below)
# against a real `prefixd serve`: builds a tiny chat model (GPT-2's BPE
# vocabulary, ChatML markers and template, random weights), serves it on a
# free loopback port with an API key, and runs scripts/openai-client-test.mjs.
# Needs Go, Node (Debian's nodejs) and npm; the package is cached in
# scripts/.openai-client/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
OPENAI_VERSION=6.30.1

cache=scripts/.openai-client
if [ "$(node -p "try{require('./$cache/node_modules/openai/package.json').version}catch{''}")" != "$OPENAI_VERSION" ]; then
	mkdir -p "$cache"
	npm install --prefix "$cache" --no-audit --no-fund --loglevel=error "openai@$OPENAI_VERSION"
fi

tmp=$(mktemp -d)
pgid=
cleanup() {
	if [ -n "$pgid" ]; then kill -TERM -- "-$pgid" 2>/dev/null || true; wait "$pgid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

go run ./cmd/prefixd gen-model --tokenizer ../shared/models/vocab/ggml-vocab-gpt-2.gguf --chatml --dim 16 --hidden 32 --layers 1 --heads 2 --kv-heads 1 --max-seq-len 1024 --type f32 --out "$tmp/tiny-chat.gguf"
# Its own process group, so that go run and the server it starts stop together.
setsid go run ./cmd/prefixd serve --model "$tmp/tiny-chat.gguf" --addr 127.0.0.1:0 --api-keys client-test-key=client-test \
	--max-running 4 --blocks 512 >"$tmp/serve.log" 2>&1 &
pgid=$!

addr=
for _ in $(seq 600); do
	addr=$(sed -n 's/.*msg=listening addr=\([^ ]*\).*/\1/p' "$tmp/serve.log")
	[ -n "$addr" ] && break
	if ! kill -0 "$pgid" 2>/dev/null; then cat "$tmp/serve.log"; echo "prefixd serve exited"; exit 1; fi
	sleep 0.2
done
if [ -z "$addr" ]; then cat "$tmp/serve.log"; echo "prefixd serve did not start"; exit 1; fi

PREFIXD_URL="http://$addr" PREFIXD_MODEL=tiny-chat PREFIXD_KEY=client-test-key \
	OPENAI_MODULE="$PWD/$cache" node scripts/openai-client-test.mjs
