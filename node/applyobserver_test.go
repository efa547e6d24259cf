package node

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// recordingObserver records what a node tells its ApplyObserver of
// templated keys.
type recordingObserver struct {
	waits   []string // limit/template
	changes []fsm.KeyChange
	full    []string
}

func (r *recordingObserver) GrantedWait(limit, template string, _ int64) {
	r.waits = append(r.waits, limit+"/"+template)
}
func (r *recordingObserver) LeaseGranted(string, string, int64) {}
func (r *recordingObserver) LimitDeleted(string)                {}
func (r *recordingObserver) Restored()                          {}
func (r *recordingObserver) KeyChanged(c fsm.KeyChange)         { r.changes = append(r.changes, c) }
func (r *recordingObserver) KeysFull(template string)           { r.full = append(r.full, template) }

// TestObserverSeesTemplatedKeysComeAndGo: applying entries, a node tells
// its observer which keys a reserve created, which reserves were refused
// for want of room for a key (and of which template), each grant's
// template, and which keys the register dropped as idle once the cluster
// time passed their idle time: what the family metrics count. Its
// TemplateStats keep the dropped keys' counters in their family's.
func TestObserverSeesTemplatedKeysComeAndGo(t *testing.T) {
	o := &recordingObserver{}
	n := &Node{fsm: fsm.New(), cfg: Config{Applied: o}}
	var index uint64
	apply := func(b []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		index++
		res := n.fsm.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: b})
		n.observeEntry(res, n.fsm.TakeWaiterDecisions())
	}
	sec := int64(time.Second)
	at := func(ns int64) fsm.Stamp { return fsm.Stamp{Nanos: ns, Term: 1} }
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 10})
	if err != nil {
		t.Fatal(err)
	}
	apply(fsm.AppendPutTemplate(nil, at(sec), fsm.PutTemplate{Prefix: "cust", Config: cfg, IdleNanos: 5 * sec, MaxKeys: 2}))
	apply(fsm.AppendPut(nil, at(sec), fsm.PutLimit{Name: "plain", Config: cfg}))
	apply(fsm.AppendReserveBatch(nil, at(2*sec), []fsm.Reserve{
		{Limit: "cust:a", Permits: 1}, {Limit: "cust:b", Permits: 1}, {Limit: "cust:c", Permits: 1}, {Limit: "plain", Permits: 1},
	}))
	if want := []string{"cust:a/cust", "cust:b/cust", "plain/"}; !reflect.DeepEqual(o.waits, want) {
		t.Errorf("grants observed: %v, want %v", o.waits, want)
	}
	if want := []string{"cust"}; !reflect.DeepEqual(o.full, want) {
		t.Errorf("KeysFull observed: %v, want %v (cust:c past the template's 2 keys)", o.full, want)
	}
	created := []fsm.KeyChange{{Kind: fsm.KeyCreated, Name: "cust:a", Template: "cust"}, {Kind: fsm.KeyCreated, Name: "cust:b", Template: "cust"}}
	if !reflect.DeepEqual(o.changes, created) {
		t.Fatalf("changes observed: %+v, want %+v", o.changes, created)
	}
	o.changes = nil
	apply(fsm.AppendNoop(nil, at(7*sec-1)), nil)
	if len(o.changes) != 0 {
		t.Fatalf("before the idle time: %+v, want no change", o.changes)
	}
	apply(fsm.AppendNoop(nil, at(7*sec)), nil)
	var dropped []string
	for _, c := range o.changes {
		if c.Kind != fsm.KeyDroppedIdle || c.Template != "cust" || c.GrantedRequests != 1 || c.GrantedPermits != 1 {
			t.Errorf("change %+v, want an idle drop of a key of cust with its 1 grant", c)
		}
		dropped = append(dropped, c.Name)
	}
	if fmt.Sprint(dropped) != "[cust:a cust:b]" {
		t.Fatalf("dropped after the idle time: %v, want [cust:a cust:b]", dropped)
	}
	// The family's counters keep what the dropped keys counted.
	if ts := n.TemplateStats(); len(ts) != 1 || ts[0].LiveKeys != 0 || ts[0].GrantedRequests != 2 || ts[0].GrantedPermits != 2 {
		t.Fatalf("TemplateStats after the drops: %+v, want no live key, 2 requests and 2 permits granted", ts)
	}
}
