// Encodes and decodes with Hugging Face's tokenizers for
// TestHFTokenizersReference: argv[2] is the package folder, argv[3] a JSON
// file [{file, texts}]; prints [{ids: [[...]], decoded: [...]}].
const fs = require('fs')
const path = require('path')
const { Tokenizer } = require(path.join(process.argv[2], 'node_modules', 'tokenizers'))

async function main() {
  const jobs = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'))
  const out = []
  for (const job of jobs) {
    const tk = Tokenizer.fromFile(job.file)
    const ids = []
    const decoded = []
    for (const text of job.texts) {
      const e = await tk.encode(text, null, { addSpecialTokens: false })
      ids.push(e.getIds())
      decoded.push(await tk.decode(e.getIds(), true))
    }
    out.push({ ids, decoded })
  }
  process.stdout.write(JSON.stringify(out))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
