package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/permitd/permitd/transport/api"
)

// strictParts decodes b as the strict decoder alone would.
func strictParts(b []byte) ([]partRequest, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var v []partRequest
	err := dec.Decode(&v)
	if err == nil && dec.More() {
		err = errTrailing
	}
	return v, err
}

var errTrailing = json.Unmarshal([]byte("x"), new(int))

// FuzzPartRequests: whatever the fast parser accepts, the strict decoder
// accepts too and decodes to the same parts.
func FuzzPartRequests(f *testing.F) {
	for _, s := range []string{
		`[{"name":"rpm","permits":1},{"name":"tpm","permits":4000}]`,
		` [ { "permits" : 3 , "name" : "a" } ] `,
		`[{"name":"a"},{}]`, `[{"name":"a","name":"b"}]`, `[]`, `[{"name":"a\u0062"}]`,
		`[{"name":"a","permits":-0}]`, `[{"name":"a","permits":01}]`, `[{"name":"a","permits":1.0}]`,
		`[{"name":"a","permits":9223372036854775807}]`, `[{"name":"a","permits":-9223372036854775808}]`,
		`[{"name":"a","permits":9223372036854775808}]`, `[{"name":"a","permits":1e3}]`,
		`[{"name":"a","other":1}]`, `[{"name":null}]`, `[{"name":"a"}] x`, `[{"name":"a"},]`,
		`[{"name":"a b"}]`, `[{"name":"a","permits":"1"}]`, `[{"name":"a"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := parseCommonParts(b)
		if !ok {
			return
		}
		strict, err := strictParts(b)
		if err != nil {
			t.Fatalf("%q: the fast parser accepted %+v, the strict decoder refused: %v", b, fast, err)
		}
		if !reflect.DeepEqual(fast, strict) {
			t.Fatalf("%q: fast %+v, strict %+v", b, fast, strict)
		}
	})
}

// TestPartRequestsFastAndStrict: the common shape takes the fast path with
// the strict decoder's values; every other shape is the strict decoder's
// (its values, or its error).
func TestPartRequestsFastAndStrict(t *testing.T) {
	for _, tc := range []struct {
		body string
		fast bool
	}{
		{`[{"name":"rpm","permits":1},{"name":"tpm","permits":4000}]`, true},
		{"\t[ {\"permits\" : 3 ,\n \"name\":\"a.b:c-d_e\"} ]\r\n", true},
		{`[{"name":"a"},{}]`, true},
		{`[{"name":"a","permits":-9223372036854775808}]`, true},
		{`[{"name":"a","permits":9223372036854775807}]`, true},
		{`[]`, false},
		{`[{"name":"a","name":"b"}]`, false},
		{`[{"name":"a\u0062"}]`, false},
		{`[{"name":"a b"}]`, false},
		{`[{"name":"a","permits":1.0}]`, false},
		{`[{"name":"a","permits":1e3}]`, false},
		{`[{"name":"a","permits":01}]`, false},
		{`[{"name":"a","permits":-0}]`, false},
		{`[{"name":"a","permits":9223372036854775808}]`, false},
		{`[{"name":"a","other":1}]`, false},
		{`[{"name":null}]`, false},
		{`[{"name":"a","permits":"1"}]`, false},
	} {
		_, ok := parseCommonParts([]byte(tc.body))
		if ok != tc.fast {
			t.Errorf("%s: fast path %v, want %v", tc.body, ok, tc.fast)
		}
		var got partRequests
		gotErr := got.UnmarshalJSON([]byte(tc.body))
		want, wantErr := strictParts([]byte(tc.body))
		// An error inside an entry is the strict decoder's, worded with
		// the fields of an entry.
		var nested *api.NestedError
		if errors.As(gotErr, &nested) {
			gotErr = errors.Unwrap(gotErr)
		}
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Errorf("%s: error %v, the strict decoder's %v", tc.body, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual([]partRequest(got), want) {
			t.Errorf("%s: %+v, the strict decoder's %+v", tc.body, got, want)
		}
	}
}
