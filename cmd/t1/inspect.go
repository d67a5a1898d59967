package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/parquet-go/parquet-go"
	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/schemas"
)

type columnChunkInfo struct {
	Path             string   `json:"path"`
	Type             string   `json:"type"`
	Codec            string   `json:"codec"`
	Encodings        []string `json:"encodings"`
	Values           int64    `json:"values"`
	CompressedSize   int64    `json:"compressed_bytes"`
	UncompressedSize int64    `json:"uncompressed_bytes"`
}

type rowGroupInfo struct {
	Rows    int64             `json:"rows"`
	Bytes   int64             `json:"bytes"`
	Columns []columnChunkInfo `json:"columns"`
}

type inspectReport struct {
	Object    string            `json:"object"`
	Bytes     int64             `json:"bytes"`
	Rows      int64             `json:"rows"`
	CreatedBy string            `json:"created_by"`
	Metadata  map[string]string `json:"metadata"`
	// Check is "ok" or why t1's readers would refuse the file.
	Check     string         `json:"check"`
	Schema    string         `json:"schema"`
	RowGroups []rowGroupInfo `json:"row_groups"`
}

func inspectCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect FILE|KEY",
		Short: "Show a Parquet file's schema, metadata, row groups and column chunks",
		Long: `Inspects a local Parquet file, or, when no such file exists, an object key in the
configured store (e.g. runs/r1/tokens/iter=0001/part-….parquet, as printed by events).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			data, err := os.ReadFile(name)
			if os.IsNotExist(err) {
				data, err = fetchObject(cmd.Context(), g, name)
			}
			if err != nil {
				return err
			}
			rep, err := inspectParquet(name, data)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd, rep)
			}
			printInspect(cmd.OutOrStdout(), rep)
			return nil
		},
	}
}

func fetchObject(ctx context.Context, g *globals, key string) ([]byte, error) {
	cfg, err := g.load()
	if err != nil {
		return nil, err
	}
	in, err := local.Open(ctx, cfg, local.Options{})
	if err != nil {
		return nil, err
	}
	defer in.Close()
	rc, _, err := in.Store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("inspect: %s is neither a local file nor a store object: %w", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("inspect: %s: %w", key, err)
	}
	return data, nil
}

func inspectParquet(name string, data []byte) (*inspectReport, error) {
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("inspect: %s: not a readable Parquet file (truncated or corrupted?): %w", name, err)
	}
	md := pf.Metadata()
	rep := &inspectReport{Object: name, Bytes: int64(len(data)), Rows: pf.NumRows(), CreatedBy: md.CreatedBy,
		Metadata: map[string]string{}, Schema: pf.Schema().String(), Check: "ok"}
	for _, kv := range md.KeyValueMetadata {
		rep.Metadata[kv.Key] = kv.Value
	}
	if _, _, err := schemas.CheckMetadata(name, rep.Metadata[schemas.MetaTable], rep.Metadata[schemas.MetaVersion], ""); err != nil {
		rep.Check = err.Error()
	}
	for _, rg := range md.RowGroups {
		info := rowGroupInfo{Rows: rg.NumRows, Bytes: rg.TotalByteSize}
		for _, cc := range rg.Columns {
			m := cc.MetaData
			c := columnChunkInfo{Path: strings.Join(m.PathInSchema, "."), Type: m.Type.String(), Codec: m.Codec.String(),
				Values: m.NumValues, CompressedSize: m.TotalCompressedSize, UncompressedSize: m.TotalUncompressedSize}
			for _, e := range m.Encoding {
				c.Encodings = append(c.Encodings, e.String())
			}
			info.Columns = append(info.Columns, c)
		}
		rep.RowGroups = append(rep.RowGroups, info)
	}
	return rep, nil
}

func printInspect(w io.Writer, rep *inspectReport) {
	fmt.Fprintf(w, "object      %s\nbytes       %d\nrows        %d\nrow groups  %d\ncreated by  %s\ncheck       %s\n",
		rep.Object, rep.Bytes, rep.Rows, len(rep.RowGroups), rep.CreatedBy, rep.Check)
	fmt.Fprintln(w, "\nmetadata")
	for _, k := range slices.Sorted(maps.Keys(rep.Metadata)) {
		v := rep.Metadata[k]
		if len(v) > 120 {
			v = v[:117] + "..."
		}
		fmt.Fprintf(w, "  %s = %s\n", k, v)
	}
	fmt.Fprintf(w, "\nschema\n%s\n", rep.Schema)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for i, rg := range rep.RowGroups {
		fmt.Fprintf(tw, "\nrow group %d: %d rows, %d bytes uncompressed\n", i, rg.Rows, rg.Bytes)
		fmt.Fprintln(tw, "  COLUMN\tTYPE\tCODEC\tENCODINGS\tVALUES\tCOMPRESSED\tUNCOMPRESSED\tRATIO")
		for _, c := range rg.Columns {
			ratio := 0.0
			if c.UncompressedSize > 0 {
				ratio = float64(c.CompressedSize) / float64(c.UncompressedSize)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%d\t%d\t%.3f\n", c.Path, c.Type, c.Codec, strings.Join(c.Encodings, ","),
				c.Values, c.CompressedSize, c.UncompressedSize, ratio)
		}
	}
	tw.Flush()
}
