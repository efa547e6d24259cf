package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/permitd/permitd/transport/api"
)

// partsjson.go: decoding the list of limits of POST /v1/reserve and of a
// settlement.
//
// The list is strict like every request field (no unknown key, no null;
// api.Opt), which encoding/json does with a decoder of its own for the
// list and a reflective decode per key: at three limits a sixth of the
// leader's CPU went to decoding the request. So the list is first read by
// a small parser that accepts only its usual shape, [{"name":"...",
// "permits":N}, ...] with names of the characters a limit name may hold
// and permits plain integers, each key at most once; anything else (an
// escape, another key, a float, a duplicate, an empty list, bad syntax)
// goes to the strict decoder, which decides and words the error as
// before. The parser accepts nothing the strict decoder would decode
// differently (FuzzPartRequests).

// partRequests is a list of limit parts in a request body.
type partRequests []partRequest

// partFields describes the fields of one entry of a list of limits (in a
// reserve's "limits", a settlement's "actual").
var partFields = api.Fields{
	{"name", "a limit name"},
	{"permits", "an integer: the permits of that limit (> 0 in a reserve, default 1; >= 0 and required in a settlement)"},
}

// UnmarshalJSON implements json.Unmarshaler: the fast parser, or the
// strict decoder, whose errors name the fields of an entry (not those of
// the request around the list).
func (p *partRequests) UnmarshalJSON(b []byte) error {
	if parts, ok := parseCommonParts(b); ok {
		*p = parts
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var v []partRequest
	if err := dec.Decode(&v); err != nil {
		var typ *json.UnmarshalTypeError
		if (errors.As(err, &typ) && typ.Field != "") || strings.HasPrefix(err.Error(), "json: unknown field ") {
			return api.DescribeNested("an entry of the list of limits", err, partFields)
		}
		// The list, or an entry, is not of its type at all (or bad syntax,
		// which the request's decoder has ruled out before): the request's
		// decoder words it, naming the list's field.
		return err
	}
	*p = v
	return nil
}

// partsScanner reads the common shape of a parts list.
type partsScanner struct {
	b []byte
	i int
}

// parseCommonParts parses b if it is a non-empty list in the common shape;
// ok is false otherwise (parts is then nil).
func parseCommonParts(b []byte) (parts []partRequest, ok bool) {
	s := partsScanner{b: b}
	if !s.byte('[') {
		return nil, false
	}
	for {
		part, ok := s.object()
		if !ok {
			return nil, false
		}
		parts = append(parts, part)
		if s.byte(']') {
			break
		}
		if !s.byte(',') {
			return nil, false
		}
	}
	s.space()
	return parts, s.i == len(s.b)
}

// space skips JSON whitespace.
func (s *partsScanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// byte skips whitespace and c, reporting whether c was there.
func (s *partsScanner) byte(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// object reads {"name": "...", "permits": N} with either key optional and
// in either order, each at most once.
func (s *partsScanner) object() (p partRequest, ok bool) {
	if !s.byte('{') {
		return p, false
	}
	if s.byte('}') {
		return p, true
	}
	for {
		key, ok := s.nameString()
		if !ok || !s.byte(':') {
			return p, false
		}
		s.space()
		switch key {
		case "name":
			v, ok := s.nameString()
			if !ok || p.Name.Set {
				return p, false
			}
			p.Name = api.Opt[string]{Set: true, V: v}
		case "permits":
			v, ok := s.integer()
			if !ok || p.Permits.Set {
				return p, false
			}
			p.Permits = api.Opt[int64]{Set: true, V: v}
		default:
			return p, false
		}
		if s.byte('}') {
			return p, true
		}
		if !s.byte(',') {
			return p, false
		}
	}
}

// nameString reads a string of the characters a limit name may hold
// (A-Z a-z 0-9 _ . : -), without escapes.
func (s *partsScanner) nameString() (string, bool) {
	if !s.byte('"') {
		return "", false
	}
	start := s.i
	for s.i < len(s.b) && s.b[s.i] != '"' {
		c := s.b[s.i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return "", false
		}
		s.i++
	}
	if s.i == len(s.b) {
		return "", false
	}
	v := string(s.b[start:s.i])
	s.i++
	return v, true
}

// integer reads a JSON integer that fits an int64: an optional minus, then
// 0 or digits without a leading zero, and no fraction or exponent.
func (s *partsScanner) integer() (int64, bool) {
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	start := s.i
	var v uint64
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		if v > (1<<63)/10 {
			return 0, false
		}
		v = v*10 + uint64(s.b[s.i]-'0')
		s.i++
	}
	n := s.i - start
	switch {
	case n == 0, n > 1 && s.b[start] == '0':
		return 0, false
	case s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E'):
		return 0, false
	case neg && (v == 0 || v > 1<<63), !neg && v > 1<<63-1:
		return 0, false // "-0" too: left to the strict decoder
	}
	if neg {
		return -int64(v-1) - 1, true
	}
	return int64(v), true
}
