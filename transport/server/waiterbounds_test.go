package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// TestFullQueueOfWaitersAnswers503: a reserve that would wait in an
// in-flight cap's queue already holding fsm.MaxWaitersPerLimit reserves
// is answered 503 with Retry-After and an error that names the bound and
// the limit (the register's own decision, from a real FSM behind the
// store), not as a table of request IDs or reservations that is full.
func TestFullQueueOfWaitersAnswers503(t *testing.T) {
	f := fsm.New()
	var index uint64
	apply := func(b []byte, err error) any {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		index++
		return f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: b})
	}
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Concurrency, MaxInFlight: 1, HoldTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	const sec = int64(time.Second)
	apply(fsm.AppendPut(nil, fsm.Stamp{Nanos: sec, Term: 1}, fsm.PutLimit{Name: "cap", Config: cfg}))
	capReserve := func(maxWait time.Duration, id string) fsm.Reserve {
		return fsm.Reserve{Limit: "cap", Permits: 1, MaxWaitNanos: int64(maxWait), RequestID: id, Track: true}
	}
	apply(fsm.AppendReserveBatch(nil, fsm.Stamp{Nanos: sec, Term: 1}, []fsm.Reserve{capReserve(0, "holder")}))
	for i := 0; i < fsm.MaxWaitersPerLimit; {
		batch := make([]fsm.Reserve, 0, 64)
		for ; len(batch) < cap(batch) && i < fsm.MaxWaitersPerLimit; i++ {
			batch = append(batch, capReserve(30*time.Second, fmt.Sprintf("w%d", i)))
		}
		apply(fsm.AppendReserveBatch(nil, fsm.Stamp{Nanos: 2 * sec, Term: 1}, batch))
	}
	if n := f.Waiting(); n != fsm.MaxWaitersPerLimit {
		t.Fatalf("%d waiting, want %d", n, fsm.MaxWaitersPerLimit)
	}
	e := newEnv(t, HandlerOptions{})
	e.store.SetReserveFunc(func(_ context.Context, r fsm.Reserve) (fsm.ReserveResult, error) {
		return apply(fsm.AppendReserveBatch(nil, fsm.Stamp{Nanos: 3 * sec, Term: 1}, []fsm.Reserve{r})).([]fsm.ReserveResult)[0], nil
	})
	w := e.do(t, "POST", "/v1/reserve", `{"limits":[{"name":"cap","permits":1}],"max_wait":"10s","request_id":"late"}`)
	var body struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	want := fmt.Sprintf(`%d reserves wait in the queue of limit "cap", the most one limit's queue holds (fsm.MaxWaitersPerLimit, %d)`,
		fsm.MaxWaitersPerLimit, fsm.MaxWaitersPerLimit)
	// Retry when the first waiter's deadline (32 s) comes: 29 s after 3 s.
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "29" ||
		!strings.Contains(body.Error, want) || !strings.HasSuffix(body.Error, "retry after 29s") {
		t.Fatalf("a reserve on a full queue: %d %v %s, want 503, Retry-After 29, naming the bound", w.Code, w.Header(), w.Body)
	}
	if n := f.Waiting(); n != fsm.MaxWaitersPerLimit {
		t.Fatalf("%d waiting after the refused reserve, want %d", n, fsm.MaxWaitersPerLimit)
	}
}
