// Times llama.cpp's tokenizer, as node-llama-cpp 3.22.1's CPU build runs
// it, for model/'s BenchmarkTokenizeBesideLlamaCpp:
//   node tokenize.mjs NODE_DIR VOCAB.gguf PROMPTS_FILE PASSES
// NODE_DIR holds node_modules/node-llama-cpp (scripts/llamacpp/install.sh);
// VOCAB.gguf may be vocabulary-only (it is loaded so). PROMPTS_FILE holds
// UTF-8 prompts separated by NUL bytes. Each prompt is tokenized without
// BOS and with special tokens not parsed, as llama.cpp's test pairs are,
// once to warm up and then PASSES times. It writes one JSON object: the
// prompts' total bytes, the tokens of one pass, and the fastest pass's
// seconds.
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

const [nodeDir, vocab, promptsFile, passesArg] = process.argv.slice(2);
const entry = path.join(nodeDir, "node_modules", "node-llama-cpp", "dist", "index.js");
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(entry).href);
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: vocab, vocabOnly: true, gpuLayers: 0});
const raw = fs.readFileSync(promptsFile);
const prompts = raw.toString("utf8").split("\0");
const pass = () => {
	let tokens = 0;
	for (const p of prompts) tokens += model.tokenize(p, false).length;
	return tokens;
};
const tokens = pass();
let best = Infinity;
for (let i = 0; i < Math.max(1, Number(passesArg) || 1); i++) {
	const start = process.hrtime.bigint();
	pass();
	best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e9);
}
process.stdout.write(JSON.stringify({bytes: raw.length - (prompts.length - 1), tokens, seconds: best}) + "\n");
await model.dispose();
await llama.dispose();
