package tokenizer

// Tokenizer turns text into token ids and back. Implementations are
// immutable after construction and safe for concurrent use.
type Tokenizer interface {
	// Encode tokenises text. A special or added token's text becomes its
	// one id wherever it occurs; nothing else is added (no BOS or EOS: a
	// chat template writes those).
	Encode(text string) []int
	// EncodeOrdinary tokenises text as Encode does, except that no added
	// or special token is matched: text that spells "<|im_end|>" becomes
	// ordinary tokens, so content from a shell can never forge a control
	// token. It is how Encode treats the text between two added tokens.
	EncodeOrdinary(text string) []int
	// AddedTokens are the texts Encode turns into single ids, in id order.
	AddedTokens() []string
	// Decode concatenates the bytes of ids. The result may be invalid
	// UTF-8 (a reply cut inside a character); it fails only on an id
	// outside the vocabulary.
	Decode(ids []int) (string, error)
	// TokenBytes is the bytes one id decodes to.
	TokenBytes(id int) ([]byte, error)
	// VocabSize is one more than the largest id.
	VocabSize() int
	// SpecialID is the id of a special or added token's text: one Encode
	// always turns into that single id.
	SpecialID(text string) (int, bool)
	// IsSpecial reports whether id is a special (control) token.
	IsSpecial(id int) bool
}
