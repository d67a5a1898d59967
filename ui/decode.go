package ui

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/t1pipe/t1/query"
)

// decode turns a page's rows into T, each field filled from the column
// its JSON name names: numbers, strings, booleans and lists of them
// straight from the Arrow arrays (a 64k-token chunk is three such lists),
// any other column through its JSON form. A null leaves a pointer field
// nil and any other field zero.
func decode[T any](p *query.Page) ([]T, error) {
	if p.Rows == nil {
		return nil, nil
	}
	rec := p.Rows
	rows := make([]T, rec.NumRows())
	typ := reflect.TypeFor[T]()
	for f := range typ.NumField() {
		field := typ.Field(f)
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		idx := rec.Schema().FieldIndices(name)
		if len(idx) == 0 {
			continue
		}
		col := rec.Column(idx[0])
		for i := range rows {
			if col.IsNull(i) {
				continue
			}
			dst := reflect.ValueOf(&rows[i]).Elem().Field(f)
			if err := fill(dst, col, i); err != nil {
				return nil, fmt.Errorf("ui: column %s: %w", name, err)
			}
		}
	}
	return rows, nil
}

// fill sets dst to value i of col.
func fill(dst reflect.Value, col arrow.Array, i int) error {
	if dst.Kind() == reflect.Pointer {
		dst.Set(reflect.New(dst.Type().Elem()))
		dst = dst.Elem()
	}
	switch a := col.(type) {
	case *array.Int32:
		dst.SetInt(int64(a.Value(i)))
	case *array.Int64:
		dst.SetInt(a.Value(i))
	case *array.Float64:
		dst.SetFloat(a.Value(i))
	case *array.Float32:
		dst.SetFloat(float64(a.Value(i)))
	case *array.String:
		dst.SetString(a.Value(i))
	case *array.Boolean:
		dst.SetBool(a.Value(i))
	case *array.Binary:
		dst.SetBytes(append([]byte(nil), a.Value(i)...))
	case *array.List:
		lo, hi := a.ValueOffsets(i)
		switch v := a.ListValues().(type) {
		case *array.Int32:
			if s, ok := dst.Addr().Interface().(*[]int32); ok {
				*s = append([]int32(nil), v.Int32Values()[lo:hi]...)
				return nil
			}
		case *array.Float32:
			if s, ok := dst.Addr().Interface().(*[]float32); ok {
				*s = append([]float32(nil), v.Float32Values()[lo:hi]...)
				return nil
			}
		case *array.Boolean:
			if s, ok := dst.Addr().Interface().(*[]bool); ok {
				*s = make([]bool, hi-lo)
				for j := range *s {
					(*s)[j] = v.Value(int(lo) + j)
				}
				return nil
			}
		}
		return viaJSON(dst, col, i)
	default:
		return viaJSON(dst, col, i)
	}
	return nil
}

func viaJSON(dst reflect.Value, col arrow.Array, i int) error {
	b, err := json.Marshal(col.GetOneForMarshal(i))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst.Addr().Interface())
}
