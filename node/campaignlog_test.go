package node

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/node/faultnet"
	"github.com/permitd/permitd/transport/wire"
)

// syncBuffer is a bytes.Buffer a logger writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLoneNodeOfThreeLogsItsCampaign: one node of a three-voter cluster
// started alone never wins an election, and says so at INFO with the term
// and the voters it needs, not at every election timeout.
func TestLoneNodeOfThreeLogsItsCampaign(t *testing.T) {
	var servers []raft.Server
	for _, id := range []string{"n1", "n2", "n3"} {
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addrOf(id)), Suffrage: raft.Voter})
	}
	out := &syncBuffer{}
	n, err := New(Config{
		ID: "n1", DataDir: t.TempDir(), RaftAddr: addrOf("n1"), InitialCluster: servers,
		Clock: wire.NewMonotonicClock(), Network: faultnet.New().Host(addrOf("n1")),
		Logger:           hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Info, Output: out}),
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond, ApplyTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Kill)
	const line = "no leader yet: campaigning"
	waitFor(t, 20*time.Second, "the campaign log line", func() bool { return strings.Contains(out.String(), line) })
	var got string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, line) {
			got = l
			break
		}
	}
	for _, want := range []string{"[INFO]", "term=", `voters=["n1", "n2", "n3"]`, "votes_needed=2"} {
		if !strings.Contains(got, want) {
			t.Errorf("the campaign line lacks %q:\n%s", want, got)
		}
	}
}

// TestCampaignLogIsRateLimited: the line waits campaignQuietFor into a
// campaign, then comes at most every campaignLogEvery, whatever the
// polling rate; a node that stops campaigning starts over.
func TestCampaignLogIsRateLimited(t *testing.T) {
	var c campaignLog
	start := time.Unix(1000, 0)
	var at []time.Duration
	for d := time.Duration(0); d <= 30*time.Second; d += 10 * time.Millisecond {
		if c.due(true, start.Add(d)) {
			at = append(at, d)
		}
	}
	if len(at) == 0 || at[0] != campaignQuietFor {
		t.Fatalf("logged at %v, want the first at %v", at, campaignQuietFor)
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i] - at[i-1]; gap < campaignLogEvery {
			t.Fatalf("logged at %v: a gap of %v, want at least %v", at, gap, campaignLogEvery)
		}
	}
	if want := 1 + int((30*time.Second-campaignQuietFor)/campaignLogEvery); len(at) != want {
		t.Fatalf("logged %d times in 30s (%v), want %d", len(at), at, want)
	}
	if c.due(false, start.Add(31*time.Second)) || c.due(true, start.Add(32*time.Second)) {
		t.Fatal("a new campaign logged before campaignQuietFor")
	}
	if !c.due(true, start.Add(32*time.Second+campaignQuietFor)) {
		t.Fatal("a new campaign did not log after campaignQuietFor")
	}
}
