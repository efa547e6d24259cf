package openapi_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// rejections_test.go: the request bodies the document rejects are the
// ones the server rejects, found by mutating each operation's sample body
// along its schema rather than listed by hand: the document once said
// that POST /v1/reservations/{id}/release rejects "{ }", which the server
// accepted, and an unknown field inside an entry of "limits" was answered
// with the request's top-level fields as the allowed ones.

// unknownField is the key the mutations add to every object.
const unknownField = "zz_unknown"

// fullSamples are bodies of operations with every field the document
// describes set (or one per alternative), so that every field is mutated;
// the others are mutated from sampleBody.
var fullSamples = map[string][]string{
	"putLimit": {
		`{"algorithm":"strict","rate":1,"per":"1s","max_reserved":1,"expiry":"1s","shadow":false}`,
		`{"algorithm":"bursty","rate":1,"per":"1s","max_burst_seconds":1,"shadow":false}`,
		`{"algorithm":"warmup","rate":1,"per":"1s","warmup":"1s","cold_factor":3,"shadow":false}`,
		`{"algorithm":"hybrid","rate":1,"per":"1s","burst_ratio":2,"strictness":0.5,"shadow":false}`,
		`{"algorithm":"concurrency","max_in_flight":1,"ttl":"1s","shadow":false}`,
	},
	"reserve": {
		`{"permits":1,"max_wait":"1s","request_id":"r1"}`,
		`{"permits":1,"max_wait":"0s","session":1,"seq":1,"acked_below":1}`,
	},
	"putLeasePolicy":    {`{"leased":false,"burst_permits":1,"max_outstanding_permits":1}`},
	"openLease":         {`{"holder":"h","group":"g","weight":1,"demand_milli_per_sec":1000,"ttl":"1s","request_id":"r1"}`},
	"renewLease":        {`{"epoch":1,"spent":0,"stolen_out":0,"stolen_in":0,"kept":0,"demand_milli_per_sec":1000,"ttl":"1s","request_id":"r1"}`},
	"returnLease":       {`{"epoch":1,"spent":0,"stolen_out":0,"stolen_in":0,"request_id":"r1"}`},
	"reserveLimits":     {`{"limits":[{"name":"other","permits":1}],"max_wait":"0s","request_id":"r1","settle_within":"1m"}`},
	"settleReservation": {`{"actual":[{"name":"other","permits":1}],"request_id":"r1"}`},
	"putTemplate": {
		`{"algorithm":"strict","rate":1,"per":"1s","max_reserved":1,"expiry":"1s","shadow":false,"idle":"1m","max_keys":1}`,
		`{"algorithm":"bursty","rate":1,"per":"1s","max_burst_seconds":1,"shadow":false,"idle":"1m","max_keys":1}`,
		`{"algorithm":"warmup","rate":1,"per":"1s","warmup":"1s","cold_factor":3,"shadow":false,"idle":"1m","max_keys":1}`,
		`{"algorithm":"hybrid","rate":1,"per":"1s","burst_ratio":1,"strictness":1,"shadow":false,"idle":"1m","max_keys":1}`,
		`{"algorithm":"concurrency","max_in_flight":1,"ttl":"1s","shadow":false,"idle":"1m","max_keys":1}`,
	},
}

// bodyMutation is one request body derived from an operation's sample.
type bodyMutation struct {
	what    string
	body    []byte
	accepts bool // a variant the document accepts (the sample in other whitespace)
	// own and others, for an unknown field added to an object: the fields
	// allowed at that object's level, which the error must name, and those
	// of the objects around it only, which it must not.
	own, others []string
}

// jsonStep is one step of a path into a JSON value: an object key or a
// list index.
type jsonStep struct {
	key   string
	index int // when key is ""
}

// jsonNode is one object of a sample body with the schema that describes
// it.
type jsonNode struct {
	path   []jsonStep
	schema *openapi3.Schema
	// outer lists the fields of the objects around it.
	outer []string
}

// objectSchema returns the schema of an object value v: s itself, or the
// alternative of its oneOf that v matches.
func objectSchema(s *openapi3.Schema, v any) *openapi3.Schema {
	for _, alt := range s.OneOf {
		if alt.Value.VisitJSON(v) == nil {
			return alt.Value
		}
	}
	return s
}

// objectNodes returns every object of v (the sample body) with its schema.
func objectNodes(s *openapi3.Schema, v any, path []jsonStep, outer []string) []jsonNode {
	var out []jsonNode
	switch x := v.(type) {
	case map[string]any:
		s = objectSchema(s, v)
		out = append(out, jsonNode{path: path, schema: s, outer: outer})
		own := slices.Sorted(maps.Keys(s.Properties))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if p := s.Properties[k]; p != nil {
				out = append(out, objectNodes(p.Value, x[k], append(slices.Clone(path), jsonStep{key: k}), append(slices.Clone(outer), own...))...)
			}
		}
	case []any:
		if s.Items != nil {
			for i, e := range x {
				out = append(out, objectNodes(s.Items.Value, e, append(slices.Clone(path), jsonStep{index: i}), outer)...)
			}
		}
	}
	return out
}

// mutate returns a copy of the JSON value root with f applied to the
// object at path.
func mutate(t *testing.T, root []byte, path []jsonStep, f func(obj map[string]any)) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(root, &v); err != nil {
		t.Fatal(err)
	}
	at := v
	for _, st := range path {
		if st.key != "" {
			at = at.(map[string]any)[st.key]
		} else {
			at = at.([]any)[st.index]
		}
	}
	f(at.(map[string]any))
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wrongTypeFor returns a JSON value of another type than s allows, or
// false when s names no single type.
func wrongTypeFor(s *openapi3.Schema) (any, bool) {
	switch {
	case s.Type.Is("string"):
		return 12345, true
	case s.Type.Is("integer"), s.Type.Is("number"), s.Type.Is("boolean"), s.Type.Is("array"), s.Type.Is("object"):
		return "text", true
	}
	return nil, false
}

// bodyMutations derives the mutations of sample, a body that s accepts:
// at every object, an unknown field, each field of another JSON type, and
// each required field removed (all rejected by the document); and the
// sample in other whitespace (accepted).
func bodyMutations(t *testing.T, s *openapi3.Schema, sample string) []bodyMutation {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(sample), &v); err != nil {
		t.Fatalf("sample %s: %v", sample, err)
	}
	var out []bodyMutation
	for _, n := range objectNodes(s, v, nil, nil) {
		where := "the body"
		if len(n.path) > 0 {
			where = fmt.Sprintf("the object at %v", n.path)
		}
		own := slices.Sorted(maps.Keys(n.schema.Properties))
		var others []string
		for _, o := range n.outer {
			if !slices.Contains(own, o) {
				others = append(others, o)
			}
		}
		out = append(out, bodyMutation{what: "an unknown field in " + where, own: own, others: others,
			body: mutate(t, []byte(sample), n.path, func(obj map[string]any) { obj[unknownField] = 1 })})
		present := objectAt(t, []byte(sample), n.path)
		for _, k := range own {
			wrong, ok := wrongTypeFor(n.schema.Properties[k].Value)
			if !ok {
				continue
			}
			if _, set := present[k]; !set {
				continue
			}
			out = append(out, bodyMutation{what: fmt.Sprintf("field %q of %s of another type", k, where),
				body: mutate(t, []byte(sample), n.path, func(obj map[string]any) { obj[k] = wrong })})
		}
		for _, k := range n.schema.Required {
			out = append(out, bodyMutation{what: fmt.Sprintf("%s without its required field %q", where, k),
				body: mutate(t, []byte(sample), n.path, func(obj map[string]any) { delete(obj, k) })})
		}
	}
	indented, err := json.MarshalIndent(v, " ", "\t")
	if err != nil {
		t.Fatal(err)
	}
	out = append(out,
		bodyMutation{what: "the sample indented", body: append(append([]byte("\n "), indented...), " \r\n"...), accepts: true},
		bodyMutation{what: "the sample with a space after each delimiter", accepts: true,
			body: []byte(strings.NewReplacer("{", "{ ", "}", " }", ",", ", ", ":", " : ", "[", "[ ", "]", " ]").Replace(sample))})
	return out
}

// objectAt returns the object at path in the JSON value root.
func objectAt(t *testing.T, root []byte, path []jsonStep) map[string]any {
	t.Helper()
	var got map[string]any
	mutate(t, root, path, func(obj map[string]any) { got = obj })
	return got
}

// checkBodies sends every mutation of every operation's sample body and
// checks that the server rejects (400) exactly what the document rejects,
// and that an unknown field's error names the fields allowed where it
// was added, not those of the objects around.
func checkBodies(t *testing.T, ck *checker, doc *openapi3.T) {
	n := 0
	eachOperation(doc, func(method, path string, op *openapi3.Operation) {
		if op.RequestBody == nil {
			return
		}
		mt := op.RequestBody.Value.Content.Get("application/json")
		sample, ok := sampleBody[op.OperationID]
		if mt == nil || mt.Schema == nil || !ok {
			t.Errorf("%s %s: a request body without a JSON schema or without a sample body", method, path)
			return
		}
		// Accepted, these would change the cluster under the rest of the
		// test: only their rejected mutations are sent (their bodies are
		// decoded as every other).
		cluster := op.OperationID == "joinServer" || op.OperationID == "transferLeadership"
		for _, sample := range append([]string{sample}, fullSamples[op.OperationID]...) {
			// The sample as it is: what its variants in other whitespace
			// must get too (a 400 from the register's state, such as a
			// lease policy on an in-flight cap, included).
			var base exchanged
			if !cluster {
				base = ck.exchange(t, call{method: method, path: samplePath(path), body: sample, token: tokAdmin})
				n++
			}
			for _, m := range bodyMutations(t, mt.Schema.Value, sample) {
				if m.accepts && cluster {
					continue
				}
				n++
				checkMutation(t, ck, method, path, m, base)
			}
		}
	})
	t.Logf("%d bodies derived from the samples", n)
}

// checkMutation sends m and checks the server's verdict against the
// document's, and against base, the verdict on the sample m derives from.
func checkMutation(t *testing.T, ck *checker, method, path string, m bodyMutation, base exchanged) {
	t.Helper()
	x := ck.exchange(t, call{method: method, path: samplePath(path), body: string(m.body), token: tokAdmin})
	what := fmt.Sprintf("%s %s, %s (%s)", method, path, m.what, m.body)
	baseErr, _ := base.obj["error"].(string)
	gotErr, _ := x.obj["error"].(string)
	switch {
	case m.accepts && x.reqErr != nil:
		t.Errorf("%s: the document rejects it: %v", what, x.reqErr)
	case m.accepts && x.status == http.StatusBadRequest && (base.status != http.StatusBadRequest || gotErr != baseErr):
		t.Errorf("%s: the document accepts it, the server answered 400 %s (and %d %s to the sample)", what, x.answer, base.status, base.answer)
	case m.accepts && base.status == http.StatusBadRequest && x.status != http.StatusBadRequest:
		t.Errorf("%s: the server answered %d %s, and 400 %s to the sample", what, x.status, x.answer, base.answer)
	case !m.accepts && x.reqErr == nil:
		t.Errorf("%s: the document accepts it (the mutation should break it)", what)
	case !m.accepts && x.status != http.StatusBadRequest:
		t.Errorf("%s: the document rejects it, the server answered %d %s", what, x.status, x.answer)
	}
	if m.own == nil && m.others == nil || x.status != http.StatusBadRequest {
		return
	}
	for _, f := range m.own {
		if !strings.Contains(gotErr, strconv.Quote(f)) {
			t.Errorf("%s: the error %q does not name %q, a field allowed there", what, gotErr, f)
		}
	}
	for _, f := range m.others {
		if strings.Contains(gotErr, strconv.Quote(f)) {
			t.Errorf("%s: the error %q names %q, a field of the object around, not allowed there", what, gotErr, f)
		}
	}
}
