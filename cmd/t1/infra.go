package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/local"
)

func infraCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "infra", Short: "Run the embedded infrastructure"}
	cmd.AddCommand(&cobra.Command{
		Use:   "up",
		Short: "Run embedded NATS JetStream and S3 in the foreground until interrupted",
		Long: "Runs the embedded servers on the data directory and prints their endpoints, which are also\n" +
			"written to <data>/endpoints.json for other t1 processes and the nats CLI.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := g.open(cmd.Context(), local.Options{Serve: true})
			if err != nil {
				return err
			}
			defer in.Close()
			if !in.Owner && (in.Config.Bus.Mode == "embedded" || in.Config.Store.Mode == "embedded") {
				return fmt.Errorf("data directory %s is already served by process %d", in.DataDir, in.Endpoints.PID)
			}
			if g.json {
				if err := printJSON(cmd, in.Endpoints); err != nil {
					return err
				}
			} else {
				out := cmd.OutOrStdout()
				fmt.Fprintf(out, "nats:   %s\n", in.Endpoints.NATS)
				fmt.Fprintf(out, "s3:     http://%s  bucket %s  credentials %s\n", in.Endpoints.S3, in.Endpoints.Bucket, in.Endpoints.Credentials)
				fmt.Fprintf(out, "data:   %s  (endpoints in %s)\n", in.DataDir, local.EndpointsPath(in.DataDir))
				fmt.Fprintln(out, "serving; Ctrl-C stops")
			}
			<-cmd.Context().Done()
			return nil
		},
	})
	return cmd
}
