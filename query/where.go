package query

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/scalar"
)

// Expr is a parsed --where expression, which filters the rows of a
// record batch; the grammar is in the package's doc. String prints it
// back in that grammar, fully parenthesised, so that parsing what it
// prints gives the same expression.
type Expr interface {
	// eval returns a boolean array over the rows of rec.
	eval(ctx context.Context, rec arrow.RecordBatch) (arrow.Array, error)
	columns(add func(string))
	String() string
}

func (c *cmpExpr) String() string { return c.col + " " + c.op + " " + c.lit.String() }
func (b *boolExpr) String() string {
	return "(" + b.l.String() + " " + strings.ToUpper(b.op) + " " + b.r.String() + ")"
}
func (n *notExpr) String() string { return "NOT " + n.x.String() }

func (l literal) String() string {
	switch l.kind {
	case 's':
		return "'" + strings.ReplaceAll(l.text, "'", "''") + "'"
	case 'b':
		return strconv.FormatBool(l.b)
	}
	return l.text
}

type literal struct {
	kind  byte // 'n' number, 's' string, 'b' bool
	text  string
	num   float64
	isInt bool
	i     int64
	b     bool
}

type cmpExpr struct {
	col string
	op  string
	lit literal
}

type boolExpr struct {
	op   string // and, or
	l, r Expr
}

type notExpr struct{ x Expr }

type token struct {
	kind byte // 'i' identifier, 'n' number, 's' string, 'o' operator, '(' , ')', 0 end
	text string
	pos  int
}

func lexWhere(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '(' || c == ')':
			out = append(out, token{kind: c, text: string(c), pos: i})
			i++
		case c == '=' || c == '!' || c == '<' || c == '>':
			op := string(c)
			if i+1 < len(s) && s[i+1] == '=' {
				op += "="
			}
			if op == "!" {
				return nil, fmt.Errorf("--where: position %d: '!' must be followed by '='", i)
			}
			if op == "==" {
				op = "="
			}
			out = append(out, token{kind: 'o', text: op, pos: i})
			i += len(op)
			if op == "=" && i < len(s) && s[i] == '=' {
				i++
			}
		case c == '\'' || c == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(s); j++ {
				if s[j] == c {
					if j+1 < len(s) && s[j+1] == c { // doubled quote
						b.WriteByte(c)
						j++
						continue
					}
					break
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("--where: position %d: unterminated string", i)
			}
			out = append(out, token{kind: 's', text: b.String(), pos: i})
			i = j + 1
		case c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.' || s[j] == 'e' || s[j] == 'E' ||
				(s[j] == '-' || s[j] == '+') && (s[j-1] == 'e' || s[j-1] == 'E')) {
				j++
			}
			out = append(out, token{kind: 'n', text: s[i:j], pos: i})
			i = j
		case c == '_' || unicode.IsLetter(rune(c)):
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] == '.' || unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j]))) {
				j++
			}
			out = append(out, token{kind: 'i', text: s[i:j], pos: i})
			i = j
		default:
			return nil, fmt.Errorf("--where: position %d: unexpected %q", i, c)
		}
	}
	return append(out, token{pos: len(s)}), nil
}

type whereParser struct {
	toks []token
	i    int
}

// ParseWhere parses a --where expression.
func ParseWhere(s string) (Expr, error) {
	toks, err := lexWhere(s)
	if err != nil {
		return nil, err
	}
	p := &whereParser{toks: toks}
	e, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != 0 {
		return nil, fmt.Errorf("--where: position %d: unexpected %q", t.pos, t.text)
	}
	return e, nil
}

func (p *whereParser) peek() token { return p.toks[p.i] }
func (p *whereParser) next() token { t := p.toks[p.i]; p.i++; return t }

func (p *whereParser) keyword(k string) bool {
	t := p.peek()
	if t.kind == 'i' && strings.EqualFold(t.text, k) {
		p.i++
		return true
	}
	return false
}

func (p *whereParser) or() (Expr, error) {
	l, err := p.and()
	for err == nil && p.keyword("or") {
		var r Expr
		if r, err = p.and(); err == nil {
			l = &boolExpr{op: "or", l: l, r: r}
		}
	}
	return l, err
}

func (p *whereParser) and() (Expr, error) {
	l, err := p.unary()
	for err == nil && p.keyword("and") {
		var r Expr
		if r, err = p.unary(); err == nil {
			l = &boolExpr{op: "and", l: l, r: r}
		}
	}
	return l, err
}

func (p *whereParser) unary() (Expr, error) {
	if p.keyword("not") {
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &notExpr{x}, nil
	}
	t := p.next()
	switch t.kind {
	case '(':
		e, err := p.or()
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != ')' {
			return nil, fmt.Errorf("--where: position %d: want ')'", c.pos)
		}
		return e, nil
	case 'i':
		if isKeyword(t.text) {
			return nil, fmt.Errorf("--where: position %d: want a column, got %q", t.pos, t.text)
		}
		op := p.next()
		if op.kind != 'o' {
			return nil, fmt.Errorf("--where: position %d: want a comparison after %q", op.pos, t.text)
		}
		lt := p.next()
		lit, err := parseLiteral(lt)
		if err != nil && lt.kind == 'i' {
			// A bare word where a value goes is text someone forgot to quote.
			return nil, fmt.Errorf("%w; quote text: %s %s '%s'", err, t.text, op.text, strings.ReplaceAll(lt.text, "'", "''"))
		}
		if err != nil {
			return nil, err
		}
		return &cmpExpr{col: t.text, op: op.text, lit: lit}, nil
	case 0:
		return nil, fmt.Errorf("--where: position %d: expression ends early", t.pos)
	}
	return nil, fmt.Errorf("--where: position %d: unexpected %q", t.pos, t.text)
}

func isKeyword(s string) bool {
	switch strings.ToLower(s) {
	case "and", "or", "not", "true", "false":
		return true
	}
	return false
}

func parseLiteral(t token) (literal, error) {
	switch t.kind {
	case 's':
		return literal{kind: 's', text: t.text}, nil
	case 'n':
		if i, err := strconv.ParseInt(t.text, 10, 64); err == nil {
			return literal{kind: 'n', text: t.text, num: float64(i), isInt: true, i: i}, nil
		}
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return literal{}, fmt.Errorf("--where: position %d: bad number %q", t.pos, t.text)
		}
		return literal{kind: 'n', text: t.text, num: f}, nil
	case 'i':
		switch strings.ToLower(t.text) {
		case "true":
			return literal{kind: 'b', text: t.text, b: true}, nil
		case "false":
			return literal{kind: 'b', text: t.text}, nil
		}
	}
	return literal{}, fmt.Errorf("--where: position %d: want a number, a quoted string, true or false, got %q", t.pos, t.text)
}

var cmpFuncs = map[string]string{"=": "equal", "!=": "not_equal", "<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal"}

func (c *cmpExpr) columns(add func(string))  { add(c.col) }
func (b *boolExpr) columns(add func(string)) { b.l.columns(add); b.r.columns(add) }
func (n *notExpr) columns(add func(string))  { n.x.columns(add) }

func (c *cmpExpr) eval(ctx context.Context, rec arrow.RecordBatch) (arrow.Array, error) {
	idx := rec.Schema().FieldIndices(c.col)
	if len(idx) == 0 {
		return nil, fmt.Errorf("--where: no column %q", c.col)
	}
	col := rec.Column(idx[0])
	var (
		arr arrow.Array
		sc  scalar.Scalar
		err error
	)
	typ := col.DataType()
	switch {
	case arrow.IsInteger(typ.ID()) && c.lit.kind == 'n' && c.lit.isInt:
		if arrow.IsUnsignedInteger(typ.ID()) && c.lit.i >= 0 {
			arr, err = compute.CastToType(ctx, col, arrow.PrimitiveTypes.Uint64)
			sc = scalar.NewUint64Scalar(uint64(c.lit.i))
		} else {
			arr, err = compute.CastToType(ctx, col, arrow.PrimitiveTypes.Int64)
			sc = scalar.NewInt64Scalar(c.lit.i)
		}
		if arrow.IsUnsignedInteger(typ.ID()) && c.lit.i < 0 {
			// A negative literal against an unsigned column: compare as
			// floats so that "> -1" is true and "= -1" false.
			arr.Release()
			arr, err = compute.CastToType(ctx, col, arrow.PrimitiveTypes.Float64)
			sc = scalar.NewFloat64Scalar(c.lit.num)
		}
	case (arrow.IsInteger(typ.ID()) || arrow.IsFloating(typ.ID())) && c.lit.kind == 'n':
		arr, err = compute.CastToType(ctx, col, arrow.PrimitiveTypes.Float64)
		sc = scalar.NewFloat64Scalar(c.lit.num)
	case (typ.ID() == arrow.STRING || typ.ID() == arrow.LARGE_STRING) && c.lit.kind == 's':
		arr, err = compute.CastToType(ctx, col, arrow.BinaryTypes.String)
		sc = scalar.NewStringScalar(c.lit.text)
	case typ.ID() == arrow.BOOL && c.lit.kind == 'b':
		col.Retain()
		arr = col
		sc = scalar.NewBooleanScalar(c.lit.b)
	default:
		return nil, fmt.Errorf("--where: column %q is %s and cannot be compared with %s", c.col, typ, c.lit.text)
	}
	if err != nil {
		return nil, fmt.Errorf("--where: column %q: %w", c.col, err)
	}
	defer arr.Release()
	out, err := compute.CallFunction(ctx, cmpFuncs[c.op], nil, compute.NewDatumWithoutOwning(arr), compute.NewDatum(sc))
	if err != nil {
		return nil, fmt.Errorf("--where: %s %s %s: %w", c.col, c.op, c.lit.text, err)
	}
	return out.(*compute.ArrayDatum).MakeArray(), nil
}

func (b *boolExpr) eval(ctx context.Context, rec arrow.RecordBatch) (arrow.Array, error) {
	l, err := b.l.eval(ctx, rec)
	if err != nil {
		return nil, err
	}
	defer l.Release()
	r, err := b.r.eval(ctx, rec)
	if err != nil {
		return nil, err
	}
	defer r.Release()
	out, err := compute.CallFunction(ctx, b.op+"_kleene", nil, compute.NewDatumWithoutOwning(l), compute.NewDatumWithoutOwning(r))
	if err != nil {
		return nil, err
	}
	return out.(*compute.ArrayDatum).MakeArray(), nil
}

func (n *notExpr) eval(ctx context.Context, rec arrow.RecordBatch) (arrow.Array, error) {
	x, err := n.x.eval(ctx, rec)
	if err != nil {
		return nil, err
	}
	defer x.Release()
	out, err := compute.CallFunction(ctx, "not", nil, compute.NewDatumWithoutOwning(x))
	if err != nil {
		return nil, err
	}
	return out.(*compute.ArrayDatum).MakeArray(), nil
}
