package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/api"
)

// TestReserveAnswersDecodeAsTheAPIs: every answer the handler writes by
// hand, or through a type of package api, decodes into that api type with
// no key the type lacks: a grant, a refusal, a busy register and an
// expired session of a reserve, a grant and a refusal of the reservation
// form, a settlement, a release, a lease and an error. A key added to an
// answer and not to package api (which the Go client reads) fails here.
func TestReserveAnswersDecodeAsTheAPIs(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	e.mustPut(t, "api", `{"algorithm":"strict","rate":1,"per":"1h","max_reserved":0}`)
	e.mustPut(t, "cap", `{"algorithm":"concurrency","max_in_flight":1}`)
	e.mustPut(t, "leased", `{"algorithm":"strict","rate":1000}`)
	if w := e.do(t, "PUT", "/v1/limits/leased/lease-policy", `{"leased":true}`); w.Code != http.StatusOK {
		t.Fatalf("lease policy: %d %s", w.Code, w.Body)
	}
	strict := func(t *testing.T, what string, body []byte, v any) {
		t.Helper()
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			t.Errorf("%s: %s does not decode as %T: %v", what, body, v, err)
		}
	}
	// The paths of the settlement and the release, once the reservation
	// form has granted one.
	reservations := map[string]string{}
	for _, tc := range []struct {
		what, method, path, body string
		code                     int
		into                     func() any
	}{
		{"reserve granted", "POST", "/v1/limits/api/reserve", `{"permits":1}`, 200, func() any { return new(api.ReserveAnswer) }},
		{"reserve refused", "POST", "/v1/limits/api/reserve", `{"permits":1}`, 429, func() any { return new(api.ReserveAnswer) }},
		{"reserve of an unknown session", "POST", "/v1/limits/api/reserve", `{"session":99,"seq":1}`, 410, func() any { return new(api.ReserveAnswer) }},
		{"reservation granted", "POST", "/v1/reserve", `{"limits":[{"name":"cap"}]}`, 200, func() any { return new(api.ReserveAnswer) }},
		{"reservation refused", "POST", "/v1/reserve", `{"limits":[{"name":"cap"}]}`, 429, func() any { return new(api.ReserveAnswer) }},
		{"settle", "POST", "/v1/reservations/RID/settle", `{"actual":[]}`, 200, func() any { return new(api.SettleAnswer) }},
		{"release", "POST", "/v1/reservations/RID/release", ``, 200, func() any { return new(api.ReleaseAnswer) }},
		{"lease", "POST", "/v1/limits/leased/lease", `{"holder":"h","group":"g","demand_milli_per_sec":1000,"ttl":"1s"}`, 200, func() any { return new(api.LeaseAnswer) }},
		{"lease pool", "GET", "/v1/limits/leased/leases", ``, 200, func() any { return new(api.LeasePool) }},
		{"limit", "GET", "/v1/limits/api", ``, 200, func() any { return new(api.Limit) }},
		{"limits", "GET", "/v1/limits", ``, 200, func() any { return new(api.Limits) }},
		{"limit put", "PUT", "/v1/limits/api2", `{"algorithm":"warmup","rate":2,"warmup":"10s"}`, 201, func() any { return new(api.LimitPut) }},
		{"status", "GET", "/v1/status", ``, 200, func() any { return new(api.Status) }},
		{"cluster", "GET", "/v1/cluster", ``, 200, func() any { return new(api.Cluster) }},
		{"join", "POST", "/v1/cluster/join", `{"id":"n2","raft_addr":"127.0.0.1:7002"}`, 200, func() any { return new(api.JoinAnswer) }},
		{"error", "GET", "/v1/limits/nope", ``, 404, func() any { return new(api.ErrorAnswer) }},
	} {
		path := tc.path
		if rid := reservations[tc.path]; rid != "" {
			path = rid
		}
		w := e.do(t, tc.method, path, tc.body)
		if w.Code != tc.code {
			t.Fatalf("%s: %d %s; want %d", tc.what, w.Code, w.Body, tc.code)
		}
		v := tc.into()
		strict(t, tc.what, w.Body.Bytes(), v)
		if a, ok := v.(*api.ReserveAnswer); ok && a.ReservationID != "" {
			reservations["/v1/reservations/RID/settle"] = "/v1/reservations/" + a.ReservationID + "/settle"
			reservations["/v1/reservations/RID/release"] = "/v1/reservations/" + a.ReservationID + "/release"
		}
	}
	e.store.SetReserveFunc(func(context.Context, fsm.Reserve) (fsm.ReserveResult, error) {
		return fsm.ReserveResult{Status: fsm.Busy, RetryAfterNanos: 1e9}, nil
	})
	w := e.do(t, "POST", "/v1/limits/api/reserve", `{"permits":1}`)
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("busy: %d %s", w.Code, w.Body)
	}
	strict(t, "reserve busy", w.Body.Bytes(), new(api.ReserveAnswer))
}
