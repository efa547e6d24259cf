package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWorkerGossipKeyFileKeepsAKeylessWorkerOut: the README's promise for
// `permitd worker --gossip-key-file` as the binary wires it (the
// library's own test is transport/worker's TestGossipKeyKeepsStrangersOut).
// Worker a has the key; c, given the same key file, joins a's group; b,
// without it, tries to join a and never does, and a counts what it
// dropped. A flag that did not reach the worker's gossip would let b in.
func TestWorkerGossipKeyFileKeepsAKeylessWorkerOut(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := permitdUnderTest(t)
	ag := startLoneAgent(t, bin)
	cl := func(args ...string) cliResult { return runCLI(t, bin, nil, append(args, "--servers", ag.httpAddr)...) }
	wantCode(t, cl("status", "--wait", "30s"), exitOK)
	wantCode(t, cl("limits", "put", "gk", "--algorithm", "strict", "--rate", "100", "--per", "1s"), exitOK)
	wantCode(t, cl("limits", "lease-policy", "gk", "--leased=true"), exitOK)

	keyFile := filepath.Join(t.TempDir(), "gossip.keys")
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 6)
	gossipAddr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[2*i]) }
	sidecarAddr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]) }
	var workers []*testAgent
	startWorker := func(i int, name string, extra ...string) {
		w := &testAgent{id: name}
		args := []string{"worker", "--group", "g", "--name", name, "--limit", "gk", "--servers", ag.httpAddr,
			"--gossip-addr", gossipAddr(i), "--http-addr", sidecarAddr(i)}
		w.start(t, bin, nil, append(args, extra...)...)
		t.Cleanup(func() { w.signal(t, syscall.SIGKILL) }) // even if a later start fails
		workers = append(workers, w)
	}
	startWorker(0, "a", "--gossip-key-file", keyFile)
	startWorker(1, "b", "--join", gossipAddr(0))
	startWorker(2, "c", "--join", gossipAddr(0), "--gossip-key-file", keyFile)
	hc := &http.Client{Timeout: 5 * time.Second}
	// Every sidecar ready: each worker holds a lease, its join tried.
	superviseSidecars(t, hc, workers, []string{sidecarAddr(0), sidecarAddr(1), sidecarAddr(2)})

	type status struct {
		Members map[string][]string `json:"members"`
		Stats   struct {
			GossipRejected uint64 `json:"gossip_rejected"`
		} `json:"stats"`
	}
	statusOf := func(i int) (status, bool) {
		resp, err := hc.Get("http://" + sidecarAddr(i) + "/v1/status")
		if err != nil {
			return status{}, false
		}
		defer resp.Body.Close()
		var st status
		return st, resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&st) == nil
	}
	var a status
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("a's last status: %+v", a)
		}
	})
	waitUntil(t, 30*time.Second, "a to see c in its group and to have dropped b's gossip", func() bool {
		st, ok := statusOf(0)
		if ok {
			a = st
		}
		return ok && slices.Contains(st.Members["g"], "c") && st.Stats.GossipRejected > 0
	})
	a, okA := statusOf(0)
	b, okB := statusOf(1)
	if !okA || !okB {
		t.Fatalf("status of a (%t) or b (%t) unreadable", okA, okB)
	}
	if slices.Contains(a.Members["g"], "b") || slices.Contains(b.Members["g"], "a") {
		t.Fatalf("a worker without the gossip key joined the keyed group: a sees %v, b sees %v", a.Members, b.Members)
	}
	if !strings.Contains(workers[0].log.String(), "gossip_encrypted=true") {
		t.Errorf("a did not log its gossip as encrypted")
	}
}
