package schemas

import (
	"fmt"

	"github.com/t1pipe/t1/schemas/routing"
)

// NewRoutingRow encodes rec into a routing-table row. Use routing.Packed
// for rows a GPU trainer views directly (see RoutingRow.IDsOffset) and
// routing.Auto for the most compact storage.
func NewRoutingRow(run, taskID string, attempt, chunk int, rec *routing.Record, enc routing.Encoding) (RoutingRow, error) {
	b, err := routing.Encode(nil, rec, enc)
	if err != nil {
		return RoutingRow{}, fmt.Errorf("routing row %s/%d/%d: %w", taskID, attempt, chunk, err)
	}
	info, err := routing.ReadInfo(b)
	if err != nil {
		return RoutingRow{}, err
	}
	row := RoutingRow{
		Run: run, TaskID: taskID, Attempt: int32(attempt), Chunk: int32(chunk),
		Tokens: int32(rec.Tokens), Layers: int32(rec.Layers), TopK: int32(rec.TopK), Experts: int32(rec.Experts),
		Encoding: info.Encoding.String(), IDsOffset: -1, Record: b,
	}
	if info.Encoding == routing.Packed {
		// The packed ids sit between the header and the 4-byte checksum.
		row.IDsOffset = int32(len(b) - 4 - rec.RawBytes())
	}
	return row, nil
}

// Decode decodes the row's record and checks it against the row's columns.
func (r RoutingRow) Decode() (*routing.Record, error) {
	rec, err := routing.Decode(r.Record)
	if err != nil {
		return nil, fmt.Errorf("routing row %s/%d/%d: %w", r.TaskID, r.Attempt, r.Chunk, err)
	}
	if rec.Tokens != int(r.Tokens) || rec.Layers != int(r.Layers) || rec.TopK != int(r.TopK) || rec.Experts != int(r.Experts) {
		return nil, fmt.Errorf("routing row %s/%d/%d: record is %d×%d×top-%d of %d experts, columns say %d×%d×top-%d of %d",
			r.TaskID, r.Attempt, r.Chunk, rec.Tokens, rec.Layers, rec.TopK, rec.Experts, r.Tokens, r.Layers, r.TopK, r.Experts)
	}
	return rec, nil
}
