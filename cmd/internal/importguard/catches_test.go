package importguard

import (
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
)

// TestGuardCatchesAViolation: each rule of the guard rejects what it is
// there to reject, on made-up packages and files, so that a rule that
// silently stopped checking would fail here.
func TestGuardCatchesAViolation(t *testing.T) {
	t.Run("imports", func(t *testing.T) {
		// The real allowed table; the imports that broke the layering
		// before (the client importing fsm, the worker the node), a test
		// file's import without an exception, a stale exception, and a
		// package nobody placed.
		got := violations(map[string]pkgImports{
			"transport/client":   {prod: []string{"transport/wire", "fsm"}, test: []string{"node"}},
			"transport/worker":   {prod: []string{"node"}},
			"transport/limiter":  {test: []string{"transport/client"}},
			"fsm":                {prod: []string{"node"}},
			"jepsen-lite/runner": {prod: []string{"node"}},
			"cmd/permitd":        {prod: []string{"jepsen-lite/runner"}},
			"newpkg":             {},
		}, allowed, map[string]map[string]string{"transport/client": {"node": "end-to-end", "bucket": "stale"}})
		want := []string{
			"cmd/permitd imports jepsen-lite/runner: not allowed",
			"fsm imports node: not allowed",
			"jepsen-lite/runner imports node: not allowed",
			"newpkg: no rule: add it to allowed with its place in the graph",
			"testAllowed[transport/client][bucket]: no test imports it any more: remove the exception",
			"transport/client imports fsm: not allowed",
			"transport/limiter's tests import transport/client: not allowed (move the test, or add an exception with its reason to testAllowed)",
			"transport/worker imports node: not allowed",
		}
		sameLines(t, "violations", got, want)
	})

	t.Run("layers", func(t *testing.T) {
		// Tables that contradict the README: an upward import in the
		// server chain, the client importing the server, a leaf
		// importing permitd, jepsen-lite importing the server (even
		// only in its tests).
		got := layerViolations(map[string][]string{
			"fsm":                {"bucket", "node"},
			"node":               {"transport/server/fakestore"},
			"transport/client":   {"transport/wire", "fsm"},
			"transport/wire":     {"bucket"},
			"jepsen-lite/runner": {"transport/client", "jepsen-lite/history", "transport/wire"},
		}, map[string]map[string]string{
			"transport/client":  {"node": "end-to-end"},
			"jepsen-lite/sweep": {"fsm": "no"},
		})
		want := []string{
			"allowed[fsm] lists node: imports flow cmd → transport/server → node → fsm → bucket",
			"allowed[jepsen-lite/runner] lists transport/wire: jepsen-lite uses permitd only through transport/client and the binaries",
			"allowed[node] lists transport/server/fakestore: imports flow cmd → transport/server → node → fsm → bucket",
			"allowed[transport/client] lists fsm: the client side never imports the server",
			"allowed[transport/wire] lists bucket: transport/wire imports nothing of permitd",
			"testAllowed[jepsen-lite/sweep] lists fsm: jepsen-lite uses permitd only through transport/client and the binaries",
		}
		sameLines(t, "layerViolations", got, want)
	})

	t.Run("determinism", func(t *testing.T) {
		// A bucket file that reads the clock, uses randomness, does I/O,
		// logs and starts a goroutine (under any local names); a test
		// file whose randomness has an exception and whose goroutine has
		// not; a file of another package that may do all of it.
		files := []srcFile{
			parseSrc(t, "bucket/bad.go", `package bucket
import (
	"fmt"
	"log"
	"log/slog"
	mr "math/rand"
	"math/rand/v2"
	crand "crypto/rand"
	"net/http"
	"os"
	clock "time"
	"unsafe"
)
var now = clock.Now
func f() {
	_ = clock.Since(clock.Time{})
	<-clock.After(1)
	fmt.Println(mr.Int(), rand.Int(), crand.Reader, http.DefaultClient, unsafe.Sizeof(0))
	_ = fmt.Sprintf("%d", 1) // pure
	_ = clock.Duration(1)    // pure
	log.Print(os.Args)
	slog.Info("x")
	go f()
	println()
}
`),
			parseSrc(t, "bucket/bad_test.go", `package bucket
import (
	"math/rand/v2"
	"testing"
)
func TestX(t *testing.T) { go rand.Int() }
`),
			parseSrc(t, "node/free.go", `package node
import ("os"; "time")
func g() { go os.Exit(int(time.Now().Unix())) }
`),
		}
		got := pureViolations(files, []pureException{
			{"bucket/*_test.go", "import math/rand/v2", "inputs"},
			{"bucket/bad.go", "go statement", "exceptions never cover the code under test"},
			{"fsm/*_test.go", "time.Now", "stale"},
		})
		const rules = " (bucket and fsm never read a clock, use randomness, do I/O or log)"
		want := []string{
			"bucket/bad.go:4: import log: logging",
			"bucket/bad.go:5: import log/slog: logging",
			"bucket/bad.go:6: import math/rand: randomness",
			"bucket/bad.go:7: import math/rand/v2: randomness",
			"bucket/bad.go:8: import crypto/rand: randomness",
			"bucket/bad.go:9: import net/http: I/O",
			"bucket/bad.go:10: import os: I/O",
			"bucket/bad.go:12: import unsafe: memory layout, which is no part of the replicated state",
			"bucket/bad.go:14: time.Now: reads the clock",
			"bucket/bad.go:16: time.Since: reads the clock",
			"bucket/bad.go:17: time.After: waits on the clock",
			"bucket/bad.go:18: fmt.Println: prints (I/O)",
			"bucket/bad.go:23: go statement: starts a goroutine: its scheduling differs between replicas",
			"bucket/bad.go:24: println: prints to standard error (I/O)",
			"bucket/bad_test.go:6: go statement: starts a goroutine: its scheduling differs between replicas",
		}
		for i := range want {
			want[i] += rules
		}
		want = append(want,
			"pureExceptions: bucket/bad.go go statement: nothing uses it any more: remove the exception",
			"pureExceptions: fsm/*_test.go time.Now: nothing uses it any more: remove the exception")
		sameLines(t, "pureViolations", got, want)
		// The allowlists themselves may not admit what the rules ban.
		got = pureTableViolations(map[string][]string{"fsm": {"bytes", "os"}}, []string{"testing", "math/rand/v2"})
		want = []string{
			"pureImports[fsm] lists os: I/O",
			"pureTestImports lists math/rand/v2: randomness (a test file needs an exception with its reason)",
		}
		sameLines(t, "pureTableViolations", got, want)
	})

	t.Run("dependencies", func(t *testing.T) {
		deps := []string{"fmt", "github.com/hashicorp/raft", "github.com/hashicorp/memberlist", module + "transport/wire", module + "fsm"}
		got := heavyDeps("transport/client", deps, false)
		want := []string{
			"transport/client depends on github.com/hashicorp/raft",
			"transport/client depends on github.com/hashicorp/memberlist",
			"transport/client depends on " + module + "fsm",
		}
		sameLines(t, "heavyDeps", got, want)
		if got := heavyDeps("transport/worker", deps[2:4], true); len(got) != 0 {
			t.Errorf("heavyDeps of the worker, which may gossip: %q", got)
		}
	})
}

// sameLines reports the difference between the lines a rule gave and
// the lines it should have given.
func sameLines(t *testing.T, rule string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %s\nwant %s", rule, strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

// parseSrc parses src as the file at path (relative to the module root).
func parseSrc(t *testing.T, path, src string) srcFile {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	pkg := path[:strings.LastIndex(path, "/")]
	return srcFile{pkg: pkg, path: path, test: strings.HasSuffix(path, "_test.go"), fset: fset, ast: f}
}
