package node

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// TestTemplateReadsThroughAFollower: a follower reads the templates from
// the leader (wire.OpReadTemplates), linearizably: a template put through
// one node is read back at once through another with its config, idle
// time, caps and live keys; a deleted one is not found alone, and is
// listed as deleted while its key lives; an invalid prefix is ErrInvalid.
func TestTemplateReadsThroughAFollower(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 20*time.Second)
	fs := c.followers(l)
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 5})
	if err != nil {
		t.Fatal(err)
	}
	retryNoLeader(t, func() error {
		_, err := fs[0].PutTemplate(ctx, fsm.PutTemplate{Prefix: "b", Config: cfg, IdleNanos: int64(time.Minute), MaxKeys: 7})
		return err
	})
	if _, err := l.PutTemplate(ctx, fsm.PutTemplate{Prefix: "a", Config: cfg, IdleNanos: int64(time.Hour), MaxKeys: 1}); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Reserve(ctx, fsm.Reserve{Limit: "b:k", Permits: 1}); err != nil || res.Status != fsm.Granted {
		t.Fatalf("reserve on a new key: %+v %v", res, err)
	}
	ts, err := fs[1].Templates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Prefix != "a" || ts[1].Prefix != "b" {
		t.Fatalf("templates through a follower: %+v, want a and b in order", ts)
	}
	b := ts[1]
	if b.IdleNanos != int64(time.Minute) || b.MaxKeys != 7 || b.LiveKeys != 1 || b.Config.Spec.Rate != 5 || b.Config.Spec.Algorithm != bucket.Strict {
		t.Fatalf("template b through a follower: %+v", b)
	}
	if one, err := fs[1].Template(ctx, "b"); err != nil || one.LiveKeys != 1 || one.MaxKeys != 7 {
		t.Fatalf("template b alone: %+v %v", one, err)
	}
	if _, err := l.DeleteTemplate(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs[1].Template(ctx, "b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deleted template: %v, want ErrNotFound", err)
	}
	ts, err = fs[0].Templates(ctx)
	if err != nil || len(ts) != 2 || ts[0].Prefix != "a" || ts[0].Deleted || ts[1].Prefix != "b" || !ts[1].Deleted || ts[1].LiveKeys != 1 || ts[1].MaxKeys != 7 {
		t.Fatalf("templates after the delete: %+v %v, want a, and b deleted with its 1 live key", ts, err)
	}
	if _, err := fs[0].Template(ctx, "a:b"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an invalid prefix: %v, want ErrInvalid", err)
	}
}

// TestTemplatesAnswerCodec: OpReadTemplates' answer carries a deleted
// template's flag, and an answer with a flag this node does not know is
// refused, naming what is allowed (never taken as an active template).
func TestTemplatesAnswerCodec(t *testing.T) {
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 5})
	if err != nil {
		t.Fatal(err)
	}
	in := []fsm.TemplateInfo{{Prefix: "a", Config: cfg, IdleNanos: 1e9, MaxKeys: 3, LiveKeys: 2, Deleted: true}, {Prefix: "b", Config: cfg, IdleNanos: 2e9, MaxKeys: 1}}
	b, err := encodeTemplates(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeTemplates(b)
	if err != nil || len(out) != 2 || !out[0].Deleted || out[0].LiveKeys != 2 || out[1].Deleted || out[1].Prefix != "b" {
		t.Fatalf("round trip: %+v %v", out, err)
	}
	one, err := encodeTemplates(in[1:])
	if err != nil {
		t.Fatal(err)
	}
	one[len(one)-1] = 2 // the flags, last
	if _, err := decodeTemplates(one); err == nil || !strings.Contains(err.Error(), "unknown flags 0x2 (allowed: 0x1, deleted)") {
		t.Fatalf("unknown flags: %v", err)
	}
}
