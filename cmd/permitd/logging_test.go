package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestLoggerQuietsRaftsRoutineMessages checks the agent's logger: raft's
// routine complaints about a peer that is down are logged at info in
// raft's logger (shown only from --log-level debug), its other warnings
// stay, its info lines are hidden at the default level, and the node's
// own info lines (leadership) show.
func TestLoggerQuietsRaftsRoutineMessages(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger("permitd", "info", "text", &buf)
	raftLog := log.Named("raft")
	raftLog.Error("failed to heartbeat to", "peer", "n3")
	raftLog.With("server-id", "n1").Warn("failed to contact", "server-id", "n3")
	raftLog.Warn("no known peers, aborting election")
	raftLog.Info("entering follower state")
	log.Named("raft-net").Info("accepted connection")
	raftLog.Error("failed to take snapshot", "error", "disk full")
	log.Info("leading: cluster timeline continues", "term", 2)
	out := buf.String()
	for _, hidden := range []string{"failed to heartbeat", "failed to contact", "no known peers", "entering follower", "accepted connection"} {
		if strings.Contains(out, hidden) {
			t.Errorf("%q logged at the default level:\n%s", hidden, out)
		}
	}
	for _, shown := range []string{"[ERROR] permitd.raft: failed to take snapshot", "[INFO]  permitd: leading: cluster timeline continues"} {
		if !strings.Contains(out, shown) {
			t.Errorf("%q not logged:\n%s", shown, out)
		}
	}

	buf.Reset()
	log = newLogger("permitd", "debug", "json", &buf)
	log.Named("raft").Error("failed to heartbeat to", "peer", "n3")
	log.Named("raft").Debug("a debug line")
	if out := buf.String(); !strings.Contains(out, `"@level":"info"`) || !strings.Contains(out, "failed to heartbeat to") ||
		strings.Contains(out, "a debug line") {
		t.Errorf("at debug, routine messages show at info and raft's debug lines do not:\n%s", out)
	}
}
