// Package moe is t1's reference Mixture-of-Experts language model in Go
// (with AVX kernels for its inner loops, chosen at run time): a
// Qwen3-MoE, exactly as transformers' Qwen3MoeForCausalLM computes one, at
// any size — a byte-level BPE tokenizer, the decoder whose feed-forward
// layers are top-k routed experts, a KV-cached sampler (the serving path),
// a float32 forward/backward with rollout routing replay (the training
// path), Adam, and Hugging Face checkpoints that transformers, SGLang and
// vLLM load. Its default size is small enough that rollouts, critic and
// PPO of the whole pipeline run on a CPU, and it differs between serving
// and training the way real stacks do (bf16 serving, f32 training), so
// routing flips and log-prob gaps are real and R³ and TITO have something
// to fix. TestMatchesTransformers runs transformers itself
// (testdata/qwen3_moe_reference.py) and compares log-probs, expert sets
// and gradients.
//
// It is the model only: the training procedures that drive it — the PPO
// actor update, the critic's value regression and warm-up, supervised
// fine-tuning — are package trainer's, built from Forward, Backward and
// Adam.Update. Those three are here because they are model math: the
// gradients follow the architecture, and the optimiser walks the
// parameter tensors and its moments are part of the checkpoint format
// (optimizer.safetensors). The critic is a Model too, with a score head
// where a policy has its LM head (Qwen3MoeForTokenClassification, one
// label).
//
// # Files, in reading order
//
//	config.go      Config and its validation
//	forward.go     the f32 training forward (Pass), built from the layers below
//	attention.go   RoPE, the per-head q/k norms and grouped-query causal attention, forward and backward
//	moe.go         Routing, top-k routing and the expert layer, forward and backward
//	norm.go        RMSNorm
//	gemm.go        the one matrix product (gemm), its tiling and portable code; transposes
//	gemm_amd64.s   AVX kernels: gemm tiles, the vector exponential, the Adam step
//	kernels.go     precision rounding, softmax, expf, silu, parallel rows
//	backward.go    the backward pass into Model.G
//	adam.go        Adam, gradient-norm clipping, Adam.Update
//	params.go      Tensor, Weights, Model and initialisation
//	tokenizer.go   byte-level BPE (chat.go: chat rendering; default.go: the embedded corpus and tokenizer)
//	sample.go      the KV-cached sampler (prefix_cache.go: reuse of a shared prompt prefix)
//	gap.go         serving-vs-training mismatch measurement
//	checkpoint.go  checkpoints in a directory or an object store (safetensors.go: the file format;
//	               checkpoint_config.go: config.json; checkpoint_tokenizer.go: t1's or a Hugging Face tokenizer;
//	               checkpoint_weights.go: a sharded model's index)
//
// # Model
//
//	ids ─▶ Embed ─▶ ┌─ block × Layers ─────────────────────────────────────────────┐ ─▶ RMSNorm ─┬▶ LMHead ─▶ log-probs
//	                │ x2 = x  + Wo·Attn(q, k, v)       causal, Heads query heads,   │             │  (or Embed, tied)
//	                │        h1 = RMSNorm(x)           KVHeads key/value heads     │             └▶ score head (critic)
//	                │        q = RoPE(RMSNorm_h(Wq h1)), k = RoPE(RMSNorm_h(Wk h1)), │
//	                │        v = Wv h1                 (RMSNorm_h: per head, q_norm/k_norm)
//	                │ out = x2 + Σ_{e∈S} g_e · W2_e(silu(W1_e h2) ⊙ W3_e h2)      │
//	                │        h2 = RMSNorm(x2), p = softmax(Router h2),            │
//	                │        S = top-k(p) (or replayed), g_e = p_e / Σ_S p        │
//	                │        (or g_e = p_e without norm_topk_prob)                │
//	                └─────────────────────────────────────────────────────────────┘
//
// RoPE rotates each head's halves (dimension i with i+HeadDim/2), its
// angles float32 as transformers computes them; every RMSNorm has the
// config's ε. Config (config.json) gives the shape; DefaultConfig is
// vocab 512, 2 layers, hidden 64, 4 query and 2 key/value heads of 16,
// 8 experts of width 128, top-2 renormalised, context 2048. Weights are
// initialised deterministically from the seed.
//
// # Serving path (Sampler)
//
// NewSampler snapshots the weights at a Precision. Generate decodes one
// token at a time with a KV cache; at BF16 the weights and every matmul
// input and output are rounded to bfloat16 (accumulation in float32). It
// returns the sampled ids, their log-probs under the distribution they were
// drawn from (temperature, top-p; with both 1 this is the model's log-prob)
// and the sorted top-k experts of every processed token at every layer,
// shape [prompt+generated−1, layers, top_k], as SGLang returns them.
//
// # Training path (Model.Forward / Model.Backward)
//
// Forward runs the whole sequence in float32, routing live or replaying a
// given Routing (R³): replayed experts are used, and their gate weights are
// the live router probabilities at those experts renormalised over them, so
// the router still receives gradients. Pass.RouterProbs gives a layer's
// router probabilities, the scores LiveRouting's sets are the top-k of
// (inference servers list each set by them, highest first; Routing keeps
// ids ascending). Backward takes ∂L/∂log-prob of each
// target token and ∂L/∂value of each position from the caller (PPO builds
// its loss from log-prob ratios, SFT uses −mask/N, the critic the value
// loss) and accumulates into Model.G; Adam.Update then clips, steps and
// clears it. The trainer runs each layer as matrix products over all T
// tokens (each expert over the tokens routed to it, its intermediates kept
// transposed so its weights are used as stored; the attention weights are
// kept for the backward pass, heads·T² floats per layer: 64 MiB a layer
// at 4 heads and 2048 tokens); the sampler runs the same functions on one
// row. Every output element gets the same arithmetic in both (Numerics),
// so with F32 serving the sampler reproduces the trainer bit for bit, and
// replaying a forward's own live routing reproduces that forward exactly.
// Training splits rows, heads and experts over Workers goroutines without
// changing any sum's order, so results do not depend on the number of
// workers.
//
// # Numerics
//
// Every matrix product is gemm: each output element is summed in
// increasing k, one fused multiply-add at a time (product and sum rounded
// once to float32). The AVX kernels (VFMADD231PS) and the portable Go
// (fma32, exact in float64 arithmetic with round-to-odd) give the same
// bits, and so does the one-row product of the sampler against the
// many-row product of the trainer. The exponential of softmax and silu is
// expf, a float32 polynomial (within 2 ulp of e^x), again the same
// operations in its eight-lane AVX2 form and in Go; Adam's step runs in
// float32 lanes with the scalar code's operations. Sums outside gemm
// (softmax's denominator, norms, the gate gradients) run in a fixed
// order. So a run's results are the same with and without AVX (tests
// flip the kernels off and compare bits) and on any number of workers; the
// kernels are chosen at run time (golang.org/x/sys/cpu), so the build
// stays GOAMD64=v1. Changing any of these orders changes results (and run
// digests), never their determinism.
//
// # Tokenizer
//
// Ids 0-255 are bytes, then the special tokens (<|pad|>, <|system|>,
// <|user|>, <|assistant|>, <|tool|>, <|end|>), then merges in training
// order. Encode splits text at special tokens, pre-tokenises by byte class
// (a leading space joins the following word) and applies merges by rank.
// Decode(Encode(s)) == s for any bytes; any id sequence decodes, so
// sampled non-canonical tokenisations are representable. Chat, the one chat
// template (the agent harness and /v1/chat/completions use it), renders
// <|role|>content<|end|> turns (content via EncodeOrdinary, so text can
// never forge a special token) ending in <|assistant|>; <|end|> is the stop
// token, and appending a turn only appends tokens. A checkpoint saves the
// tokenizer as a Hugging Face one (HFFiles): Hugging Face's library and
// t1's loader (package tokenizer) encode valid UTF-8 to Encode's ids, and
// its chat_template renders to Chat's ids.
//
// # Checkpoint
//
//	<dir or key prefix>/config.json        a Qwen3-MoE's, as transformers writes it (checkpoint_config.go):
//	                                       {"architectures":["Qwen3MoeForCausalLM"] (a critic:
//	                                        ["Qwen3MoeForTokenClassification"] with id2label of one label),
//	                                        "model_type":"qwen3_moe","vocab_size","hidden_size","num_hidden_layers",
//	                                        "num_attention_heads","num_key_value_heads","head_dim","num_experts",
//	                                        "num_experts_per_tok","moe_intermediate_size","max_position_embeddings",
//	                                        "rope_theta" (and rope_parameters),"rms_norm_eps","norm_topk_prob",
//	                                        "tie_word_embeddings","hidden_act":"silu","decoder_sparse_step":1,
//	                                        "mlp_only_layers":[],"torch_dtype":"float32","t1_init_seed"};
//	                                       dense layers, attention biases, sliding windows, RoPE scaling are refused
//	                                       by name; the earlier t1_moe architecture is refused (LegacyModelType);
//	                                       ParseShape also reads another MoE's dimensions, which t1 needs though it
//	                                       never runs that model
//	                   /tokenizer.json     Hugging Face's: t1's tokenizer as BPE (vocab and merges in the byte-level
//	                                       alphabet, the specials as added_tokens, Split(tokenizer.ByteClassPattern)
//	                                       then ByteLevel, ByteLevel decoder: tokenizer_hf.go), or a Hugging Face
//	                                       model's (package tokenizer); earlier checkpoints hold
//	                                       {"type":"t1-byte-bpe-v1","specials":[…],"merges":[[a,b],…]}, which still reads
//	                   /tokenizer_config.json  chat_template (Chat in Jinja), eos_token <|end|>, pad_token <|pad|>, no bos_token
//	                   /special_tokens_map.json  eos_token, pad_token, additional_special_tokens (the other specials);
//	                                       a Hugging Face model's files (these two and /chat_template.jinja, those it
//	                                       has) are carried byte for byte instead (checkpoint_tokenizer.go). Files
//	                                       exactly as t1 writes them load as *Tokenizer, others as *HFTokenizer
//	                   /model.safetensors  every tensor, F32 as t1 writes them (BF16 and F16 read too, widened to
//	                                       float32), names as below; or model.safetensors.index.json and the shards
//	                                       its weight_map names, as transformers saves a large model
//	                                       (checkpoint_weights.go)
//	                   /optimizer.safetensors  optional: Adam moments m.<name>, v.<name>;
//	                                           __metadata__ step, lr, beta1, beta2, eps
//
//	safetensors: u64 LE header length N │ N bytes JSON header (space-padded to 8) │ raw LE data
//	header:      {"__metadata__":{"format":"pt","policy_version":"3"},
//	              "model.embed_tokens.weight":{"dtype":"F32","shape":[512,64],"data_offsets":[0,131072]}, …}
//	tensors:     model.embed_tokens.weight [V,D]
//	             model.layers.<l>.input_layernorm.weight [D]
//	             model.layers.<l>.self_attn.q_proj.weight [Heads·hd, D]; .k_proj, .v_proj [KVHeads·hd, D];
//	             model.layers.<l>.self_attn.o_proj.weight [D, Heads·hd]; .q_norm.weight, .k_norm.weight [hd]
//	             model.layers.<l>.post_attention_layernorm.weight [D]; model.layers.<l>.mlp.gate.weight [E,D]
//	             model.layers.<l>.mlp.experts.<e>.{gate_proj,up_proj}.weight [F,D], .down_proj.weight [D,F]
//	             model.norm.weight [D]; lm_head.weight [V,D] (absent when tied); a critic's score.weight [1,D],
//	             score.bias [1] in place of lm_head
//
// Matrices are [out, in] (PyTorch nn.Linear layout). Checkpoints are
// written to local directories (SaveDir/LoadDir) or through
// store.ObjectStore (Save/Load); a reload is bit-identical.
package moe
