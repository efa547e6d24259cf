package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// GetBuf returns an empty buffer from the pool.
func GetBuf() *bytes.Buffer {
	b := bufPool.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

// PutBuf returns b to the pool (unless it grew large).
func PutBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBuf {
		bufPool.Put(b)
	}
}

// Error is an error with the status code it is answered with.
type Error struct {
	// Code is the HTTP status, Msg the message (what was wrong and what
	// is allowed).
	Code int
	Msg  string
}

// Error implements error.
func (e *Error) Error() string { return e.Msg }

// BadRequest returns a 400 error with a formatted message.
func BadRequest(format string, args ...any) *Error {
	return &Error{Code: http.StatusBadRequest, Msg: fmt.Sprintf(format, args...)}
}

// ReadBody reads the whole request body, at most MaxBodyBytes, into buf.
func ReadBody(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer) *Error {
	if r.Body == nil {
		return nil
	}
	if u, ok := w.(interface{ Unwrap() http.ResponseWriter }); ok {
		// MaxBytesReader closes the connection after an oversized body
		// only when it sees the server's own writer.
		w = u.Unwrap()
	}
	if r.ContentLength > MaxBodyBytes {
		return &Error{Code: http.StatusRequestEntityTooLarge,
			Msg: fmt.Sprintf("request body is %d bytes; allowed: at most %d bytes (1 MiB)", r.ContentLength, MaxBodyBytes)}
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &Error{Code: http.StatusRequestEntityTooLarge,
				Msg: fmt.Sprintf("request body is larger than %d bytes; allowed: at most %d bytes (1 MiB)", MaxBodyBytes, MaxBodyBytes)}
		}
		return BadRequest("cannot read request body: %v", err)
	}
	return nil
}

// DecodeObject decodes body, which must be exactly one JSON object whose
// keys are all fields of v, into v. fields describes each field for error
// messages (name → what is allowed). An empty body is allowed when
// emptyOK (and leaves v untouched).
func DecodeObject(body []byte, v any, fields Fields, emptyOK bool) *Error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		if emptyOK {
			return nil
		}
		return BadRequest("request body is empty; expected a JSON object with fields %s", fields.List())
	}
	if trimmed[0] != '{' {
		return BadRequest("request body must be a JSON object with fields %s", fields.List())
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(err, fields)
	}
	if rest := bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n"); len(rest) != 0 {
		return BadRequest("unexpected data after the JSON object at offset %d; send exactly one JSON object", dec.InputOffset())
	}
	return nil
}

// NestedError is what the decoder of a value nested in a request (a
// json.Unmarshaler field, such as the entries of a list of limits) returns
// for input it rejects: the 400 worded at its own level, naming the
// fields allowed there, which DecodeObject answers as it is rather than
// listing the request's top-level fields.
type NestedError struct {
	Err   *Error
	cause error // the decoder's own error
}

// Error implements error.
func (e *NestedError) Error() string { return e.Err.Msg }

// Unwrap returns the decoder's own error.
func (e *NestedError) Unwrap() error { return e.cause }

// DescribeNested words err, the error of decoding one nested value (what
// describes it, such as "an entry of the list of limits") whose objects
// take fields, as DecodeObject words its own errors.
func DescribeNested(what string, err error, fields Fields) error {
	var nested *NestedError
	if errors.As(err, &nested) {
		return err
	}
	return &NestedError{Err: BadRequest("%s: %s", what, describeJSONError(err, fields).Msg), cause: err}
}

// describeJSONError turns an encoding/json error into a 400 that says what
// was wrong and what is allowed.
func describeJSONError(err error, fields Fields) *Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var nested *NestedError
	switch {
	case errors.As(err, &nested):
		return nested.Err
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return BadRequest("truncated JSON: the body ends before the object is complete")
	case errors.As(err, &syn):
		return BadRequest("malformed JSON at offset %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		if typ.Field == "" {
			return BadRequest("request body must be a JSON object with fields %s", fields.List())
		}
		// Requests are flat: a field of an embedded struct is named by
		// its path (demandFields.demand_per_sec); its last part is the
		// JSON name.
		field := typ.Field[strings.LastIndexByte(typ.Field, '.')+1:]
		return BadRequest("field %q: got JSON %s; allowed: %s", field, typ.Value, fields.Help(field))
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return BadRequest("unknown field %s; allowed fields: %s", f, fields.List())
	}
	return BadRequest("invalid JSON: %s", strings.TrimPrefix(msg, "json: "))
}

// Fields maps each JSON field of a request to a description of what is
// allowed in it, in the order they are listed in errors.
type Fields []struct{ Name, Allowed string }

// Help returns what is allowed in field name.
func (f Fields) Help(name string) string {
	for _, e := range f {
		if e.Name == name {
			return e.Allowed
		}
	}
	return "see the API documentation"
}

// List returns the fields' names, quoted, for messages.
func (f Fields) List() string {
	var b strings.Builder
	for i, e := range f {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(e.Name))
	}
	if b.Len() == 0 {
		return "(none)"
	}
	return b.String()
}

// Opt is a request field that records whether its key was present, so that
// an option that belongs to another algorithm can be rejected even when it
// carries a zero value. JSON null is rejected.
type Opt[T any] struct {
	Set bool
	V   T
}

// UnmarshalJSON implements json.Unmarshaler.
func (o *Opt[T]) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		// Reported like a wrong type, so the decoder names the field.
		return &json.UnmarshalTypeError{Value: "null", Type: reflect.TypeFor[T]()}
	}
	o.Set = true
	if len(b) == 0 || (b[0] != '{' && b[0] != '[') {
		return json.Unmarshal(b, &o.V) // a scalar: nothing to be strict about
	}
	// A type with its own decoding is strict itself (the outer decoder
	// has checked the syntax already).
	if u, ok := any(&o.V).(json.Unmarshaler); ok {
		return u.UnmarshalJSON(b)
	}
	// Objects inside the field (a list of limits) reject unknown keys too,
	// as the request's own object does.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(&o.V)
}

// WriteJSON encodes v as the response with status code.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	buf := GetBuf()
	defer PutBuf(buf)
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		// Only non-finite floats can fail here, and the views use
		// Float for those; answer something well-formed anyway.
		buf.Reset()
		buf.WriteString(`{"error":"cannot encode response"}` + "\n")
		code = http.StatusServiceUnavailable
	}
	WriteRaw(w, code, buf.Bytes())
}

// WriteRaw writes an already encoded JSON body.
func WriteRaw(w http.ResponseWriter, code int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	if len(body) > smallBodyBytes {
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

var jsonContentType = []string{"application/json"}

// smallBodyBytes is the largest answer WriteRaw leaves net/http to give a
// Content-Length: an answer written whole into the response's buffer
// (2 KiB, net/http's bufferBeforeChunkingSize) gets one from the server
// when the handler returns, without the header value WriteRaw would
// allocate (a reserve's answer is about 100 bytes). TestSmallAnswersHaveContentLength
// checks that they still get one.
const smallBodyBytes = 2048

// WriteError answers {"error": msg} with status code.
func WriteError(w http.ResponseWriter, code int, msg string) {
	buf := GetBuf()
	defer PutBuf(buf)
	b := buf.AvailableBuffer()
	b = append(b, `{"error":`...)
	b = AppendJSONString(b, msg)
	b = append(b, "}\n"...)
	WriteRaw(w, code, b)
}

// AppendJSONString appends s as a JSON string literal. Control characters
// and invalid UTF-8 are escaped so the output is always valid JSON.
func AppendJSONString(b []byte, s string) []byte {
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

// maxQuoted is the longest piece of client input echoed in an error.
const maxQuoted = 200

// Quote quotes s for an error message, truncated to maxQuoted bytes.
func Quote(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "..."
	}
	return strconv.Quote(s)
}

// MethodNotAllowed answers 405 with the allowed methods.
func MethodNotAllowed(w http.ResponseWriter, r *http.Request, allowed string) {
	w.Header().Set("Allow", allowed)
	WriteError(w, http.StatusMethodNotAllowed, "method "+Quote(r.Method)+" is not allowed on "+Quote(r.URL.EscapedPath())+"; allowed: "+allowed)
}
