package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/permitd/permitd/cmd/internal/demo"
)

// TestDemoScenes runs every scene of `permitd demo`, short: scene 1 with a
// leader kill, then scene 2 with group C cut off from the register, then
// scene 3 for its minimum of 2 s. It
// checks the lines each scene prints, that the partition is shown and
// healed, that every group spent permits, and that the fleet stayed within
// the over-grant bound (the demo itself fails otherwise).
func TestDemoScenes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster and 6 workers for ~10 s")
	}
	var out, errOut bytes.Buffer
	code := runDemo([]string{"--duration", "3s", "--kill-after", "1s", "--scene2-duration", "6s", "--scene3-duration", "2s"}, &out, &errOut)
	text := out.String()
	t.Logf("demo output:\n%s", text)
	if code != 0 {
		t.Fatalf("demo exited %d; stderr: %s", code, errOut.String())
	}
	for _, want := range []string{
		"*** killing leader",
		"done: ",
		"scene 2: leased limit \"fleet\"",
		"*** cutting group C off from the register",
		"[C PARTITIONED from the register]",
		"*** group C reconnected",
		": within the bound",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// Every group spent permits in some second of scene 2.
	scene2 := text[strings.Index(text, "scene 2:"):]
	for _, g := range demo.Groups {
		re := regexp.MustCompile(`\b` + g + `:\s+(\d+)/s`)
		total := 0
		for _, m := range re.FindAllStringSubmatch(scene2, -1) {
			n, _ := strconv.Atoi(m[1])
			total += n
		}
		if total == 0 {
			t.Errorf("group %s spent nothing in scene 2", g)
		}
	}
}

func TestDemoFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--scene", "4"},
		{"--scene2-duration", "1s"},
		{"--scene2-rate", "0"},
	} {
		var out, errOut bytes.Buffer
		if code := runDemo(args, &out, &errOut); code != 2 {
			t.Errorf("demo %q: exit %d, want 2 (stderr %q)", args, code, errOut.String())
		}
	}
}

// TestDemoSecure runs scene 1 of `permitd demo --secure`: the cluster
// elects a leader over mutual TLS, the clients reach it over TLS with the
// admin token, and the leader kill fails over as in the plain demo.
func TestDemoSecure(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster for ~3 s")
	}
	var out, errOut bytes.Buffer
	code := runDemo([]string{"--secure", "--scene", "1", "--duration", "3s", "--kill-after", "1s"}, &out, &errOut)
	text := out.String()
	if code != 0 {
		t.Fatalf("demo exited %d; stderr: %s\n%s", code, errOut.String(), text)
	}
	for _, want := range []string{"secure: raft over mutual TLS", "*** killing leader", "done: "} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if m := regexp.MustCompile(`done: (\d+) permits`).FindStringSubmatch(text); m == nil || m[1] == "0" {
		t.Errorf("no permits granted through the secured cluster:\n%s", text)
	}
}
