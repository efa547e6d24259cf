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
// leader kill, then scene 2 with group X cut off from the register, then
// scene 3 for its minimum of 2 s. It checks that each scene says what it
// proves, prints its checks and a PASS verdict (the demo exits 1 on a
// FAIL), that the cut is shown and healed, and that every group spent
// permits.
func TestDemoScenes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster and 6 workers for ~17 s")
	}
	var out, errOut bytes.Buffer
	code := runDemo([]string{"--duration", "5s", "--kill-after", "1s", "--scene2-duration", "8s", "--scene3-duration", "2s"}, &out, &errOut)
	text := out.String()
	t.Logf("demo output:\n%s", text)
	if code != 0 {
		t.Fatalf("demo exited %d; stderr: %s", code, errOut.String())
	}
	wantInDemoOutput(t, text,
		"scene 1 (5 s): clients share a strict limit",
		"scene 3 (2 s): each call reserves",
		"=== scene 1: paced clients through a leader crash (5 s) ===",
		"What it proves: no two permits are used closer than interval - expiry = 90 ms",
		"killing the leader",
		"[ok]   smallest gap between any two permits used: ",
		"[ok]   most permits used in any sliding 1 s window: ",
		"— allowed: ≥ interval - expiry = 100 ms - 10 ms = 90 ms",
		"[ok]   permits asked for after the leader's crash and used: ",
		"scene 1 (paced clients through a leader crash): PASS",
		"=== scene 2: leased workers, one group cut off (8 s) ===",
		"where C = ",
		"*** 2 s: cutting group X off from the cluster",
		"X cut off",
		"*** 6 s: group X reconnected",
		"allowed: ≤ C + O + floor(W / I) + 1 = ",
		"[ok]   permits group X spent cut off, from ",
		"[ok]   permits group X spent after its reconnection: ",
		"scene 2 (leased workers, one group cut off): PASS",
		"[ok]   calls the API answered 429 (too many requests): 0 — allowed: 0",
		"scene 3 (one reserve for three limits of a fake LLM API): PASS",
		"=== summary ===",
		"3 of 3 scenes passed in ",
	)
	// Every group spent permits in some second of scene 2: each line
	// has "spent (share)" per group, in the order of demo.Groups.
	scene2 := text[strings.Index(text, "=== scene 2"):strings.Index(text, "=== scene 3")]
	totals := make([]int, len(demo.Groups))
	row := regexp.MustCompile(`(?m)^\d+ s\s+(.*)$`)
	cell := regexp.MustCompile(`(\d+) \(\d+\)`)
	for _, m := range row.FindAllStringSubmatch(scene2, -1) {
		for i, c := range cell.FindAllStringSubmatch(m[1], len(demo.Groups)) {
			n, _ := strconv.Atoi(c[1])
			totals[i] += n
		}
	}
	for i, g := range demo.Groups {
		if totals[i] == 0 {
			t.Errorf("group %s spent nothing in scene 2", g)
		}
	}
}

// wantInDemoOutput fails t for each of wants that text lacks, and if a
// check or a scene failed.
func wantInDemoOutput(t *testing.T, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(text, "[FAIL]") || strings.Contains(text, "): FAIL") {
		t.Errorf("a check failed")
	}
}

func TestDemoFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--scene", "4"},
		{"--scene2-duration", "1s"},
		{"--scene2-duration", "7s"},
		{"--scene2-rate", "0"},
	} {
		var out, errOut bytes.Buffer
		if code := runDemo(args, &out, &errOut); code != 2 {
			t.Errorf("demo %q: exit %d, want 2 (stderr %q)", args, code, errOut.String())
		}
	}
}

// TestDemoHelp checks that permitd --help's line about the demo names its
// three scenes, and that demo --help lists the tokens flag under the name
// of what it takes (tokens per second), not its old name.
func TestDemoHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	run([]string{"--help"}, &out, &errOut)
	line := ""
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "demo ") {
			line = l
		}
	}
	for _, want := range []string{"leader crash", "group cut off", "fake LLM API"} {
		if !strings.Contains(line, want) {
			t.Errorf("permitd --help's demo line %q lacks %q", line, want)
		}
	}
	out.Reset()
	runDemo([]string{"--help"}, &out, &errOut)
	help := out.String()
	if !strings.Contains(help, "--scene3-tokens-per-sec N") || strings.Contains(help, "--scene3-tpm") {
		t.Errorf("demo --help lists the old --scene3-tpm or lacks --scene3-tokens-per-sec:\n%s", help)
	}
}

// TestDemoSecure runs scene 1 of `permitd demo --secure`: the cluster
// elects a leader over mutual TLS, the clients reach it over TLS with the
// admin token, and the leader kill fails over as in the plain demo.
func TestDemoSecure(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster for ~5 s")
	}
	var out, errOut bytes.Buffer
	code := runDemo([]string{"--secure", "--scene", "1", "--duration", "5s", "--kill-after", "1s"}, &out, &errOut)
	text := out.String()
	if code != 0 {
		t.Fatalf("demo exited %d; stderr: %s\n%s", code, errOut.String(), text)
	}
	for _, want := range []string{"secure: raft over mutual TLS", "killing the leader", "scene 1 (paced clients through a leader crash): PASS", "1 of 1 scenes passed"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "=== scene 2") || strings.Contains(text, "=== scene 3") {
		t.Errorf("--scene 1 ran another scene:\n%s", text)
	}
	if m := regexp.MustCompile(`(\d+) permits used in`).FindStringSubmatch(text); m == nil || m[1] == "0" {
		t.Errorf("no permits used through the secured cluster:\n%s", text)
	}
}
