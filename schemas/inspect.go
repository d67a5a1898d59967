package schemas

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/parquet-go/parquet-go"
)

// ColumnChunk is one column of a row group.
type ColumnChunk struct {
	Path             string   `json:"path"`
	Type             string   `json:"type"`
	Codec            string   `json:"codec"`
	Encodings        []string `json:"encodings"`
	Values           int64    `json:"values"`
	CompressedSize   int64    `json:"compressed_bytes"`
	UncompressedSize int64    `json:"uncompressed_bytes"`
}

// RowGroup is one row group of a file.
type RowGroup struct {
	Rows    int64         `json:"rows"`
	Bytes   int64         `json:"bytes"`
	Columns []ColumnChunk `json:"columns"`
}

// FileReport is what Inspect finds in a Parquet file.
type FileReport struct {
	Object    string            `json:"object"`
	Bytes     int64             `json:"bytes"`
	Rows      int64             `json:"rows"`
	CreatedBy string            `json:"created_by"`
	Metadata  map[string]string `json:"metadata"`
	// Check is "ok" or why t1's readers would refuse the file.
	Check     string     `json:"check"`
	Schema    string     `json:"schema"`
	RowGroups []RowGroup `json:"row_groups"`
}

// Inspect reads a Parquet file's footer: its schema, metadata, row
// groups and column chunks, and whether t1's readers would take it (the
// table and version its metadata claims). name only labels the report.
func Inspect(name string, data []byte) (*FileReport, error) {
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("inspect: %s: not a readable Parquet file (truncated or corrupted?): %w", name, err)
	}
	md := pf.Metadata()
	rep := &FileReport{Object: name, Bytes: int64(len(data)), Rows: pf.NumRows(), CreatedBy: md.CreatedBy,
		Metadata: map[string]string{}, Schema: pf.Schema().String(), Check: "ok"}
	for _, kv := range md.KeyValueMetadata {
		rep.Metadata[kv.Key] = kv.Value
	}
	if _, _, err := CheckMetadata(name, rep.Metadata[MetaTable], rep.Metadata[MetaVersion], ""); err != nil {
		rep.Check = err.Error()
	}
	for _, rg := range md.RowGroups {
		info := RowGroup{Rows: rg.NumRows, Bytes: rg.TotalByteSize}
		for _, cc := range rg.Columns {
			m := cc.MetaData
			c := ColumnChunk{Path: strings.Join(m.PathInSchema, "."), Type: m.Type.String(), Codec: m.Codec.String(),
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

// WriteText prints rep as `t1 inspect` does.
func (rep *FileReport) WriteText(w io.Writer) {
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
