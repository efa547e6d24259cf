package server

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/server/fakestore"
)

// familyStore is a Store whose replica holds templates' keys (as a node,
// a LimitStatsSource).
type familyStore struct {
	*fakestore.Store
	*familyFSM
}

// TestReadableLimitsGroupsKeys: with 5 000 keys of template cust, 20 of
// team and 3 of apikeys, GET /v1/readable-limits answers the explicit
// limits and one family per template (its live keys counted, their
// counters summed), no entry per key; a client token restricted with
// limits= gets the families its patterns cover whole.
func TestReadableLimitsGroupsKeys(t *testing.T) {
	h, _ := newFamilyFSM(t, 1<<20)
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Bursty, Rate: 5})
	if err != nil {
		t.Fatal(err)
	}
	st := fsm.Stamp{Nanos: int64(time.Second), Term: 1}
	h.apply(fsm.AppendPutTemplate(nil, st, fsm.PutTemplate{Prefix: "apikeys", Config: cfg, IdleNanos: int64(time.Minute), MaxKeys: 10}))
	h.apply(fsm.AppendPut(nil, st, fsm.PutLimit{Name: "api1", Config: cfg}))
	h.createKeys("cust", 5000)
	h.createKeys("team", 20)
	h.createKeys("apikeys", 3)

	tokens, secrets, err := auth.NewTokenStoreOf(auth.Spec{Name: "root", Role: auth.RoleAdmin},
		auth.Spec{Name: "narrow", Role: auth.RoleClient, Limits: []string{"api*"}},
		auth.Spec{Name: "some", Role: auth.RoleClient, Limits: []string{"cust:a*", "team:*"}})
	if err != nil {
		t.Fatal(err)
	}
	hd := RequireTokens(NewHandler(familyStore{fakestore.New(), h}, HandlerOptions{}), tokens)
	read := func(tok string) (limits, families []string, fams map[string]api.LimitFamily, size int) {
		t.Helper()
		w := serve(hd, "GET", "/v1/readable-limits", "", secrets[tok])
		var ls api.ReadableLimits
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &ls) != nil {
			t.Fatalf("token %s: %d %s", tok, w.Code, w.Body.String())
		}
		fams = make(map[string]api.LimitFamily)
		for _, l := range ls.Limits {
			limits = append(limits, l.Name)
		}
		for _, f := range ls.Families {
			families = append(families, f.Template)
			fams[f.Template] = f
		}
		return limits, families, fams, w.Body.Len()
	}
	limits, families, fams, size := read("root")
	want := []string{"api1", "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9"}
	if !slices.Equal(limits, want) || !slices.Equal(families, []string{"apikeys", "cust", "team"}) {
		t.Fatalf("admin reads limits %v and families %v, want %v and [apikeys cust team]", limits, families, want)
	}
	if size > 16<<10 {
		t.Errorf("the answer is %d bytes with 5 023 keys, want it bounded by the explicit limits and templates", size)
	}
	if c := fams["cust"]; c.Keys != 5000 || c.GrantedRequests != 5000 || c.GrantedPermits != 5000 || c.MaxKeys != 1<<20 || !c.Active || c.Algorithm != "strict" || c.IntervalNanos != int64(10*time.Millisecond) {
		t.Errorf("family cust: %+v, want 5 000 keys with one grant each, strict at 100/s", c)
	}
	if limits, families, _, _ := read("narrow"); !slices.Equal(limits, []string{"api1"}) || !slices.Equal(families, []string{"apikeys"}) {
		t.Errorf("token limited to api* reads %v and families %v, want [api1] and [apikeys]", limits, families)
	}
	if limits, families, _, _ := read("some"); len(limits) != 0 || !slices.Equal(families, []string{"team"}) {
		t.Errorf("token limited to cust:a* and team:* reads %v and families %v, want none and [team] (cust:a* covers part of cust)", limits, families)
	}
}

// The node reads its replica's limits and templates: the status page and
// the metrics get families from it.
var _ LimitStatsSource = (*node.Node)(nil)
