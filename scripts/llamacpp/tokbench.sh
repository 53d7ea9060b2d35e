#!/usr/bin/env bash
# Tokenizer speed beside llama.cpp's, in one run on the same 4 MB of mixed
# text: prefixd's MB/s and llama.cpp's (node-llama-cpp 3.22.1's CPU build)
# for the llama-bpe, qwen2 and llama-spm vocabularies. Installs what it
# needs into $HOME/.cache (scripts/llamacpp/install.sh, vocab.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
PREFIXD_LLAMACPP_NODE=$(scripts/llamacpp/install.sh)
PREFIXD_LLAMACPP_VOCAB=$(scripts/llamacpp/vocab.sh)
export PREFIXD_LLAMACPP_NODE PREFIXD_LLAMACPP_VOCAB
go test -run '^$' -bench BenchmarkTokenizeBesideLlamaCpp -benchtime 3x ./model/
