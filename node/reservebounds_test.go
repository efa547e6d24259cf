package node

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
)

// TestFollowerDecidesAMaxWaitAtTheEndOfTime: a reserve through a follower
// with a max wait near math.MaxInt64 (2562047h47m16s and beyond: any the
// edge accepts) gets the leader's decision. The follower's deadline for
// the leader's answer, now plus the max wait plus LeaderWait, wrapped into
// the past: the reserve was forwarded and decided, and the follower
// answered ErrNoLeader (503) at once, so that a client retrying without a
// request ID was granted twice.
func TestFollowerDecidesAMaxWaitAtTheEndOfTime(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 30*time.Second)
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: longExpiry(t)}); return err })
	f := c.followers(l)[0]
	leaderWait := f.cfg.LeaderWait
	var answered uint64
	for i, maxWait := range []int64{
		int64(2562047*time.Hour + 47*time.Minute + 16*time.Second),
		math.MaxInt64 - int64(leaderWait) + 1, // the first that wrapped
		math.MaxInt64,
	} {
		for _, id := range []string{fmt.Sprintf("end-%d-%d", i, time.Now().UnixNano()), ""} {
			res, err := f.Reserve(ctx, fsm.Reserve{Limit: "api", Permits: 1, MaxWaitNanos: maxWait, RequestID: id})
			if err != nil || (res.Status != fsm.Granted && res.Status != fsm.Refused) {
				t.Fatalf("max wait %v (%d ns), request id %q, via a follower: %+v, %v; want the leader's decision", time.Duration(maxWait), maxWait, id, res, err)
			}
			answered++
		}
	}
	info, _ := l.fsm.Limit("api")
	if got := info.GrantedRequests + info.RefusedRequests; got != answered {
		t.Fatalf("the register decided %d reserves, the follower answered %d", got, answered)
	}
}
