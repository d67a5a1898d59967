package main

import (
	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/config"
)

func configCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "The pipeline configuration"}
	cmd.AddCommand(&cobra.Command{
		Use:   "defaults",
		Short: "Print the built-in configuration as YAML (--json: as JSON)",
		Long: `Prints the built-in configuration, every key with its default value: what a
run uses for each key its pipeline.yaml leaves out. pipeline.yaml at the
repository root spells out the same values with comments.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := config.Default()
			out, err := c.YAML()
			if g.json {
				out, err = c.JSON()
			}
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	})
	return cmd
}
