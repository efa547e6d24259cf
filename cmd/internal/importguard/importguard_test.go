package importguard

import (
	"slices"
	"strings"
	"testing"
)

const module = "github.com/permitd/permitd/"

// allowed lists, for each package of the module (by its path in the
// module), the module packages its files may import, test files
// included. Every package has its own explicit list (no wildcards): a
// package missing here fails the test, so a new package states its place.
var allowed = map[string][]string{
	"bucket":        {},
	"fsm":           {"bucket"},
	"node":          {"bucket", "fsm", "transport/wire", "transport/api", "node/lazyctx"},
	"node/faultnet": {},
	// node/lazyctx is the lazy deadline node and transport/server
	// both bound calls with: the standard library only.
	"node/lazyctx": {},

	// transport/server is the register's edge: the only package that
	// imports both node and the protocols.
	"transport/server":           {"bucket", "fsm", "node", "transport/wire", "transport/api", "transport/auth", "transport/openapi", "node/lazyctx"},
	"transport/server/fakestore": {"bucket", "fsm", "node", "transport/api"},
	// transport/api and transport/wire are the leaves both sides share.
	"transport/api":           {"transport/wire"},
	"transport/auth":          {},
	"transport/openapi":       {},
	"transport/limiter":       {"bucket", "transport/wire"},
	"transport/devcerts":      {},
	"transport/tlsfiles":      {},
	"transport/wire":          {},
	"transport/client":        {"transport/wire", "transport/api"},
	"transport/client/python": {},
	"transport/worker":        {"bucket", "transport/client", "transport/wire"},
	"transport/sidecar":       {"transport/worker", "transport/client", "transport/wire", "transport/api", "transport/auth"},
	// transport/relay runs on workers' hosts: the wire format and the
	// token files, never the server (its upstream is an interface the
	// Go client implements).
	"transport/relay": {"transport/wire", "transport/auth"},

	// cmd/permitd is the CLI: the agent runs node and its edge, the
	// worker and relay commands the client side; the demo, bench and the
	// test hooks are packages of their own below it.
	"cmd/permitd": {
		"fsm", "node", "node/faultnet",
		"transport/server", "transport/api", "transport/auth", "transport/devcerts", "transport/tlsfiles", "transport/wire",
		"transport/client", "transport/worker", "transport/sidecar", "transport/relay",
		"cmd/internal/testhooks", "cmd/internal/demo", "cmd/internal/bench",
	},
	// cmd/permitd's parts in packages of their own: the binary's
	// testing-only hooks on an agent (its node and raft fault layer) and
	// on a worker (between it and the register, and its sidecar); the
	// demo, a whole cluster in one process with in-process workers and
	// clients; bench, a load generator over the API (HTTP, the binary
	// protocol, the Go client; node for its default bound only).
	"cmd/internal/testhooks": {"node", "node/faultnet", "transport/client", "transport/worker", "transport/sidecar"},
	"cmd/internal/demo": {"bucket", "fsm", "node", "transport/server", "transport/auth", "transport/client", "transport/devcerts",
		"transport/tlsfiles", "transport/worker", "cmd/internal/testhooks"},
	"cmd/internal/bench":    {"node", "transport/client", "transport/wire", "cmd/internal/httplite"},
	"cmd/internal/httplite": {},
	// cmd/internal/cluster starts the measurement programs' agents.
	"cmd/internal/cluster":     {"transport/client"},
	"cmd/internal/importguard": {},
	"cmd/internal/doccheck":    {},
	"cmd/internal/mddoc":       {},
	// cmd/permitd/packaging: tests of the release build, image, unit and
	// Debian package, which run the scripts and tools beside them.
	"cmd/permitd/packaging": {},
	// cmd/leased-scale measures the leased path: agents (built from
	// cmd/permitd, not imported) and in-process workers.
	"cmd/leased-scale": {"fsm", "transport/client", "transport/worker", "cmd/internal/cluster"},
	// cmd/keys-scale measures templated keys at scale on the same agents.
	"cmd/keys-scale": {"transport/client", "cmd/internal/cluster"},

	// jepsen-lite uses permitd only through the Go client and the
	// binaries (layerViolations checks these lists keep to that).
	"jepsen-lite/bound":                    {},
	"jepsen-lite/history":                  {},
	"jepsen-lite/fakeapi":                  {"jepsen-lite/bound"},
	"jepsen-lite/checker":                  {"jepsen-lite/bound", "jepsen-lite/fakeapi", "jepsen-lite/history"},
	"jepsen-lite/runner/internal/wait":     {},
	"jepsen-lite/runner/internal/httpjson": {},
	"jepsen-lite/runner/internal/secure":   {"jepsen-lite/runner/internal/httpjson", "transport/client"},
	"jepsen-lite/runner/process":           {"jepsen-lite/runner/internal/wait"},
	"jepsen-lite/runner/netns":             {"jepsen-lite/runner/internal/wait"},
	"jepsen-lite/runner/cluster": {
		"jepsen-lite/runner/internal/httpjson", "jepsen-lite/runner/internal/secure", "jepsen-lite/runner/internal/wait",
		"jepsen-lite/runner/netns", "jepsen-lite/runner/process", "transport/client",
	},
	"jepsen-lite/runner/nemesis": {
		"jepsen-lite/history", "jepsen-lite/runner/cluster", "jepsen-lite/runner/internal/wait",
		"jepsen-lite/runner/process", "transport/client",
	},
	"jepsen-lite/runner/workload": {
		"jepsen-lite/checker", "jepsen-lite/fakeapi", "jepsen-lite/history", "jepsen-lite/runner/internal/httpjson",
		"jepsen-lite/runner/internal/secure", "jepsen-lite/runner/internal/wait", "jepsen-lite/runner/process", "transport/client",
	},
	"jepsen-lite/runner": {
		"jepsen-lite/bound", "jepsen-lite/checker", "jepsen-lite/fakeapi", "jepsen-lite/history",
		"jepsen-lite/runner/cluster", "jepsen-lite/runner/internal/secure", "jepsen-lite/runner/internal/wait",
		"jepsen-lite/runner/nemesis", "jepsen-lite/runner/netns", "jepsen-lite/runner/workload", "transport/client",
	},
	"jepsen-lite/sweep":      {"jepsen-lite/runner", "jepsen-lite/checker"},
	"jepsen-lite/cmd/jepsen": {"jepsen-lite/runner", "jepsen-lite/sweep"},
}

// testAllowed lists the module packages a package's tests (its _test.go
// files, internal and external test package) may import beyond allowed,
// each with its reason. These are exceptions: end-to-end tests of a
// client-side package start a real server, and tests borrow the test
// certificates and fault-injecting networks. An exception no test needs
// any more fails the test, so the list stays as small as the tests.
var testAllowed = map[string]map[string]string{
	"cmd/permitd": {
		"cmd/internal/mddoc": mddoc,
	},
	"cmd/internal/doccheck": {
		"cmd/internal/mddoc": mddoc,
	},
	"node": {
		"node/faultnet":      faultnet,
		"transport/devcerts": devcerts,
	},
	"transport/server": {
		"node/faultnet":              faultnet,
		"transport/client":           "the server edge is tested through the Go client it serves (failover, back-off, the binary protocol)",
		"transport/server/fakestore": fakestore,
	},
	"transport/client": {
		"bucket":                     clientE2E,
		"fsm":                        clientE2E,
		"transport/server":           clientE2E,
		"transport/auth":             clientE2E,
		"transport/server/fakestore": clientE2E,
	},
	"transport/openapi": {
		"fsm":                        openapiE2E,
		"node":                       openapiE2E,
		"node/faultnet":              openapiE2E,
		"transport/server":           openapiE2E,
		"transport/auth":             openapiE2E,
		"transport/server/fakestore": openapiE2E,
		"transport/api":              openapiE2E,
	},
	"transport/relay": {
		"transport/client":   "the relay's upstream in its tests is the real Go client",
		"transport/devcerts": devcerts,
		"transport/tlsfiles": "the relay's TLS tests load the certificate files an operator would name",
	},
	"transport/tlsfiles": {
		"transport/devcerts": devcerts,
	},
	"transport/worker": {
		"fsm":                        workerE2E,
		"node":                       workerE2E,
		"node/faultnet":              workerE2E,
		"transport/server":           workerE2E,
		"transport/server/fakestore": workerE2E,
	},
}

// Reasons shared by several test-only exceptions.
const (
	faultnet   = "in-process clusters on the fault-injecting network"
	devcerts   = "test certificates for the TLS paths"
	fakestore  = "the real fsm register on a manual clock behind the handler"
	clientE2E  = "end-to-end tests: the client against a real in-process register (fakestore, or node clusters for failover)"
	openapiE2E = "the conformance test drives every operation against a real in-process cluster behind the token middleware"
	mddoc      = "the doc tests read the repository's Markdown (runnable blocks, links, flags)"
	workerE2E  = "fleets of workers against the in-process register and against a real 3-node register"
)

// pkgImports are the module packages one package imports, by their paths
// in the module: those of its non-test files, and those of its test files.
type pkgImports struct {
	prod, test []string
}

// violations returns one line per import of graph that the rules (the
// tables allowed and testAllowed) forbid, per package without a rule, and
// per test-only exception no test uses.
func violations(graph map[string]pkgImports, allowed map[string][]string, testAllowed map[string]map[string]string) []string {
	var out []string
	for pkg, imps := range graph {
		list, known := allowed[pkg]
		if !known {
			out = append(out, pkg+": no rule: add it to allowed with its place in the graph")
			continue
		}
		for _, imp := range imps.prod {
			if !slices.Contains(list, imp) {
				out = append(out, pkg+" imports "+imp+": not allowed")
			}
		}
		for _, imp := range imps.test {
			if _, exception := testAllowed[pkg][imp]; !slices.Contains(list, imp) && !exception {
				out = append(out, pkg+"'s tests import "+imp+": not allowed (move the test, or add an exception with its reason to testAllowed)")
			}
		}
	}
	for pkg, exceptions := range testAllowed {
		for imp := range exceptions {
			if !slices.Contains(graph[pkg].test, imp) {
				out = append(out, "testAllowed["+pkg+"]["+imp+"]: no test imports it any more: remove the exception")
			}
		}
	}
	slices.Sort(out)
	return out
}

// moduleGraph returns the module-internal imports of every package, read
// from its files (all of them: test files and every platform's).
func moduleGraph(files []srcFile) map[string]pkgImports {
	graph := map[string]pkgImports{}
	for _, f := range files {
		g := graph[f.pkg]
		for _, imp := range f.imports() {
			rel, ok := strings.CutPrefix(imp, module)
			if !ok || rel == f.pkg { // not the module's; an external test package's own
				continue
			}
			if f.test && !slices.Contains(g.test, rel) {
				g.test = append(g.test, rel)
			} else if !f.test && !slices.Contains(g.prod, rel) {
				g.prod = append(g.prod, rel)
			}
		}
		graph[f.pkg] = g
	}
	return graph
}

// serverRank orders the server side's layers, bottom first: imports flow
// cmd → transport/server → node → fsm → bucket, so a package of the chain may
// import only packages of lower rank. fakestore, the register behind the
// handler's tests, sits beside the handler.
var serverRank = map[string]int{"bucket": 0, "fsm": 1, "node": 2, "transport/server": 3, "transport/server/fakestore": 3, "cmd/permitd": 4}

// clientSide are the packages that run in users' processes and on
// workers' hosts (transport/api and transport/wire, the leaves both sides
// share, among them); serverOnly the packages they never import (the
// client must not link the register).
var (
	clientSide = []string{"transport/client", "transport/worker", "transport/sidecar", "transport/relay", "transport/limiter", "transport/wire", "transport/api"}
	serverOnly = []string{"node", "fsm", "transport/server", "transport/server/fakestore"}
)

// leaves import nothing of permitd: bucket is the pure math, and
// transport/wire the one format both sides share.
var leaves = []string{"bucket", "transport/wire"}

// layerViolations checks the tables themselves against the layering the
// README draws, so that a line added to allowed or testAllowed cannot
// quietly contradict it: the server chain's imports point down, the client
// side never imports the server, the leaves import nothing of permitd, and
// jepsen-lite (tests included) uses permitd only through the Go client.
// Test-only exceptions may cross the first two, never the last two.
func layerViolations(allowed map[string][]string, testAllowed map[string]map[string]string) []string {
	var out []string
	check := func(table, pkg, imp string) {
		switch {
		case slices.Contains(leaves, pkg):
			out = append(out, table+"["+pkg+"] lists "+imp+": "+pkg+" imports nothing of permitd")
		case strings.HasPrefix(pkg, "jepsen-lite/") && !strings.HasPrefix(imp, "jepsen-lite/") && imp != "transport/client":
			out = append(out, table+"["+pkg+"] lists "+imp+": jepsen-lite uses permitd only through transport/client and the binaries")
		case table != "allowed":
		case hasRank(pkg) && hasRank(imp) && serverRank[imp] >= serverRank[pkg]:
			out = append(out, table+"["+pkg+"] lists "+imp+": imports flow cmd → transport/server → node → fsm → bucket")
		case slices.Contains(clientSide, pkg) && slices.Contains(serverOnly, imp):
			out = append(out, table+"["+pkg+"] lists "+imp+": the client side never imports the server")
		}
	}
	for pkg, imps := range allowed {
		for _, imp := range imps {
			check("allowed", pkg, imp)
		}
	}
	for pkg, imps := range testAllowed {
		for imp := range imps {
			check("testAllowed", pkg, imp)
		}
	}
	slices.Sort(out)
	return out
}

func hasRank(pkg string) bool { _, ok := serverRank[pkg]; return ok }

// TestImportGraph: every package's imports, test files included, follow
// the allowed graph and its test-only exceptions.
func TestImportGraph(t *testing.T) {
	graph := moduleGraph(moduleFiles(t, moduleRoot(t), func(string) bool { return false }))
	for _, want := range []string{"bucket", "fsm", "node", "transport/server", "transport/client", "transport/worker", "cmd/permitd", "jepsen-lite/runner"} {
		if _, ok := graph[want]; !ok {
			t.Fatalf("package %s not found: the walk is broken (found %d packages)", want, len(graph))
		}
	}
	if len(graph["transport/client"].test) == 0 {
		t.Fatal("transport/client's tests import nothing of the module: the walk skips test files")
	}
	for _, v := range violations(graph, allowed, testAllowed) {
		t.Error(v)
	}
}

// TestTablesKeepTheLayers: allowed and testAllowed agree with the
// README's layering (layerViolations).
func TestTablesKeepTheLayers(t *testing.T) {
	for _, v := range layerViolations(allowed, testAllowed) {
		t.Error(v)
	}
}
