// Prints llama.cpp's logits for a prompt, for model/'s cross-check test
// (TestGGUFMatchesLlamaCpp): node logits.mjs NODE_DIR MODEL.gguf TOKEN...
// NODE_DIR holds node_modules/node-llama-cpp, installed with
// `npm install --prefix NODE_DIR node-llama-cpp@3.22.1`; its prebuilt CPU
// binary of llama.cpp runs the model. It writes one JSON array: the
// logits after the last prompt token, in token order.
import path from "node:path";
import {pathToFileURL} from "node:url";

const [nodeDir, model, ...tokens] = process.argv.slice(2);
const entry = path.join(nodeDir, "node_modules", "node-llama-cpp", "dist", "index.js");
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(entry).href);
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const m = await llama.loadModel({modelPath: model, gpuLayers: 0});
const ctx = await m.createContext({contextSize: 64, batchSize: 64, threads: 1});
const seq = ctx.getSequence();
const input = tokens.map(Number);
const last = input.length - 1;
input[last] = [input[last], {generateNext: {logits: true}}];
const out = await seq.controlledEvaluate(input);
const logits = out[last].next.logits; // Map<token, logit>
const arr = new Array(Math.max(...logits.keys()) + 1);
for (const [tok, v] of logits) arr[tok] = v;
process.stdout.write(JSON.stringify(Array.from(arr, (v) => v ?? null)) + "\n");
await ctx.dispose();
await m.dispose();
await llama.dispose();
