// Renders Jinja chat templates with llama.cpp's own Jinja engine (its
// common/jinja, as node-llama-cpp 3.22.1's CPU build binds it:
// AddonJinjaRenderer), for chat/'s cross-check of the built-in templates:
//   node jinja.mjs NODE_DIR < REQUESTS.json
// REQUESTS.json is an array of {template, messages, bos_token, eos_token,
// add_generation_prompt}; it writes a JSON array of the rendered texts,
// or of {"error": message} where the engine failed.
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

const [nodeDir] = process.argv.slice(2);
const entry = path.join(nodeDir, "node_modules", "node-llama-cpp", "dist", "index.js");
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(entry).href);
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const requests = JSON.parse(fs.readFileSync(0, "utf8"));
const out = requests.map(({template, ...vars}) => {
	try {
		return new llama._bindings.AddonJinjaRenderer(template).render(vars);
	} catch (e) {
		return {error: String(e?.message ?? e)};
	}
});
process.stdout.write(JSON.stringify(out) + "\n");
await llama.dispose();
