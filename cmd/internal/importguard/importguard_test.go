package importguard

import (
	"encoding/json"
	"go/build"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/permitd/permitd/"

// allowed lists, for each package of the module (by its path in the
// module), the module packages its non-test files may import. A package
// missing here fails the test: a new package states its place.
var allowed = map[string][]string{
	"bucket":        {},
	"fsm":           {"bucket"},
	"node":          {"bucket", "fsm", "transport/wire"},
	"node/faultnet": {},

	"transport":                    {"bucket", "fsm", "node", "transport/wire", "transport/internal/httpapi", "transport/auth", "transport/openapi"},
	"transport/internal/fakestore": {"bucket", "fsm", "node"},
	"transport/internal/httpapi":   {"transport/wire"},
	"transport/auth":               {},
	"transport/openapi":            {},
	"transport/limiter":            {"bucket", "transport/wire"},
	"transport/devcerts":           {},
	"transport/tlsfiles":           {},
	"transport/wire":               {},
	"transport/client":             {"transport/wire"},
	"transport/client/python":      {},
	"transport/worker":             {"bucket", "transport/client", "transport/wire"},
	"transport/sidecar":            {"transport/worker", "transport/client", "transport/wire", "transport/internal/httpapi", "transport/auth"},
	// transport/relay runs on workers' hosts: the wire format and the
	// token files, never the server (its upstream is an interface the
	// Go client implements).
	"transport/relay": {"transport/wire", "transport/auth"},

	"cmd/internal/httplite":    {},
	"cmd/internal/importguard": {},
	// cmd/leased-scale measures the leased path: agents (built from
	// cmd/permitd, not imported) and in-process workers.
	"cmd/leased-scale": {"fsm", "transport/client", "transport/worker"},
}

// rule returns the module packages pkg may import, and whether pkg has a
// rule: cmd/permitd may import anything; jepsen-lite its own packages and
// the public client only.
func rule(pkg string) (func(string) bool, bool) {
	switch {
	case pkg == "cmd/permitd":
		return func(string) bool { return true }, true
	case pkg == "jepsen-lite" || strings.HasPrefix(pkg, "jepsen-lite/"):
		return func(imp string) bool {
			return strings.HasPrefix(imp, "jepsen-lite/") || imp == "transport/client"
		}, true
	}
	list, ok := allowed[pkg]
	return func(imp string) bool { return slices.Contains(list, imp) }, ok
}

// violations returns one line per import of graph that the rules forbid,
// and per package without a rule.
func violations(graph map[string][]string) []string {
	var out []string
	for pkg, imps := range graph {
		ok, known := rule(pkg)
		if !known {
			out = append(out, pkg+": no rule: add it to allowed with its place in the graph")
			continue
		}
		for _, imp := range imps {
			if !ok(imp) {
				out = append(out, pkg+" imports "+imp+": not allowed")
			}
		}
	}
	slices.Sort(out)
	return out
}

// moduleGraph returns the module-internal imports of every package's
// non-test files, read from the source tree (go/build, no go tool).
func moduleGraph(t *testing.T, root string) map[string][]string {
	t.Helper()
	graph := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
			return filepath.SkipDir
		}
		if path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module (cmd/compare-redis)
			}
		}
		p, err := build.Default.ImportDir(path, 0)
		if err != nil {
			if _, none := err.(*build.NoGoError); none {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		var imps []string
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module) {
				imps = append(imps, strings.TrimPrefix(imp, module))
			}
		}
		graph[rel] = imps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return graph
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	return root
}

// TestImportGraph: every package's imports follow the allowed graph.
func TestImportGraph(t *testing.T) {
	graph := moduleGraph(t, moduleRoot(t))
	for _, want := range []string{"bucket", "fsm", "node", "transport", "transport/client", "transport/worker", "cmd/permitd"} {
		if _, ok := graph[want]; !ok {
			t.Fatalf("package %s not found: the walk is broken (found %d packages)", want, len(graph))
		}
	}
	for _, v := range violations(graph) {
		t.Error(v)
	}
}

// TestGuardCatchesAViolation: the rules reject the imports that broke the
// layering before (the client importing fsm, the worker the node), and a
// package nobody placed.
func TestGuardCatchesAViolation(t *testing.T) {
	got := violations(map[string][]string{
		"transport/client": {"transport/wire", "fsm"},
		"transport/worker": {"node"},
		"fsm":              {"node"},
		"jepsen-lite/x":    {"node"},
		"newpkg":           {},
	})
	want := []string{
		"fsm imports node: not allowed",
		"jepsen-lite/x imports node: not allowed",
		"newpkg: no rule: add it to allowed with its place in the graph",
		"transport/client imports fsm: not allowed",
		"transport/worker imports node: not allowed",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n got %q\nwant %q", got, want)
	}
}

// TestClientSideIsLight: the full dependency graphs (go list -deps) of
// the client-side packages contain neither the server (node, fsm) nor
// raft or bbolt; only the worker, which gossips, has memberlist.
func TestClientSideIsLight(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	heavy := []string{"github.com/hashicorp/raft", "go.etcd.io/bbolt", "github.com/boltdb/bolt", module + "node", module + "fsm"}
	for _, tc := range []struct {
		pkg        string
		memberlist bool
	}{
		{"transport/client", false},
		{"transport/wire", false},
		{"transport/worker", true},
		{"transport/sidecar", true},
		{"transport/relay", false},
	} {
		cmd := exec.Command(goTool, "list", "-deps", "-json=ImportPath", "./"+tc.pkg)
		cmd.Dir = moduleRoot(t)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", tc.pkg, err)
		}
		var deps []string
		dec := json.NewDecoder(strings.NewReader(string(out)))
		for dec.More() {
			var p struct{ ImportPath string }
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			deps = append(deps, p.ImportPath)
		}
		for _, d := range deps {
			for _, h := range heavy {
				if d == h || strings.HasPrefix(d, h+"/") {
					t.Errorf("%s depends on %s", tc.pkg, d)
				}
			}
			if !tc.memberlist && strings.HasPrefix(d, "github.com/hashicorp/memberlist") {
				t.Errorf("%s depends on %s", tc.pkg, d)
			}
		}
		if len(deps) < 2 {
			t.Errorf("%s: only %d dependencies listed", tc.pkg, len(deps))
		}
	}
}
