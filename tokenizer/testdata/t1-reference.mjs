// Encodes and decodes with Hugging Face's Rust tokenizers (Node binding)
// under a tokenizer.json given on standard input, for the test that t1's
// own tokenizer, written in Hugging Face's form, is read by the library
// exactly as t1 reads it (moe.TestHFLibraryAgrees).
//
// Input:  {"tokenizer": "<tokenizer.json text>", "texts": ["…", …], "ids": [[…], …]}
// Output: {"ids": [[…] per text], "decoded": ["…" per ids list]}
//
// Texts are encoded with add_special_tokens false, as a chat-templated
// conversation is; ids are decoded with skip_special_tokens false.
import { readFileSync } from 'node:fs'
import tk from 'tokenizers'

const input = JSON.parse(readFileSync(0, 'utf8'))
const tok = tk.Tokenizer.fromString(input.tokenizer)
const ids = []
for (const text of input.texts) {
  ids.push((await tok.encode(text, null, { addSpecialTokens: false })).getIds())
}
const decoded = []
for (const list of input.ids) decoded.push(await tok.decode(list, false))
console.log(JSON.stringify({ ids, decoded }))
