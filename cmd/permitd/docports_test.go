package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestMoveDocPorts: every loopback port of a block moves to a free one,
// the same everywhere it appears; a port written as a prefix and a loop
// variable moves with its literal ports (--initial-cluster) to the same
// new prefix.
func TestMoveDocPorts(t *testing.T) {
	script := "for i in 1 2 3; do agent --raft-addr 127.0.0.1:710$i --http-addr 127.0.0.1:810${i} " +
		"--initial-cluster n1=127.0.0.1:7101,n2=127.0.0.1:7102,n3=127.0.0.1:7103; done\n" +
		"export S=127.0.0.1:8101,127.0.0.1:8102 W=127.0.0.1:9001\ncurl 127.0.0.1:9001 127.0.0.1:8103\n"
	got := moveDocPorts(t, script)
	shape := regexp.MustCompile(`127\.0\.0\.1:(\d+)`)
	ports := shape.FindAllStringSubmatch(got, -1)
	if len(ports) != 10 {
		t.Fatalf("moved script has %d addresses, want 10:\n%s", len(ports), got)
	}
	raft, http := ports[0][1], ports[1][1]
	for _, want := range []string{
		"--raft-addr 127.0.0.1:" + raft + "$i", "--http-addr 127.0.0.1:" + http + "${i}",
		"n1=127.0.0.1:" + raft + "1,n2=127.0.0.1:" + raft + "2,n3=127.0.0.1:" + raft + "3",
		"S=127.0.0.1:" + http + "1,127.0.0.1:" + http + "2", "127.0.0.1:" + http + "3",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("moved script lacks %q:\n%s", want, got)
		}
	}
	if raft == "710" || http == "810" || len(raft) != 4 || raft == http {
		t.Errorf("prefixes moved to %s and %s:\n%s", raft, http, got)
	}
	w := regexp.MustCompile(`W=127\.0\.0\.1:(\d+)`).FindStringSubmatch(got)[1]
	if w == "9001" || strings.Count(got, "127.0.0.1:"+w+"\n")+strings.Count(got, "127.0.0.1:"+w+" ") != 2 {
		t.Errorf("127.0.0.1:9001 should move to one new port in both places:\n%s", got)
	}
}
