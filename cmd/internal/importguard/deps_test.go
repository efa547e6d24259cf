package importguard

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// heavy are the dependencies the client side never links: the register
// (node, fsm) and what only the register needs (raft and its stores).
var heavy = []string{"github.com/hashicorp/raft", "go.etcd.io/bbolt", "github.com/boltdb/bolt", module + "node", module + "fsm"}

// memberlist is the gossip library: only the worker (and what embeds it)
// may link it.
const memberlist = "github.com/hashicorp/memberlist"

// lightPackages are the packages whose full dependency graph (go list
// -deps, the code a program that imports them links) must stay light, and
// whether memberlist may be in it. jepsen-lite/... are all of jepsen-lite's
// packages: it reaches permitd only through the Go client.
var lightPackages = map[string]bool{
	"transport/client":  false,
	"transport/wire":    false,
	"transport/api":     false,
	"transport/limiter": false,
	"transport/relay":   false,
	"transport/worker":  true,
	"transport/sidecar": true,
	"jepsen-lite/...":   false,
}

// heavyDeps returns one line per dependency of pkg (its go list -deps)
// that it must not link: a heavy one, or memberlist unless allowed.
func heavyDeps(pkg string, deps []string, memberlistOK bool) []string {
	var out []string
	for _, d := range deps {
		bad := slices.ContainsFunc(heavy, func(h string) bool { return d == h || strings.HasPrefix(d, h+"/") })
		if !memberlistOK && (d == memberlist || strings.HasPrefix(d, memberlist+"/")) {
			bad = true
		}
		if bad {
			out = append(out, pkg+" depends on "+d)
		}
	}
	return out
}

// TestClientSideIsLight: the full dependency graphs (go list -deps) of
// the client-side packages and of jepsen-lite contain neither the server
// (node, fsm) nor raft or bbolt; only the worker, which gossips, and the
// sidecar that runs it have memberlist.
func TestClientSideIsLight(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	args := []string{"list", "-json=ImportPath,Deps"}
	for p := range lightPackages {
		args = append(args, "./"+p)
	}
	cmd := exec.Command(goTool, args...)
	cmd.Dir = moduleRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	seen := map[string]bool{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkg := strings.TrimPrefix(p.ImportPath, module)
		memberlistOK, ok := lightPackages[pkg]
		if !ok && strings.HasPrefix(pkg, "jepsen-lite/") {
			memberlistOK, ok = lightPackages["jepsen-lite/..."], true
		}
		if !ok {
			t.Fatalf("go list answered for %s, which was not asked", pkg)
		}
		seen[pkg] = true
		if len(p.Deps) < 2 {
			t.Errorf("%s: only %d dependencies listed", pkg, len(p.Deps))
		}
		for _, v := range heavyDeps(pkg, p.Deps, memberlistOK) {
			t.Error(v)
		}
	}
	for p := range lightPackages {
		if !strings.HasSuffix(p, "/...") && !seen[p] {
			t.Errorf("go list did not list %s", p)
		}
	}
	if !seen["jepsen-lite/runner"] {
		t.Error("go list did not list jepsen-lite/runner: the jepsen-lite/... pattern matched nothing")
	}
}
