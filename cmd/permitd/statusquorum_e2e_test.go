package main

import (
	"strings"
	"testing"
	"time"
)

// TestStatusOfOneNodeOfThree: one node of a three-node cluster started,
// the way a newcomer does first. status names what is missing — no quorum
// answers, so no leader, and which of the others were asked (n2, not up)
// or not (n3, not in --servers) — and the node logs its campaign.
func TestStatusOfOneNodeOfThree(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs an agent")
	}
	bin := buildPermitd(t)
	agents := newTestAgents(t, 3)
	n1, n2 := agents[0], agents[1]
	n1.start(t, bin, nil, "agent", "--id", n1.id, "--data-dir", n1.dataDir, "--raft-addr", n1.raftAddr,
		"--http-addr", n1.httpAddr, "--initial-cluster", initialCluster(agents))

	const noLeader = "no leader: 1 of 3 voters answer; a leader needs 2: start the others (n2, n3) or check the network"
	var r cliResult
	waitUntil(t, 20*time.Second, "status naming the missing quorum", func() bool {
		r = runCLI(t, bin, nil, "status", "--servers", serversOf(n1, n2), "--timeout", "2s")
		return strings.Contains(r.stderr, noLeader)
	})
	wantCode(t, r, exitFailure)
	for _, want := range []string{
		n2.httpAddr + " unreachable",
		"n1 knows no leader",
		"did not answer: at most 1 of them can be behind the unreachable addresses above, the rest were not asked",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("status lacks %q: %v", want, r)
		}
	}
	r = runCLI(t, bin, nil, "status", "--servers", n1.httpAddr, "--timeout", "2s")
	if want := "members n2 (raft " + n2.raftAddr + "), n3 (raft " + agents[2].raftAddr + ") were not asked"; !strings.Contains(r.stderr, want) {
		t.Errorf("status with only n1's address lacks %q: %v", want, r)
	}

	waitUntil(t, 20*time.Second, "the agent's campaign log line", func() bool {
		return strings.Contains(n1.log.String(), "no leader yet: campaigning")
	})
}
