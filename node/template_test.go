package node

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// TestTemplatesThroughAFollower: a template put and deleted through a
// follower reaches the register, a reserve on a key it names is created
// and decided in one entry (the edge's checks let it through), and after
// the delete a new key is unknown.
func TestTemplatesThroughAFollower(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 20*time.Second)
	f := c.followers(l)[0]
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Bursty, Rate: 1, MaxBurstSeconds: 2})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := fsm.PutTemplate{Prefix: "cust", Config: cfg, IdleNanos: int64(time.Minute), MaxKeys: 100}
	retryNoLeader(t, func() error { _, err := f.PutTemplate(ctx, tmpl); return err })
	for i := range 2 { // the store is full: two at once
		res, err := f.Reserve(ctx, fsm.Reserve{Limit: "cust:a", Permits: 1, RequestID: fmt.Sprintf("tpl%d-%d", i, time.Now().UnixNano())})
		if err != nil || res.Status != fsm.Granted {
			t.Fatalf("reserve %d on a new key: %+v %v", i, res, err)
		}
	}
	strict, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.PutTemplate(ctx, fsm.PutTemplate{Prefix: "one", Config: strict, IdleNanos: int64(time.Minute), MaxKeys: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Reserve(ctx, fsm.Reserve{Limit: "one:b", Permits: 2}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("more permits than the template's config grants: %v, want ErrInvalid", err)
	}
	if res, err := f.DeleteTemplate(ctx, "cust"); err != nil || !res.Existed || res.LiveKeys != 1 {
		t.Fatalf("delete template: %+v %v", res, err)
	}
	if _, err := f.DeleteTemplate(ctx, "cust"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if _, err := f.Reserve(ctx, fsm.Reserve{Limit: "cust:c", Permits: 1}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a new key after the delete: %v, want ErrNotFound", err)
	}
	if _, err := f.PutTemplate(ctx, fsm.PutTemplate{Prefix: "a:b", Config: cfg, IdleNanos: int64(time.Minute), MaxKeys: 1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an invalid prefix: %v, want ErrInvalid", err)
	}
}
