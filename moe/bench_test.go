package moe

import (
	"context"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSample: KV-cached bf16 decoding with the default config, a
// 64-token prompt and 448 new tokens per op; reports processed tokens/s
// (wall, and per CPU-second of the process).
func BenchmarkSample(b *testing.B) {
	for _, prec := range []Precision{BF16, F32} {
		b.Run(prec.String(), func(b *testing.B) {
			m, err := NewModel(DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			s := NewSampler(m, prec)
			s.SetPrefixCache(0) // measure decoding, not cache hits
			prompt := samplePrompt(m.Cfg, 64)
			sp := SamplingParams{Temperature: 1, MaxNewTokens: 448, Seed: 1}
			b.ResetTimer()
			cpu0 := processCPU()
			tokens := 0
			for i := 0; i < b.N; i++ {
				g, err := s.Generate(context.Background(), prompt, sp)
				if err != nil {
					b.Fatal(err)
				}
				tokens += len(prompt) + len(g.OutputIDs)
			}
			reportPeer(b, tokens, processCPU()-cpu0)
		})
	}
}

// BenchmarkTrainStep: one float32 forward, backward (∂L/∂logp = −1/N) and
// Adam step on a 512-token sequence with the default config.
func BenchmarkTrainStep(b *testing.B) {
	for _, replay := range []bool{false, true} {
		name := "live"
		if replay {
			name = "replay"
		}
		b.Run(name, func(b *testing.B) {
			m, err := NewModel(DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			opt := NewAdam(m, DefaultAdam())
			seq := samplePrompt(m.Cfg, 512)
			var fo ForwardOptions
			if replay {
				p, err := m.Forward(seq, ForwardOptions{})
				if err != nil {
					b.Fatal(err)
				}
				fo.Replay = &p.Routing
			}
			d := make([]float32, len(seq)-1)
			for i := range d {
				d[i] = -1 / float32(len(d))
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p, err := m.Forward(seq, fo)
				if err != nil {
					b.Fatal(err)
				}
				if err := m.Backward(p, d, nil); err != nil {
					b.Fatal(err)
				}
				opt.Update(1)
			}
			b.ReportMetric(float64(b.N*len(seq))/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// BenchmarkGap reports the train-vs-inference gap of the default config
// (bf16 serving, f32 training, temperature 1) after a few SFT steps on the
// embedded corpus, replay off and on. The figures are deterministic; the
// time per op is not the point.
func BenchmarkGap(b *testing.B) {
	cfg := DefaultConfig()
	m, err := NewModel(cfg)
	if err != nil {
		b.Fatal(err)
	}
	opt := NewAdam(m, AdamConfig{LR: 3e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	seqs := chatSeqs(b, 128, 8)
	for i := 0; i < 20; i++ {
		nllStep(b, m, opt, seqs)
	}
	tok, err := DefaultTokenizer()
	if err != nil {
		b.Fatal(err)
	}
	var prompts [][]int
	for _, s := range []string{"List the files in /tmp.", "Run the tests.", "Compress the logs.", "Which process uses port 80?", "Fix the parser.", "Count the lines of data.csv.", "Create a git branch.", "Install jq."} {
		prompts = append(prompts, tok.Encode("<|user|>"+s+"<|end|><|assistant|>"))
	}
	sp := SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 256, Seed: 1}
	var rep GapReport
	for i := 0; i < b.N; i++ {
		if rep, err = MeasureGap(context.Background(), m, BF16, prompts, sp); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(rep.ReplayOff.Fraction, "mismatch-off")
	b.ReportMetric(rep.ReplayOn.Fraction, "mismatch-on")
	b.ReportMetric(rep.ReplayOff.MeanAbsLogProbGap, "dlogp-off")
	b.ReportMetric(rep.ReplayOn.MeanAbsLogProbGap, "dlogp-on")
	b.ReportMetric(float64(rep.Generated), "gen-tokens")
}

// BenchmarkAgentTurns: one 24-turn agent episode (48 generated tokens and a
// 24-token observation per turn, the history growing to ~1.8k tokens), with
// and without the prefix cache; reports turns/s and generated tokens/s.
func BenchmarkAgentTurns(b *testing.B) {
	for _, cache := range []int{0, DefaultPrefixCache} {
		name := "cold"
		if cache > 0 {
			name = "prefix-cache"
		}
		b.Run(name, func(b *testing.B) {
			m, err := NewModel(DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			s := NewSampler(m, BF16)
			s.SetPrefixCache(cache)
			obs := samplePrompt(m.Cfg, 24)
			turns, gen := 0, 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.SetPrefixCache(cache)
				prompt := samplePrompt(m.Cfg, 64)
				for turn := 0; turn < 24; turn++ {
					g, err := s.Generate(context.Background(), prompt, SamplingParams{Temperature: 1, MaxNewTokens: 48, Seed: uint64(turn)})
					if err != nil {
						b.Fatal(err)
					}
					prompt = append(append(prompt, g.OutputIDs...), obs...)
					turns++
					gen += len(g.OutputIDs)
				}
			}
			b.ReportMetric(float64(turns)/b.Elapsed().Seconds(), "turns/s")
			b.ReportMetric(float64(gen)/b.Elapsed().Seconds(), "gen-tok/s")
		})
	}
}

// BenchmarkPeer is moe's side of bench/torch-peer.sh: the training step
// (forward, backward with ∂L/∂logp = −1/N, clip 1, Adam) on a 512-token
// sequence and KV-cached bf16 sampling (64-token prompt, 448 sampled), at
// the default config (d64) and at d_model 256, head_dim 64, d_ff 512 (d256), on one
// goroutine (Workers = 1) like the single-threaded PyTorch peer, and like
// it timing training steps after one untimed warm-up step. Its
// sub-benchmark names match bench/torch_peer.py's. Besides tok/s (wall)
// it reports cpu-tok/s, tokens per CPU-second of the whole process, which
// other work on a shared machine disturbs less than the wall clock.
func BenchmarkPeer(b *testing.B) {
	configs := []struct {
		name string
		cfg  Config
	}{{"d64", DefaultConfig()}, {"d256", peerConfig()}}
	old := Workers
	Workers = 1
	defer func() { Workers = old }()
	for _, c := range configs {
		b.Run("train-"+c.name, func(b *testing.B) {
			m, err := NewModel(c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			opt := NewAdam(m, DefaultAdam())
			seq := samplePrompt(m.Cfg, 512)
			d := make([]float32, len(seq)-1)
			for i := range d {
				d[i] = -1 / float32(len(d))
			}
			step := func() {
				p, err := m.Forward(seq, ForwardOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if err := m.Backward(p, d, nil); err != nil {
					b.Fatal(err)
				}
				opt.Update(1)
			}
			step() // warm-up, as the peer's
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				step()
			}
			reportPeer(b, b.N*len(seq), processCPU()-cpu0)
		})
		b.Run("sample-"+c.name, func(b *testing.B) {
			m, err := NewModel(c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			s := NewSampler(m, BF16)
			s.SetPrefixCache(0)
			prompt := samplePrompt(m.Cfg, 64)
			sp := SamplingParams{Temperature: 1, MaxNewTokens: 448, Seed: 1}
			b.ResetTimer()
			cpu0 := processCPU()
			tokens := 0
			for i := 0; i < b.N; i++ {
				g, err := s.Generate(context.Background(), prompt, sp)
				if err != nil {
					b.Fatal(err)
				}
				tokens += len(prompt) + len(g.OutputIDs)
			}
			reportPeer(b, tokens, processCPU()-cpu0)
		})
	}
}

func reportPeer(b *testing.B, tokens int, cpu time.Duration) {
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
	b.ReportMetric(float64(tokens)/cpu.Seconds(), "cpu-tok/s")
}

// processCPU is the user and system time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peerConfig is the larger shape of BenchmarkPeer: d_model 256, heads of
// 64, d_ff 512.
func peerConfig() Config {
	c := DefaultConfig()
	c.DModel, c.HeadDim, c.DFF = 256, 64, 512
	return c
}

// BenchmarkGemm: one gemm of the trainer's d256 shapes on one goroutine
// (rows × columns × depth: a linear layer's forward, an expert's
// transposed forward, a weight gradient), in multiply-adds per second of
// wall and of this thread's CPU time.
func BenchmarkGemm(b *testing.B) {
	for _, sh := range []struct {
		name    string
		M, N, K int
	}{{"512x256x256", 512, 256, 256}, {"512x128x256", 512, 128, 256}, {"256x256x512", 256, 256, 512}} {
		b.Run(sh.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			rng := rand.New(rand.NewPCG(1, 1))
			fill := func(n int) []float32 {
				s := make([]float32, n)
				for i := range s {
					s[i] = float32(rng.NormFloat64())
				}
				return s
			}
			A, B, C := fill(sh.M*sh.K), fill(sh.K*sh.N), make([]float32, sh.M*sh.N)
			b.ResetTimer()
			cpu0 := threadCPU()
			for i := 0; i < b.N; i++ {
				gemm(false, sh.M, sh.N, sh.K, A, sh.K, 1, B, sh.N, C, sh.N)
			}
			macs := float64(sh.M*sh.N*sh.K) * float64(b.N)
			b.ReportMetric(macs/b.Elapsed().Seconds()/1e9, "GMAC/s")
			b.ReportMetric(macs/(threadCPU()-cpu0).Seconds()/1e9, "cpu-GMAC/s")
		})
	}
}

// threadCPU is the user and system time of the calling OS thread.
func threadCPU() time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
