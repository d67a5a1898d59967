// Package inference is t1's token-in, token-out generation API, shaped like
// SGLang's native /generate, with three backends:
//
//   - Reference: the in-process reference MoE (moe) at bf16 or f32
//     serving precision, with SetPolicy to swap in new weights and a
//     weight version;
//   - SGLang: a client of an SGLang server's POST /generate (start it with
//     --enable-return-routed-experts to get routing), or of t1's own
//     Server, which answers in the same format;
//   - VLLM: a client of vLLM's OpenAI-compatible POST /v1/completions with a
//     token-id prompt (vLLM 0.21 or later, checked with GET /version);
//     routing comes back from a server started with
//     --enable-return-routed-experts (0.21.0: nested lists, 0.34.0: a
//     base64 .npy), else it is marked unavailable.
//
// Server exposes any Engine over HTTP (`t1 serve-policy`): POST /generate,
// GET /health, GET /get_model_info and, for the reference engine, POST
// /update_weights_from_disk {"model_path": dir|key, "weight_version": v}
// (answered {"success": true, "message": …}), SGLang's way of loading a new
// policy without restarting. Its /generate
// mirrors SGLang's wire format so that the SGLang client can be tested end
// to end against it over a real connection, and so that rollout code can
// switch between the embedded engine and a GPU SGLang server by URL alone.
// For the reference engine it also answers POST /v1/chat/completions
// (OpenAI's chat format, not streamed): the messages are rendered by the
// model's chat template, moe.Chat, in which content is always ordinary
// text, and sampling stops at the turn's <|end|>; a model with a Hugging
// Face tokenizer answers 501 there (its conversations go through
// /generate, rendered by the harness with the model's own template).
//
// A run shares each remote engine between policy versions through Synced:
// an episode Holds its version for as long as it samples, a version is
// loaded (WeightLoader: SGLang's /update_weights_from_disk, vLLM's
// /collective_rpc reload_weights) only once no episode holds another,
// and a reply whose weight_version is not the held one is refused
// (ErrStaleWeights), except a restarted engine's (SGLang reads "default"
// again, or a version never loaded): the held version is loaded again and
// the request repeated. vLLM's reload is followed by POST
// /reset_prefix_cache. Loads have their own timeout (LoadTimeout).
//
// Pool spreads a run's episodes over several engines (inference.urls),
// each a Synced, and moves an episode to another engine when its own
// fails to answer (ErrUnavailable): the request is sent again unchanged,
// and the failed engine reloads its version before it serves again.
//
// standin holds HTTP stand-ins as strict as SGLang 0.5.23 and vLLM
// 0.21.0/0.34.0 (no routing shape, experts in score order, int64 seed
// bounds, their error bodies), computing with t1's own engine, and a
// loopback server that kills and revives them as a crash would; the
// conformance suite runs the clients against them. Probe checks GET
// /health and one request with routed experts (and vLLM's dev endpoints)
// so that a run with no engine, or one started without what t1 needs,
// fails at its start, in one line naming the URL.
//
// inferencetest holds the conformance suite every backend passes (shapes,
// optional outputs, greedy and stop tokens, seeded determinism, bad
// requests); it runs against the reference engine, the SGLang client over
// loopback and, when T1_TEST_SGLANG_URL is set, a real SGLang server.
//
// # Request (POST /generate)
//
//	{"input_ids": [int…],                     one sequence; batches are rejected
//	 "sampling_params": {"temperature": 1.0,  0 = greedy
//	                     "top_p": 1.0,
//	                     "max_new_tokens": 128,
//	                     "stop_token_ids": [int…],
//	                     "sampling_seed": 0},
//	 "return_logprob": true,
//	 "return_routed_experts": true}
//
// Missing sampling fields take SGLang's defaults (temperature 1, top_p 1,
// 128 new tokens). "text" prompts and "stream" are refused with 400.
//
// # Response
//
//	{"text": "…",                              decoded output (reference server only)
//	 "output_ids": [int…],
//	 "meta_info": {
//	   "id": "t1-17",
//	   "finish_reason": {"type": "stop", "matched": 5} | {"type": "length", "length": 128},
//	   "prompt_tokens": 12, "completion_tokens": 40,
//	   "output_token_logprobs": [[logprob, token_id, text|null], …],
//	   "routed_experts": "<base64>",           int32 little endian, C order
//	   "routed_experts_shape": [51, 2, 2],    t1 extension: [prompt+completion−1, layers, top_k]
//	   "weight_version": "v3"}}
//
// routed_experts holds the experts every processed token used at every MoE
// layer: all prompt tokens and every generated token except the last
// (which is never fed back), so numpy reads it as
// frombuffer(b64decode(s), "<i4").reshape(prompt+completion−1, layers, top_k).
// SGLang does not send the shape; the SGLang client takes layers and top_k
// from its options (the inference configuration) unless the server sends
// routed_experts_shape. Servers list each set in router order, highest
// router probability first (the topk_softmax kernels), an order no source
// promises; the clients sort every set, as moe.Routing holds them.
// Errors are {"error": {"message": …, "code": …}}, 400 for a bad request.
//
// # Field mapping
//
//	GenerateResponse      SGLang /generate                      vLLM /v1/completions
//	OutputIDs             output_ids (else ids in the           choices[0].token_ids (return_token_ids),
//	                      output_token_logprobs tuples)         else "token_id:<id>" in logprobs.tokens
//	OutputTokenLogprobs   meta_info.output_token_logprobs[i][0] choices[0].logprobs.token_logprobs (logprobs: 0)
//	RoutedExperts         meta_info.routed_experts (base64)     [prompt_]routed_experts lists (0.21), .npy (0.34)
//	FinishReason          meta_info.finish_reason.type          choices[0].finish_reason
//	MatchedStop           meta_info.finish_reason.matched       choices[0].stop_reason (when a token id)
//	PromptTokens          meta_info.prompt_tokens               usage.prompt_tokens
//	CompletionTokens      meta_info.completion_tokens           usage.completion_tokens
//	WeightVersion         meta_info.weight_version              (none)
//	SamplingParams.Seed   sampling_params.sampling_seed         seed (both: the int64 of the same bits)
//
// # Log-probs
//
// The reference engine reports the log-prob of each sampled token under
// the distribution it was drawn from (temperature-scaled, top-p truncated
// and renormalised). SGLang's are after temperature but before top-p, not
// renormalised (SGLang 0.5.23, python/sglang/srt/layers/sampler.py); vLLM's
// default (--logprobs-mode raw_logprobs) are before temperature, and its
// processed_logprobs match the reference engine's, so the vLLM client
// refuses a temperature or top_p other than 1 unless LogprobsMode is
// processed_logprobs. With temperature 1 and top_p 1 every backend reports
// the model's own log-prob, which the trainer recomputes. Greedy sampling
// reports the temperature-1 log-softmax. Log-probs cross HTTP as JSON
// numbers and come back bit-identical (float32 → float64 → float32).
package inference
