package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/permitd/permitd/transport/client"
)

// statusMembers is the raft configuration every hand-made report below
// gives: three voters, all of them asked.
var statusMembers = []client.Server{
	{ID: "n1", RaftAddr: "127.0.0.1:9001", Voter: true},
	{ID: "n2", RaftAddr: "127.0.0.1:9002", Voter: true},
	{ID: "n3", RaftAddr: "127.0.0.1:9003", Voter: true},
}

// withPending is st whose configuration also holds non-voter n9, as the
// leader sees it when leader is set (the others' answers lack the view).
func withPending(st client.Status, leader bool) client.Status {
	n9 := client.Server{ID: "n9", RaftAddr: "127.0.0.1:9009"}
	if leader {
		n9.Promotion = &client.Promotion{State: "unreachable", Reason: "no connection over the cluster's network: x509: certificate signed by unknown authority",
			LeaderCommitIndex: 9, WatchedNs: 12e9}
	}
	st.Servers = append(slices.Clone(statusMembers), n9)
	return st
}

// statusOf is a node's answer to GET /v1/status: ready, applied its log,
// and naming leader.
func statusOf(id, state, leader string) client.Status {
	return client.Status{ID: id, State: state, LeaderID: leader, Term: 2, AppliedIndex: 9, CommitIndex: 9,
		Ready: true, Servers: statusMembers}
}

// TestStatusProblems: the README's promise for permitd status, a case at a
// time on hand-made answers: healthy when every node is ready and names
// the same leader; else each reason is one line an operator can act on,
// naming the nodes.
func TestStatusProblems(t *testing.T) {
	notReady := statusOf("n3", "follower", "n1")
	notReady.Ready, notReady.AppliedIndex = false, 5
	for _, tc := range []struct {
		name        string
		statuses    []client.Status
		unreachable []string // addresses asked that did not answer
		foundDown   []string // members asked at the address the cluster view gives, that did not answer
		want        []string // the problems, exactly
	}{{
		name:     "all nodes ready and agreeing",
		statuses: []client.Status{statusOf("n1", "leader", "n1"), statusOf("n2", "follower", "n1"), statusOf("n3", "follower", "n1")},
		want:     nil,
	}, {
		// n3 still leads a term the others have left (a partition that
		// just healed): each leader is named with the nodes that follow it.
		name:     "two nodes name different leaders",
		statuses: []client.Status{statusOf("n1", "leader", "n1"), statusOf("n2", "follower", "n1"), statusOf("n3", "leader", "n3")},
		want:     []string{"nodes disagree on the leader (n1,n2 follow n1; n3 follow n3)"},
	}, {
		name:     "a node knows the leader but has not applied its log",
		statuses: []client.Status{statusOf("n1", "leader", "n1"), statusOf("n2", "follower", "n1"), notReady},
		want:     []string{"n3 not ready (applied 5 of 9)"},
	}, {
		// n9 joined (a stranger's certificate, or a node still catching
		// up): reported with the leader's reason, and not required among
		// --servers (nobody knows its HTTP address).
		name: "a joined server that does not vote yet",
		statuses: []client.Status{withPending(statusOf("n1", "leader", "n1"), true), withPending(statusOf("n2", "follower", "n1"), false),
			withPending(statusOf("n3", "follower", "n1"), false)},
		want: []string{"n9 (raft 127.0.0.1:9009) joined and does not vote yet, watched by the leader for 12s: unreachable: no connection over the cluster's network: x509: certificate signed by unknown authority; " +
			"the leader makes it a voter once it has caught up: remove it (permitd cluster remove n9) if it never will"},
	}, {
		name:     "a joined server without the leader's view",
		statuses: []client.Status{withPending(statusOf("n2", "follower", "n1"), false)},
		want: []string{"n9 (raft 127.0.0.1:9009) joined and does not vote yet (no answer from the leader says how far it has come)",
			"members n1 (raft 127.0.0.1:9001), n3 (raft 127.0.0.1:9003) were not asked: no node that answered knows their HTTP addresses (none has heard from them since it started: not started, or down?) and --servers does not give them"},
	}, {
		// One node of three started, and only its address given: no
		// quorum answers, and the others were never asked.
		name:     "a lone candidate, the others not asked",
		statuses: []client.Status{statusOf("n1", "candidate", "")},
		want: []string{"n1 knows no leader (state candidate)",
			"no leader: 1 of 3 voters answer; a leader needs 2: start the others (n2, n3) or check the network",
			"members n2 (raft 127.0.0.1:9002), n3 (raft 127.0.0.1:9003) were not asked: no node that answered knows their HTTP addresses (none has heard from them since it started: not started, or down?) and --servers does not give them"},
	}, {
		// n2's address given but nothing answers there; n3's not given.
		name:        "a lone candidate, one other asked and unreachable",
		statuses:    []client.Status{statusOf("n1", "candidate", "")},
		unreachable: []string{"127.0.0.1:8102"},
		want: []string{"127.0.0.1:8102 unreachable (boom)", "n1 knows no leader (state candidate)",
			"no leader: 1 of 3 voters answer; a leader needs 2: start the others (n2, n3) or check the network",
			"members n2 (raft 127.0.0.1:9002), n3 (raft 127.0.0.1:9003) did not answer: at most 1 of them can be behind the unreachable addresses above, the rest were not asked: no node that answered knows their HTTP addresses (none has heard from them since it started) and --servers does not give them"},
	}, {
		// Both others asked and unreachable: the unreachable lines say it.
		name:        "a lone candidate, every other asked and unreachable",
		statuses:    []client.Status{statusOf("n1", "candidate", "")},
		unreachable: []string{"127.0.0.1:8102", "127.0.0.1:8103"},
		want: []string{"127.0.0.1:8102 unreachable (boom)", "127.0.0.1:8103 unreachable (boom)", "n1 knows no leader (state candidate)",
			"no leader: 1 of 3 voters answer; a leader needs 2: start the others (n2, n3) or check the network"},
	}, {
		// n1's address given; n3 asked at the HTTP address n1's view gives,
		// and down: named, with no "not asked" line.
		name:      "a member found in the cluster view and unreachable there",
		statuses:  []client.Status{statusOf("n1", "leader", "n1"), statusOf("n2", "follower", "n1")},
		foundDown: []string{"n3"},
		want:      []string{"n3 unreachable at 127.0.0.1:8203, its HTTP address in the cluster view (boom)"},
	}, {
		// A quorum answers but has no leader yet (an election under way):
		// no quorum line.
		name:     "an election among a quorum",
		statuses: []client.Status{statusOf("n1", "candidate", ""), statusOf("n2", "follower", ""), statusOf("n3", "follower", "")},
		want:     []string{"n1 knows no leader (state candidate)", "n2 knows no leader (state follower)", "n3 knows no leader (state follower)"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var reports []nodeReport
			for _, addr := range tc.unreachable {
				reports = append(reports, nodeReport{server: addr, err: errors.New("boom")})
			}
			for _, id := range tc.foundDown {
				reports = append(reports, nodeReport{server: "127.0.0.1:820" + id[1:], member: id, err: errors.New("boom")})
			}
			for i, st := range tc.statuses {
				reports = append(reports, nodeReport{server: "127.0.0.1:800" + string(rune('1'+i)), status: st})
			}
			if got := statusProblems(reports); !slices.Equal(got, tc.want) {
				t.Fatalf("problems %q, want %q", got, tc.want)
			}
		})
	}
}

// TestStatusExitsOneWhenNodesDisagree: the whole command on nodes that
// disagree on the leader (each served by a fake GET /v1/status): exit 1,
// the table on stdout, and the reason on one line of stderr.
func TestStatusExitsOneWhenNodesDisagree(t *testing.T) {
	var servers []string
	for _, st := range []client.Status{statusOf("n1", "leader", "n1"), statusOf("n2", "follower", "n1"), statusOf("n3", "leader", "n3")} {
		body, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/status" {
				t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		}))
		t.Cleanup(srv.Close)
		servers = append(servers, strings.TrimPrefix(srv.URL, "http://"))
	}
	var stdout, stderr bytes.Buffer
	code := runStatus([]string{"--servers", strings.Join(servers, ","), "--timeout", "5s"}, &stdout, &stderr)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailure, stdout.String(), stderr.String())
	}
	if want := "permitd status: degraded: nodes disagree on the leader (n1,n2 follow n1; n3 follow n3)\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
	if lines := strings.Split(strings.TrimSpace(stdout.String()), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[3], "n3 ") ||
		!strings.Contains(lines[3], " leader    n3 ") {
		t.Errorf("want a header and three rows, n3 a leader of itself:\n%s", stdout.String())
	}
}
