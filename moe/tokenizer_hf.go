package moe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/t1pipe/t1/tokenizer"
)

// A Tokenizer is saved as a Hugging Face model's tokenizer files, so a
// checkpoint directory loads in transformers (AutoTokenizer, apply_chat_template)
// and serves from an engine with the same ids t1 trains on:
//
//	tokenizer.json           BPE: vocab (ids 0-255 the bytes, then the specials, then one
//	                         token per merge, in HF's byte-level alphabet) and merges "a b";
//	                         the specials as added_tokens (special, normalized false);
//	                         no normalizer; pre_tokenizer Split(tokenizer.ByteClassPattern,
//	                         Isolated) then ByteLevel(use_regex false); ByteLevel decoder
//	tokenizer_config.json    chat_template (Chat's rendering in Jinja), eos_token <|end|>,
//	                         pad_token <|pad|>, no bos_token, added_tokens_decoder
//	special_tokens_map.json  eos_token, pad_token, additional_special_tokens
//
// Hugging Face's library encodes every valid UTF-8 text to Encode's ids
// (TestHFLibraryAgrees). It takes text only, never bytes, so invalid UTF-8
// is the one input whose ids can differ.

// hfFileNames are the files HFFiles writes.
var hfFileNames = []string{TokenizerFile, TokenizerConfigFile, specialTokensMapFile}

const specialTokensMapFile = "special_tokens_map.json"

// HFFiles writes t as a Hugging Face tokenizer (tokenizer.json,
// tokenizer_config.json, special_tokens_map.json). It fails when two ids
// decode to the same bytes, which a vocabulary keyed by text cannot hold;
// t1's training never makes one from distinct merges in practice, but
// NewTokenizer accepts any merge list.
func (t *Tokenizer) HFFiles() (map[string][]byte, error) {
	seen := make(map[string]int, len(t.vocab))
	for id, b := range t.vocab {
		if prev, dup := seen[string(b)]; dup {
			return nil, fmt.Errorf("tokenizer: ids %d and %d both decode to %q; a Hugging Face vocabulary maps each text to one id", prev, id, b)
		}
		seen[string(b)] = id
	}
	tj, err := t.hfTokenizerJSON()
	if err != nil {
		return nil, err
	}
	cfg, smap, err := t.hfConfig()
	if err != nil {
		return nil, err
	}
	return map[string][]byte{TokenizerFile: tj, TokenizerConfigFile: cfg, specialTokensMapFile: smap}, nil
}

// orderedJSON is a JSON object whose keys keep their order: a vocabulary in
// id order reads as t1's, and the bytes are the same on every save.
type orderedJSON []kv

type kv struct {
	k string
	v any
}

func (o orderedJSON) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := marshalPlain(e.k)
		if err != nil {
			return nil, err
		}
		v, err := marshalPlain(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshalPlain is json.Marshal without HTML escaping: "<|end|>" stays
// readable in files people open.
func marshalPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// indentPlain is marshalPlain indented as Hugging Face's files are.
func indentPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (t *Tokenizer) addedTokenJSON(s string) orderedJSON {
	return orderedJSON{{"content", s}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
		{"normalized", false}, {"special", true}}
}

func (t *Tokenizer) hfTokenizerJSON() ([]byte, error) {
	added := make([]orderedJSON, len(t.specials))
	for i, s := range t.specials {
		added[i] = append(orderedJSON{{"id", 256 + i}}, t.addedTokenJSON(s)...)
	}
	vocab := make(orderedJSON, len(t.vocab))
	for id, b := range t.vocab {
		if t.IsSpecial(id) {
			// Added tokens are matched as text, never through the
			// alphabet; every byte of a special is printable ASCII, so
			// both spellings agree anyway.
			vocab[id] = kv{string(b), id}
			continue
		}
		vocab[id] = kv{tokenizer.ByteLevel(b), id}
	}
	merges := make([]string, len(t.merges))
	for i, m := range t.merges {
		// The byte-level alphabet writes a space as Ġ, so one space
		// separates the two tokens unambiguously; this form also reads
		// in releases of the library older than the [a, b] form.
		merges[i] = tokenizer.ByteLevel(t.vocab[m[0]]) + " " + tokenizer.ByteLevel(t.vocab[m[1]])
	}
	byteLevel := orderedJSON{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}
	doc := orderedJSON{
		{"version", "1.0"},
		{"truncation", nil},
		{"padding", nil},
		{"added_tokens", added},
		{"normalizer", nil},
		{"pre_tokenizer", orderedJSON{{"type", "Sequence"}, {"pretokenizers", []orderedJSON{
			{{"type", "Split"}, {"pattern", orderedJSON{{"Regex", tokenizer.ByteClassPattern}}}, {"behavior", "Isolated"}, {"invert", false}},
			byteLevel,
		}}}},
		{"post_processor", nil},
		{"decoder", byteLevel},
		{"model", orderedJSON{{"type", "BPE"}, {"dropout", nil}, {"unk_token", nil}, {"continuing_subword_prefix", nil},
			{"end_of_word_suffix", nil}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
			{"vocab", vocab}, {"merges", merges}}},
	}
	return indentPlain(doc)
}

// ChatTemplate is Chat's rendering as a Hugging Face chat_template, or ""
// when t lacks the tokens Chat needs. A role t has no token for raises,
// as Chat refuses it.
func (t *Tokenizer) ChatTemplate() string {
	if _, err := NewChat(t); err != nil {
		return ""
	}
	var roles []string
	for _, r := range []string{RoleSystem, RoleUser, RoleAssistant, RoleTool} {
		if _, ok := t.SpecialID(roleTokens[r]); ok {
			roles = append(roles, "'"+r+"'")
		}
	}
	// One line: no text outside the tags, so trim_blocks and lstrip_blocks
	// have nothing to strip.
	return "{% for message in messages %}" +
		"{% if message['role'] not in [" + strings.Join(roles, ", ") + "] %}" +
		"{{ raise_exception('role ' + message['role'] + ' has no token in this tokenizer') }}{% endif %}" +
		"{{ '<|' + message['role'] + '|>' + message['content'] + '" + TokEnd + "' }}" +
		"{% endfor %}" +
		"{% if add_generation_prompt %}{{ '" + TokAssistant + "' }}{% endif %}"
}

func (t *Tokenizer) hfConfig() (cfg, smap []byte, err error) {
	decoder := make(orderedJSON, len(t.specials))
	for i, s := range t.specials {
		decoder[i] = kv{strconv.Itoa(256 + i), t.addedTokenJSON(s)}
	}
	token := func(s string) any {
		if _, ok := t.specialID[s]; ok {
			return s
		}
		return nil
	}
	var extra []string
	for _, s := range t.specials {
		if s != TokEnd && s != TokPad {
			extra = append(extra, s)
		}
	}
	if extra == nil {
		extra = []string{}
	}
	c := orderedJSON{{"added_tokens_decoder", decoder}, {"additional_special_tokens", extra}, {"bos_token", nil}}
	if tmpl := t.ChatTemplate(); tmpl != "" {
		c = append(c, kv{"chat_template", tmpl})
	}
	c = append(c, orderedJSON{{"clean_up_tokenization_spaces", false}, {"eos_token", token(TokEnd)},
		{"pad_token", token(TokPad)},
		{"tokenizer_class", "PreTrainedTokenizerFast"}, {"unk_token", nil}}...)
	if cfg, err = indentPlain(c); err != nil {
		return nil, nil, err
	}
	m := orderedJSON{{"additional_special_tokens", extra}}
	for _, k := range []kv{{"eos_token", token(TokEnd)}, {"pad_token", token(TokPad)}} {
		if k.v != nil {
			m = append(m, k)
		}
	}
	smap, err = indentPlain(m)
	return cfg, smap, err
}

// tokenizerFromHF recognises the files HFFiles writes: it returns the
// Tokenizer they save when every one of them is there, nothing else is,
// and each is byte for byte what HFFiles writes for that Tokenizer. Files
// anyone edited (another chat template, a changed special) fail the test
// and load as the Hugging Face tokenizer they now describe.
func tokenizerFromHF(files map[string][]byte) (*Tokenizer, bool) {
	tj := files[TokenizerFile]
	pat, _ := marshalPlain(tokenizer.ByteClassPattern)
	if len(files) != len(hfFileNames) || !bytes.Contains(tj, pat) {
		return nil, false
	}
	var doc struct {
		Added []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
		Model struct {
			Vocab  map[string]int `json:"vocab"`
			Merges []string       `json:"merges"`
		} `json:"model"`
	}
	if json.Unmarshal(tj, &doc) != nil {
		return nil, false
	}
	sort.Slice(doc.Added, func(i, j int) bool { return doc.Added[i].ID < doc.Added[j].ID })
	specials := make([]string, len(doc.Added))
	for i, a := range doc.Added {
		specials[i] = a.Content
	}
	merges := make([][2]int, len(doc.Model.Merges))
	for i, m := range doc.Model.Merges {
		a, b, ok := strings.Cut(m, " ")
		ia, okA := doc.Model.Vocab[a]
		ib, okB := doc.Model.Vocab[b]
		if !ok || !okA || !okB {
			return nil, false
		}
		merges[i] = [2]int{ia, ib}
	}
	t, err := NewTokenizer(specials, merges)
	if err != nil {
		return nil, false
	}
	want, err := t.HFFiles()
	if err != nil {
		return nil, false
	}
	for name, b := range want {
		if !bytes.Equal(files[name], b) {
			return nil, false
		}
	}
	return t, true
}
