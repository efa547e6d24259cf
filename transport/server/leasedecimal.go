package server

import (
	"encoding/json"
	"math/big"
	"reflect"
	"regexp"
	"strings"

	"github.com/permitd/permitd/fsm"
)

// leasedecimal.go: the deprecated demand_per_sec field, a JSON number of
// permits per second, converted to the thousandths the register counts in
// exactly (through a rational, never a binary float), any remainder
// rounded up:
//
//	milli = ceil(1000 * demand_per_sec)
//
// It is kept apart so that it leaves in one piece with the older spelling.

// jsonDecimal is a JSON number kept as its text, so that it converts to
// thousandths exactly. Any other JSON type, null included, is rejected
// with the field's name.
type jsonDecimal struct {
	Set bool
	lit string
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *jsonDecimal) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeFor[float64]()}
	}
	d.Set, d.lit = true, string(b)
	return nil
}

// jsonKind names the JSON type of a value that is not a number.
func jsonKind(b []byte) string {
	if len(b) > 0 {
		switch b[0] {
		case 'n':
			return "null"
		case 't', 'f':
			return "bool"
		case '{':
			return "object"
		case '[':
			return "array"
		}
	}
	return "string"
}

// jsonNumberSyntax is the grammar of a JSON number.
var jsonNumberSyntax = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE]([+-]?)([0-9]+))?$`)

// decimalMilli converts a JSON number of permits per second to
// thousandths exactly (through a rational, never a binary float), rounding
// any remainder up so that a positive demand never becomes 0. ok is false
// for a negative, malformed or too large number (over
// fsm.MaxDemandMilliPermitsPerSec).
func decimalMilli(lit string) (milli int64, ok bool) {
	m := jsonNumberSyntax.FindStringSubmatch(lit)
	if m == nil {
		return 0, false
	}
	mantissa := strings.TrimLeft(strings.ReplaceAll(m[1]+m[2], ".", ""), "0")
	switch {
	case mantissa == "":
		return 0, true // zero, "-0" included
	case lit[0] == '-':
		return 0, false
	case len(strings.TrimLeft(m[5], "0")) > 4:
		// An exponent of 10^5 or more: far out of range, or far below a
		// thousandth (which rounds up to one).
		if m[4] == "-" {
			return 1, true
		}
		return 0, false
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		return 0, false
	}
	r.Mul(r, big.NewRat(1000, 1))
	q, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if rem.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() || q.Int64() > fsm.MaxDemandMilliPermitsPerSec {
		return 0, false
	}
	return q.Int64(), true
}
