package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// MaxBodyBytes is the largest request body accepted (1 MiB); larger bodies
// are answered with 413.
const MaxBodyBytes = 1 << 20

// bufPool holds buffers for request bodies and encoded responses.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuf is the largest buffer returned to the pool; larger ones (from
// a rare big body) are left to the garbage collector.
const maxPooledBuf = 64 << 10

func getBuf() *bytes.Buffer {
	b := bufPool.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func putBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBuf {
		bufPool.Put(b)
	}
}

// httpError is an error with the status code it is answered with.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

// badRequest returns a 400 error with a formatted message.
func badRequest(format string, args ...any) *httpError {
	return &httpError{code: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// readBody reads the whole request body, at most MaxBodyBytes, into buf.
func readBody(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer) *httpError {
	if r.Body == nil {
		return nil
	}
	if rec, ok := w.(*recorder); ok {
		// MaxBytesReader closes the connection after an oversized body
		// only when it sees the server's own writer.
		w = rec.ResponseWriter
	}
	if r.ContentLength > MaxBodyBytes {
		return &httpError{code: http.StatusRequestEntityTooLarge,
			msg: fmt.Sprintf("request body is %d bytes; allowed: at most %d bytes (1 MiB)", r.ContentLength, MaxBodyBytes)}
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &httpError{code: http.StatusRequestEntityTooLarge,
				msg: fmt.Sprintf("request body is larger than %d bytes; allowed: at most %d bytes (1 MiB)", MaxBodyBytes, MaxBodyBytes)}
		}
		return badRequest("cannot read request body: %v", err)
	}
	return nil
}

// decodeObject decodes body, which must be exactly one JSON object whose
// keys are all fields of v, into v. fields describes each field for error
// messages (name → what is allowed). An empty body is allowed when
// emptyOK (and leaves v untouched).
func decodeObject(body []byte, v any, fields fieldHelp, emptyOK bool) *httpError {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		if emptyOK {
			return nil
		}
		return badRequest("request body is empty; expected a JSON object with fields %s", fields.list())
	}
	if trimmed[0] != '{' {
		return badRequest("request body must be a JSON object with fields %s", fields.list())
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(err, fields)
	}
	if rest := bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n"); len(rest) != 0 {
		return badRequest("unexpected data after the JSON object at offset %d; send exactly one JSON object", dec.InputOffset())
	}
	return nil
}

// describeJSONError turns an encoding/json error into a 400 that says what
// was wrong and what is allowed.
func describeJSONError(err error, fields fieldHelp) *httpError {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return badRequest("truncated JSON: the body ends before the object is complete")
	case errors.As(err, &syn):
		return badRequest("malformed JSON at offset %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badRequest("request body must be a JSON object with fields %s", fields.list())
		}
		return badRequest("field %q: got JSON %s; allowed: %s", typ.Field, typ.Value, fields.help(typ.Field))
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return badRequest("unknown field %s; allowed fields: %s", f, fields.list())
	}
	return badRequest("invalid JSON: %s", strings.TrimPrefix(msg, "json: "))
}

// fieldHelp maps each JSON field of a request to a description of what is
// allowed in it, in the order they are listed in errors.
type fieldHelp []struct{ name, allowed string }

func (f fieldHelp) help(name string) string {
	for _, e := range f {
		if e.name == name {
			return e.allowed
		}
	}
	return "see the API documentation"
}

func (f fieldHelp) list() string {
	var b strings.Builder
	for i, e := range f {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(e.name))
	}
	if b.Len() == 0 {
		return "(none)"
	}
	return b.String()
}

// opt is a request field that records whether its key was present, so that
// an option that belongs to another algorithm can be rejected even when it
// carries a zero value. JSON null is rejected.
type opt[T any] struct {
	set bool
	v   T
}

// UnmarshalJSON implements json.Unmarshaler.
func (o *opt[T]) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		// Reported like a wrong type, so the decoder names the field.
		return &json.UnmarshalTypeError{Value: "null", Type: reflect.TypeFor[T]()}
	}
	o.set = true
	return json.Unmarshal(b, &o.v)
}

// writeJSON encodes v as the response with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	buf := getBuf()
	defer putBuf(buf)
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		// Only non-finite floats can fail here, and the views use
		// jsonFloat for those; answer something well-formed anyway.
		buf.Reset()
		buf.WriteString(`{"error":"cannot encode response"}` + "\n")
		code = http.StatusServiceUnavailable
	}
	writeRaw(w, code, buf.Bytes())
}

// writeRaw writes an already encoded JSON body.
func writeRaw(w http.ResponseWriter, code int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

var jsonContentType = []string{"application/json"}

// writeError answers {"error": msg} with status code.
func writeError(w http.ResponseWriter, code int, msg string) {
	buf := getBuf()
	defer putBuf(buf)
	b := buf.AvailableBuffer()
	b = append(b, `{"error":`...)
	b = appendJSONString(b, msg)
	b = append(b, "}\n"...)
	writeRaw(w, code, b)
}

// appendJSONString appends s as a JSON string literal. Control characters
// and invalid UTF-8 are escaped so the output is always valid JSON.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else if r == '\u2028' || r == '\u2029' {
			b = append(b, `\u202`...)
			b = append(b, hex[r&0xf])
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// jsonFloat is a float64 that encodes non-finite values as the strings
// "+Inf", "-Inf" and "NaN" instead of failing.
type jsonFloat float64

// MarshalJSON implements json.Marshaler.
func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}
