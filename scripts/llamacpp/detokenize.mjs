// Detokenizes token sequences with llama.cpp's tokenizer, as
// node-llama-cpp 3.22.1's CPU build runs it, for model/'s reference test:
//   node detokenize.mjs NODE_DIR VOCAB.gguf < SEQUENCES.json
// SEQUENCES.json is an array of arrays of token ids; it writes a JSON
// array of their texts (special tokens not rendered, as llama.cpp's
// llama_detokenize with unparse_special false).
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

const [nodeDir, vocab] = process.argv.slice(2);
const entry = path.join(nodeDir, "node_modules", "node-llama-cpp", "dist", "index.js");
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(entry).href);
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: vocab, vocabOnly: true, gpuLayers: 0});
const seqs = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(seqs.map((s) => model.detokenize(s, false))) + "\n");
await model.dispose();
await llama.dispose();
