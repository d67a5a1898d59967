// Package tokenizer holds the Tokenizer interface, which the rollout and
// training paths tokenise through, and HF, a loader for Hugging Face
// tokenizer.json files of byte-level BPE models (GPT-2, Qwen2/Qwen3,
// Llama 3 and their kin). t1's own tokenizer (moe.Tokenizer) is the other
// implementation.
//
// HF encodes byte-exact with Hugging Face's Rust tokenizers: the tests
// compare it with ids the library itself produced (testdata/gen-reference.mjs,
// run through its Node binding, on the Qwen3 and Llama 3 tokenizers that
// `make setup` installs). Exactness decides the design:
//
//   - The pre-tokenizer regexes need lookahead (\s+(?!\S)), which Go's
//     regexp lacks; each known pattern has a hand-written scanner that
//     follows Oniguruma's alternation and backtracking. Any other pattern
//     is refused. ByteClassPattern is t1's own (the tokenizer.json a
//     checkpoint of moe.Tokenizer holds); package moe's tests check it
//     against the library (testdata/t1-reference.mjs).
//   - \p{L}, \p{N} and \s are Oniguruma's, not Go's unicode package: the
//     two differ in Unicode version. onig_tables.go is generated from the
//     library by the reference script.
//   - Invalid UTF-8 is read as Python and TextDecoder read it (each
//     maximal ill-formed subpart one U+FFFD), since the library takes
//     Unicode text only.
//   - A feature of tokenizer.json that is not implemented exactly
//     (another model type, normaliser or decoder, lstrip/rstrip added
//     tokens, truncation, padding, an unknown field) is refused with an
//     error naming it, never approximated.
//
// EncodeOrdinary is Encode with no added token matched, the segment between
// two of them: a chat rendering tokenises message text with it, so a
// command's output that spells "<|im_end|>" never becomes that token.
//
// Encode never adds template tokens (BOS, EOS): it is the library's
// encode with add_special_tokens=False, which is how a chat-templated
// conversation is tokenised. Decode returns raw bytes, so a reply cut
// inside a character decodes to exactly the bytes it holds.
package tokenizer
