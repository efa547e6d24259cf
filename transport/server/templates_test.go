package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/permitd/permitd/transport/api"
)

// TestTemplateLifecycle: PUT /v1/templates/{prefix} creates (201) and
// replaces (200) a template, GET answers it and the list, a reserve on
// "prefix:key" creates the key (seen in GET /v1/limits?prefix=), and
// DELETE answers existed and the live keys, after which the template is
// gone (404) and a new key unknown, but GET /v1/templates lists it,
// "deleted":true, while its key lives.
func TestTemplateLifecycle(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	body := `{"algorithm":"bursty","rate":10,"max_burst_seconds":1,"idle":"1m","max_keys":5}`
	w := e.do(t, "PUT", "/v1/templates/cust", body)
	m := decode(t, w)
	if w.Code != http.StatusCreated || m["created"] != true || m["prefix"] != "cust" || m["idle"] != "1m0s" || m["max_keys"] != 5.0 || m["algorithm"] != "bursty" {
		t.Fatalf("first put: %d %s", w.Code, w.Body)
	}
	if w := e.do(t, "PUT", "/v1/templates/cust", strings.Replace(body, `"rate":10`, `"rate":20`, 1)); w.Code != http.StatusOK || decode(t, w)["created"] != false {
		t.Fatalf("second put: %d %s", w.Code, w.Body)
	}
	e.mustPut(t, "other", `{"algorithm":"strict","rate":1}`)
	if w := e.do(t, "POST", "/v1/limits/cust:a/reserve", `{"permits":1}`); w.Code != http.StatusOK {
		t.Fatalf("reserve on a new key: %d %s", w.Code, w.Body)
	}
	w = e.do(t, "GET", "/v1/templates/cust", "")
	if m := decode(t, w); w.Code != http.StatusOK || m["rate"] != 20.0 || m["live_keys"] != 1.0 || m["shadow"] != false {
		t.Fatalf("get: %d %s", w.Code, w.Body)
	}
	w = e.do(t, "GET", "/v1/limits?prefix=cust:", "")
	var ls api.Limits
	if err := json.Unmarshal(w.Body.Bytes(), &ls); err != nil || len(ls.Limits) != 1 || ls.Limits[0].Name != "cust:a" || ls.Limits[0].GrantedRequests != 1 {
		t.Fatalf("limits with the prefix: %s %v", w.Body, err)
	}
	e.do(t, "PUT", "/v1/templates/acct", body)
	w = e.do(t, "GET", "/v1/templates", "")
	var ts api.Templates
	if err := json.Unmarshal(w.Body.Bytes(), &ts); err != nil || len(ts.Templates) != 2 || ts.Templates[0].Prefix != "acct" || ts.Templates[1].Prefix != "cust" {
		t.Fatalf("list: %s %v", w.Body, err)
	}
	w = e.do(t, "DELETE", "/v1/templates/cust", "")
	if m := decode(t, w); w.Code != http.StatusOK || m["existed"] != true || m["live_keys"] != 1.0 {
		t.Fatalf("delete: %d %s", w.Code, w.Body)
	}
	if w := e.do(t, "GET", "/v1/templates/cust", ""); w.Code != http.StatusNotFound {
		t.Fatalf("get after delete: %d %s", w.Code, w.Body)
	}
	if w := e.do(t, "DELETE", "/v1/templates/cust", ""); w.Code != http.StatusNotFound {
		t.Fatalf("second delete: %d %s", w.Code, w.Body)
	}
	w = e.do(t, "GET", "/v1/templates", "")
	ts = api.Templates{}
	if err := json.Unmarshal(w.Body.Bytes(), &ts); err != nil || len(ts.Templates) != 2 || ts.Templates[0].Deleted ||
		ts.Templates[1].Prefix != "cust" || !ts.Templates[1].Deleted || ts.Templates[1].LiveKeys != 1 ||
		!strings.Contains(w.Body.String(), `"deleted":true`) {
		t.Fatalf("list after delete: %s %v; want acct, and cust deleted with its live key", w.Body, err)
	}
	if w := e.do(t, "POST", "/v1/limits/cust:b/reserve", `{"permits":1}`); w.Code != http.StatusNotFound {
		t.Fatalf("a new key after the delete: %d %s", w.Code, w.Body)
	}
	if w := e.do(t, "POST", "/v1/limits/cust:a/reserve", `{"permits":1}`); w.Code != http.StatusOK {
		t.Fatalf("a live key after the delete: %d %s", w.Code, w.Body)
	}
}

// TestTemplateBadInput: what PUT /v1/templates/{prefix} refuses is
// answered 400 naming what is allowed, and changes nothing.
func TestTemplateBadInput(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	ok := `"algorithm":"strict","rate":1`
	for _, c := range []struct{ path, body, want string }{
		{"/v1/templates/a:b", `{` + ok + `,"idle":"1m","max_keys":1}`, "allowed: 1-64 characters of A-Z a-z 0-9 _ . -"},
		{"/v1/templates/" + strings.Repeat("p", 65), `{` + ok + `,"idle":"1m","max_keys":1}`, "allowed: 1-64"},
		{"/v1/templates/p", `{` + ok + `,"max_keys":1}`, `field "idle" is required`},
		{"/v1/templates/p", `{` + ok + `,"idle":"soon","max_keys":1}`, `allowed: a Go duration string`},
		{"/v1/templates/p", `{` + ok + `,"idle":"500ms","max_keys":1}`, `allowed: a Go duration string from "1s" to "720h"`},
		{"/v1/templates/p", `{` + ok + `,"idle":"721h","max_keys":1}`, `from "1s" to "720h"`},
		{"/v1/templates/p", `{` + ok + `,"idle":"1m"}`, `field "max_keys" is required`},
		{"/v1/templates/p", `{` + ok + `,"idle":"1m","max_keys":0}`, "allowed: an integer from 1 to 2097152"},
		{"/v1/templates/p", `{` + ok + `,"idle":"1m","max_keys":2097153}`, "allowed: an integer from 1 to 2097152"},
		{"/v1/templates/p", `{` + ok + `,"idle":"1m","max_keys":1,"shadow":true}`, `field "shadow": true; allowed: false`},
		{"/v1/templates/p", `{` + ok + `,"idle":"1m","max_keys":1,"colour":1}`, `"idle"`},
		{"/v1/templates/p", `{"algorithm":"strict","idle":"1m","max_keys":1}`, `field "rate" is required`},
		{"/v1/templates/p", `{"algorithm":"hybrid","rate":1,"strictness":0.5,"idle":"1m","max_keys":1}`, "never comes to rest"},
	} {
		w := e.do(t, "PUT", c.path, c.body)
		if m := decode(t, w); w.Code != http.StatusBadRequest || !strings.Contains(m["error"].(string), c.want) {
			t.Errorf("PUT %s %s: %d %s, want 400 with %q", c.path, c.body, w.Code, w.Body, c.want)
		}
	}
	if w := e.do(t, "GET", "/v1/templates", ""); !strings.Contains(w.Body.String(), `"templates":[]`) {
		t.Fatalf("refused puts changed something: %s", w.Body)
	}
	if w := e.do(t, "GET", "/v1/templates?prefix=a", ""); w.Code != http.StatusBadRequest {
		t.Fatalf("list with a query: %d %s", w.Code, w.Body)
	}
	if w := e.do(t, "POST", "/v1/templates/p", "{}"); w.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d %s", w.Code, w.Body)
	}
}

// TestKeysFullIs429: a reserve that would create a key past its
// template's max keys, single or multi-limit, is answered 429 with
// Retry-After, "keys_full" and the cap named, counted as keys_full; it
// creates nothing.
func TestKeysFullIs429(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	if w := e.do(t, "PUT", "/v1/templates/one", `{"algorithm":"strict","rate":1,"idle":"1m","max_keys":1}`); w.Code != http.StatusCreated {
		t.Fatalf("put: %d %s", w.Code, w.Body)
	}
	if w := e.do(t, "POST", "/v1/limits/one:a/reserve", `{"permits":1}`); w.Code != http.StatusOK {
		t.Fatalf("first key: %d %s", w.Code, w.Body)
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/limits/one:b/reserve", `{"permits":1}`},
		{"/v1/reserve", `{"limits":[{"name":"one:c","permits":1}]}`},
	} {
		w := e.do(t, "POST", c.path, c.body)
		m := decode(t, w)
		msg, _ := m["error"].(string)
		if w.Code != http.StatusTooManyRequests || m["keys_full"] != true || w.Header().Get("Retry-After") == "" ||
			!strings.Contains(msg, "(allowed: at most 1, its max keys)") || m["retry_after_ns"].(float64) <= 0 {
			t.Errorf("POST %s past the cap: %d %v %s", c.path, w.Code, w.Header(), w.Body)
		}
	}
	if got := testutil.ToFloat64(e.metrics.proto[protoHTTP].reserves[outcomeKeysFull]); got != 2 {
		t.Errorf("keys_full counted %v times, want 2", got)
	}
	if w := e.do(t, "GET", "/v1/limits?prefix=one:", ""); strings.Count(w.Body.String(), `"name"`) != 1 {
		t.Fatalf("refused keys were created: %s", w.Body)
	}
}
