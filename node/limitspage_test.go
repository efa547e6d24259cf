package node

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
)

// A page of limits read through a follower (forwarded to the leader) or
// the leader reflects every acknowledged change, and walking the pages
// yields each limit with the prefix once, in order; an invalid query is
// refused before it reaches another node.
func TestLimitsPageThroughEveryNode(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 30*time.Second)
	var want []string
	for i := range 12 {
		name := fmt.Sprintf("acct:%02d", i)
		want = append(want, name)
		for _, n := range []string{name, fmt.Sprintf("other%d", i)} {
			retryNoLeader(t, func() error {
				_, err := l.PutLimit(ctx, fsm.PutLimit{Name: n, Config: strictConfig(t, time.Millisecond, 5)})
				return err
			})
		}
	}
	for _, n := range append([]*Node{l}, c.followers(l)...) {
		var got []string
		q := fsm.LimitsQuery{Prefix: "acct:", Size: 5}
		for pages := 0; ; pages++ {
			var page []fsm.LimitInfo
			var more bool
			retryNoLeader(t, func() error { var err error; page, more, err = n.LimitsPage(ctx, q); return err })
			for _, li := range page {
				got = append(got, li.Name)
			}
			if !more || pages > 5 {
				break
			}
			q.After = page[len(page)-1].Name
		}
		if !slices.Equal(got, want) {
			t.Errorf("node %s: pages gave %v, want %v", n.cfg.ID, got, want)
		}
	}
	if _, _, err := c.followers(l)[0].LimitsPage(ctx, fsm.LimitsQuery{Prefix: "a b", Size: 5}); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid prefix: %v, want ErrInvalid", err)
	}
	if _, _, err := l.LimitsPage(ctx, fsm.LimitsQuery{Size: fsm.MaxLimitsPage + 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("page too large: %v, want ErrInvalid", err)
	}
}

// The leader refuses a forwarded page query that is malformed or out of
// range (a peer's bytes are network input): no panic, a clear error.
func TestLimitsQueryCodec(t *testing.T) {
	q := fsm.LimitsQuery{Prefix: "p:", After: "p:x", Size: 77}
	got, err := decodeLimitsQuery(encodeLimitsQuery(q))
	if err != nil || got != q {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	big := encodeLimitsQuery(fsm.LimitsQuery{Size: fsm.MaxLimitsPage + 1})
	if _, err := decodeLimitsQuery(big); err == nil {
		t.Errorf("a page size over the cap decoded")
	}
	for i := range len(encodeLimitsQuery(q)) {
		if _, err := decodeLimitsQuery(encodeLimitsQuery(q)[:i]); err == nil {
			t.Errorf("a payload cut at %d bytes decoded", i)
		}
	}
	p := limitsPage{Limits: []fsm.LimitInfo{{Name: "a", Config: strictConfig(t, time.Second, 1)}}, More: true}
	b, err := encodeLimitsPage(p)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeLimitsPage(b)
	if err != nil || !back.More || len(back.Limits) != 1 || back.Limits[0].Name != "a" {
		t.Fatalf("page round trip: %+v %v", back, err)
	}
	// A page too large for its answer's budget is cut, and says more follow.
	defer func(old int) { maxPageAnswerBytes = old }(maxPageAnswerBytes)
	many := limitsPage{}
	for i := range 100 {
		many.Limits = append(many.Limits, fsm.LimitInfo{Name: fmt.Sprintf("limit-%03d", i), Config: strictConfig(t, time.Second, 1)})
	}
	whole, _ := encodeLimitsPage(many)
	maxPageAnswerBytes = len(whole) / 3
	b, err = encodeLimitsPage(many)
	if err != nil {
		t.Fatal(err)
	}
	cut, err := decodeLimitsPage(b)
	if err != nil || !cut.More || len(cut.Limits) == 0 || len(cut.Limits) > 33 || len(b) > maxPageAnswerBytes+1 || cut.Limits[0].Name != "limit-000" {
		t.Errorf("a page over the budget: %d limits, more %v, %d bytes (budget %d), %v", len(cut.Limits), cut.More, len(b), maxPageAnswerBytes, err)
	}
	for _, bad := range [][]byte{nil, {2}, {1, 0xff}} {
		if _, err := decodeLimitsPage(bad); err == nil {
			t.Errorf("page %v decoded", bad)
		}
	}
}
