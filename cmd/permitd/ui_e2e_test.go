package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// uiTestDeps finds what the browser test needs: Debian's chromium, node,
// and the playwright-core npm package (in $PERMITD_UI_NODE_MODULES, else
// $HOME/.cache/permitd-ui-test/node_modules, where .ci/run installs it).
// Without one of them the test is skipped, or fails when
// PERMITD_REQUIRE_BROWSER=1 (CI).
func uiTestDeps(t *testing.T) (chromium, node, nodeModules string) {
	t.Helper()
	nodeModules = os.Getenv("PERMITD_UI_NODE_MODULES")
	if nodeModules == "" {
		home, _ := os.UserHomeDir()
		nodeModules = filepath.Join(home, ".cache", "permitd-ui-test", "node_modules")
	}
	var missing []string
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		missing = append(missing, "chromium (apt-get install chromium)")
	}
	node, err = exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node")
	}
	if _, err := os.Stat(filepath.Join(nodeModules, "playwright-core", "package.json")); err != nil {
		missing = append(missing, "playwright-core in "+nodeModules+" (npm install --prefix "+filepath.Dir(nodeModules)+" playwright-core)")
	}
	if len(missing) > 0 {
		if os.Getenv("PERMITD_REQUIRE_BROWSER") == "1" {
			t.Fatalf("PERMITD_REQUIRE_BROWSER=1 but missing: %s", strings.Join(missing, ", "))
		}
		t.Skipf("missing %s", strings.Join(missing, ", "))
	}
	return chromium, node, nodeModules
}

// TestStatusPageInABrowser opens /ui in headless chromium
// (testdata/ui_check.js, driven by playwright-core) on a real 3-node
// cluster and on an agent with --token-file. On the cluster, the page on a
// follower loads without console errors and shows the leader; after
// reserves, the limit's granted permits, in-flight permits and open
// reservations change on the page within 2 s, and reserves on three new
// keys of a template show, within 2 s, as one family row with its key
// count and granted permits (no row per key); after the leader is killed
// (SIGKILL) the page shows the new one. With tokens, the page asks for a
// token (saying 401), says so plainly when a token is refused, and with a
// client token restricted to api* lists exactly the limits it may read.
func TestStatusPageInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary and a browser")
	}
	chromium, node, nodeModules := uiTestDeps(t)
	bin := permitdUnderTest(t)

	agents := newTestAgents(t, 3)
	ids, httpAddr, _ := indexAgents(agents)
	for _, a := range agents {
		a.start(t, bin, nil, "agent", "--id", a.id, "--data-dir", a.dataDir, "--raft-addr", a.raftAddr,
			"--http-addr", a.httpAddr, "--initial-cluster", initialCluster(agents))
	}

	rootSecret, rootLine := newToken(t, bin, "--role", "admin", "--name", "root")
	appSecret, appLine := newToken(t, bin, "--role", "client", "--name", "app", "--limits", "api*")
	tokenFile := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokenFile, []byte(rootLine+"\n"+appLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secured := startLoneAgent(t, bin, "--token-file", tokenFile)

	hc := &http.Client{Timeout: 5 * time.Second}
	waitLeader(t, hc, httpAddr, ids)
	waitUntil(t, 20*time.Second, "the agent with tokens to be ready", func() bool {
		code, _ := doQuiet(hc, "GET", "http://"+secured.httpAddr+"/readyz", "")
		return code == http.StatusOK
	})
	for _, name := range []string{"api1", "api2", "other"} {
		req, err := http.NewRequest("PUT", "http://"+secured.httpAddr+"/v1/limits/"+name, strings.NewReader(`{"algorithm":"bursty","rate":10}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+rootSecret)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("put %s: %d", name, resp.StatusCode)
		}
	}

	type member struct {
		ID  string `json:"id"`
		URL string `json:"url"`
		PID int    `json:"pid"`
	}
	cfg := struct {
		Chromium string   `json:"chromium"`
		Cluster  []member `json:"cluster"`
		Tokens   any      `json:"tokens"`
	}{Chromium: chromium, Tokens: map[string]any{
		"url": "http://" + secured.httpAddr, "restricted": appSecret,
		"readable": []string{"api1", "api2"}, "hidden": []string{"other"},
	}}
	for _, a := range agents {
		cfg.Cluster = append(cfg.Cluster, member{ID: a.id, URL: "http://" + a.httpAddr, PID: a.cmd.Process.Pid})
	}
	arg, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "ui_check.js"), string(arg))
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodeModules)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("ui_check.js (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("ui_check.js: %v", err)
	}
}
