package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/store"
)

func servePolicyCmd(g *globals) *cobra.Command {
	var checkpoint, addr, precision, version string
	cmd := &cobra.Command{
		Use:   "serve-policy",
		Short: "Serve the reference MoE policy over HTTP in SGLang's /generate format",
		Long: `serve-policy loads a reference MoE checkpoint (a local directory, else a key
prefix in the object store) and answers POST /generate as an SGLang server
started with --enable-return-routed-experts does: token ids in, token ids,
log-probs and per-layer routed experts out. Without a checkpoint it serves a
freshly initialised model of the configured shape. POST /update_weights_from_disk
{"model_path": DIR|KEY, "weight_version": V} swaps in new weights, as in SGLang.
POST /v1/chat/completions answers in OpenAI's chat format (not streamed), so the
llm task generator (stages.synth.generator: llm) can run against it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			opts := pipeline.InferenceOptions(cfg.Inference)
			if cmd.Flags().Changed("checkpoint") {
				opts.Checkpoint = checkpoint
			}
			if cmd.Flags().Changed("precision") {
				opts.Precision = precision
			}
			opts.Version = version
			ctx := cmd.Context()
			// The object store is opened only when a checkpoint lives there,
			// at start or on a later weight update.
			var (
				mu sync.Mutex
				in *local.Infra
			)
			defer func() {
				if in != nil {
					in.Close()
				}
			}()
			storeFor := func(ref string) (store.ObjectStore, error) {
				if inference.IsLocalCheckpoint(ref) {
					return nil, nil
				}
				mu.Lock()
				defer mu.Unlock()
				if in == nil {
					var err error
					if in, err = local.Open(ctx, cfg, local.Options{}); err != nil {
						return nil, err
					}
				}
				return in.Store, nil
			}
			st, err := storeFor(opts.Checkpoint)
			if err != nil {
				return err
			}
			ref, err := inference.OpenReference(ctx, opts, st)
			if err != nil {
				return err
			}
			srv := inference.NewServer(ref, opts.Checkpoint, slog.Default())
			srv.EnableWeightUpdates(func(ctx context.Context, path string) (*moe.Checkpoint, error) {
				st, err := storeFor(path)
				if err != nil {
					return nil, err
				}
				return inference.LoadCheckpoint(ctx, path, opts.Model, st)
			})
			return inference.ListenAndServe(ctx, addr, srv, func(a string) {
				slog.Info("serving policy", "url", "http://"+a, "weight_version", ref.WeightVersion(), "precision", ref.Precision().String(),
					"checkpoint", opts.Checkpoint)
				if g.json {
					_ = printJSON(cmd, map[string]string{"url": "http://" + a, "weight_version": ref.WeightVersion()})
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "serving on http://%s (weight version %s, %s)\n", a, ref.WeightVersion(), ref.Precision())
				}
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&checkpoint, "checkpoint", "", "checkpoint directory or object-store key prefix (default: the config's inference.checkpoint)")
	f.StringVar(&addr, "addr", "127.0.0.1:30000", "listen address (port 0 picks a free one)")
	f.StringVar(&precision, "precision", "", "serving precision, bf16 or f32 (default: the config's inference.precision)")
	f.StringVar(&version, "weight-version", "", "weight version to report (default: the checkpoint's policy_version, else 0)")
	return cmd
}
