package importguard

import (
	"fmt"
	"go/ast"
	"path"
	"slices"
	"strings"
	"testing"
)

// pureImports lists, for each package under the determinism rules (bucket
// and fsm never read a clock, use randomness, do I/O or log), what its
// non-test files may import from outside the module (the module's own
// packages are allowed's business): the standard library's pure parts, and
// nothing that reaches the process's environment.
var pureImports = map[string][]string{
	"bucket": {
		"cmp", "encoding/binary", "errors", "fmt", "math", "math/big", "math/bits", "slices",
		// time for Duration and the Spec's units only: clock reads are
		// banned by bannedCalls.
		"time",
	},
	"fsm": {
		"bytes", "container/heap", "crypto/sha256", "encoding/binary", "errors", "fmt", "hash/crc32",
		"maps", "math", "math/bits", "slices", "strings", "unicode/utf8", "time",
		// io for the streams raft hands the FSM (Snapshot's sink,
		// Restore's reader): the FSM opens nothing itself.
		"io",
		// sync for the RWMutex that orders raft's Apply and Snapshot
		// calls with the read API; goroutines stay banned.
		"sync",
		// raft for the raft.FSM interface and its Log and SnapshotSink
		// types.
		"github.com/hashicorp/raft",
		// btree for the ordered index of the limits' names (names.go): a
		// data structure, deterministic.
		"github.com/google/btree",
	},
}

// pureTestImports are what the test files of bucket and fsm may import
// beyond pureImports: the testing packages and pure helpers (flag for the
// tests' own flags, such as the walk's seeds).
var pureTestImports = []string{"testing", "testing/quick", "flag", "reflect", "bytes", "strings", "strconv", "encoding/hex", "math/big"}

// bannedImports says why the packages the determinism rules keep out of
// bucket and fsm are kept out (a prefix ending in "/" covers its
// subpackages). pureImports and pureTestImports may list none of them.
var bannedImports = map[string]string{
	"math/rand":                     "randomness",
	"math/rand/v2":                  "randomness",
	"crypto/rand":                   "randomness",
	"hash/maphash":                  "randomness (a seed chosen per process)",
	"os":                            "I/O",
	"os/":                           "I/O",
	"io/ioutil":                     "I/O",
	"io/fs":                         "I/O",
	"path/filepath":                 "I/O",
	"net":                           "I/O",
	"net/":                          "I/O",
	"syscall":                       "I/O",
	"log":                           "logging",
	"log/":                          "logging",
	"github.com/hashicorp/go-hclog": "logging",
	"unsafe":                        "memory layout, which is no part of the replicated state",
	"runtime":                       "the runtime's state (goroutines, memory, scheduling), which differs between replicas",
	"runtime/":                      "the runtime's state (goroutines, memory, scheduling), which differs between replicas",
}

// bannedCalls are the functions and variables of allowed packages that
// bucket and fsm must not use (call or take as values), with why.
var bannedCalls = map[string]map[string]string{
	"time": {
		"Now": "reads the clock", "Since": "reads the clock", "Until": "reads the clock",
		"Sleep": "waits on the clock", "After": "waits on the clock", "AfterFunc": "waits on the clock",
		"Tick": "waits on the clock", "NewTimer": "waits on the clock", "NewTicker": "waits on the clock",
		"Local": "reads the process's time zone", "LoadLocation": "reads the time zone database (I/O)",
	},
	"fmt": {
		"Print": "prints (I/O)", "Printf": "prints (I/O)", "Println": "prints (I/O)",
		"Scan": "reads standard input", "Scanf": "reads standard input", "Scanln": "reads standard input",
	},
}

// pureException lets the test files matching file (a path.Match pattern
// relative to the module root) break one rule (a finding's rule: "import
// math/rand/v2", "go statement", "time.Now"), for the reason why. The
// code under test never gets an exception. An exception nothing uses any
// more fails the test.
type pureException struct{ file, rule, why string }

var pureExceptions = []pureException{
	{"bucket/*_test.go", "import math/rand/v2", seededInputs},
	{"fsm/*_test.go", "import math/rand/v2", seededInputs},
	{"fsm/shares_test.go", "import math/rand", "testing/quick hands its Generate methods a *math/rand.Rand"},
	{"fsm/memory_bench_test.go", "import runtime", "the memory benchmark reads the heap after a GC (runtime.ReadMemStats)"},
	{"fsm/snapshot_test.go", "go statement", concurrentReads},
	// The scale benchmarks time Snapshot and sample the heap's peak
	// during Restore from a goroutine.
	{"fsm/scale_bench_test.go", "import runtime", scaleBench},
	{"fsm/scale_bench_test.go", "import runtime/metrics", scaleBench},
	{"fsm/scale_bench_test.go", "import sync/atomic", scaleBench},
	{"fsm/scale_bench_test.go", "go statement", scaleBench},
	{"fsm/scale_bench_test.go", "time.NewTicker", scaleBench},
	{"fsm/scale_bench_test.go", "time.Now", scaleBench},
	{"fsm/scale_bench_test.go", "time.Since", scaleBench},
}

const (
	seededInputs    = "seeded generators choose the tests' inputs; the code under test receives values, never a source"
	scaleBench      = "the scale benchmarks time Snapshot (the lock Apply waits on) and sample the heap's peak during Restore"
	concurrentReads = "the read API raced against Apply and Snapshot under -race (raft calls them from other goroutines)"
)

// finding is one break of the determinism rules.
type finding struct {
	pos  string // file:line
	file string // the file's path in the module
	test bool   // in a test file
	rule string // what was used: "import os", "time.Now", "go statement"
	why  string
}

// pureFindings returns what the files of the pure packages use that the
// determinism rules ban, before exceptions.
func pureFindings(files []srcFile) []finding {
	declared := map[string]map[string]bool{} // package-level names, per package
	for _, f := range files {
		if _, pure := pureImports[f.pkg]; !pure {
			continue
		}
		if declared[f.pkg] == nil {
			declared[f.pkg] = map[string]bool{}
		}
		for _, d := range f.ast.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					declared[f.pkg][d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declared[f.pkg][n.Name] = true
						}
					case *ast.TypeSpec:
						declared[f.pkg][s.Name.Name] = true
					}
				}
			}
		}
	}
	var out []finding
	for _, f := range files {
		allowedHere, pure := pureImports[f.pkg]
		if !pure {
			continue
		}
		add := func(n ast.Node, rule, why string) {
			p := f.fset.Position(n.Pos())
			out = append(out, finding{pos: fmt.Sprintf("%s:%d", f.path, p.Line), file: f.path, test: f.test, rule: rule, why: why})
		}
		names := map[string]string{} // the file's local name of each import → its path
		for _, s := range f.ast.Imports {
			imp := strings.Trim(s.Path.Value, `"`)
			local := path.Base(imp)
			if strings.HasPrefix(imp, "math/rand/") {
				local = "rand"
			}
			if s.Name != nil {
				local = s.Name.Name
			}
			names[local] = imp
			switch {
			case strings.HasPrefix(imp, module):
			case slices.Contains(allowedHere, imp), f.test && slices.Contains(pureTestImports, imp):
			default:
				why := bannedWhy(imp)
				if why == "" {
					why = "not in pureImports"
				}
				add(s, "import "+imp, why)
			}
			if local == "." {
				add(s, "dot import "+imp, "hides which package a name comes from")
			}
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				add(n, "go statement", "starts a goroutine: its scheduling differs between replicas")
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok {
					imp := names[id.Name]
					if why, banned := bannedCalls[imp][n.Sel.Name]; banned {
						add(n, imp+"."+n.Sel.Name, why)
					}
				}
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && (id.Name == "print" || id.Name == "println") && !declared[f.pkg][id.Name] {
					add(n, id.Name, "prints to standard error (I/O)")
				}
			}
			return true
		})
	}
	return out
}

// bannedWhy is why imp is banned from the pure packages, or "".
func bannedWhy(imp string) string {
	if why, ok := bannedImports[imp]; ok {
		return why
	}
	for prefix, why := range bannedImports {
		if strings.HasSuffix(prefix, "/") && strings.HasPrefix(imp, prefix) {
			return why
		}
	}
	return ""
}

// pureViolations returns one line per finding in files that no exception
// covers, in the order of files, and per exception that covers nothing.
func pureViolations(files []srcFile, exceptions []pureException) []string {
	used := make([]bool, len(exceptions))
	var out []string
	for _, f := range pureFindings(files) {
		i := slices.IndexFunc(exceptions, func(e pureException) bool {
			match, _ := path.Match(e.file, f.file)
			return f.test && match && e.rule == f.rule
		})
		if i >= 0 {
			used[i] = true
			continue
		}
		out = append(out, f.pos+": "+f.rule+": "+f.why+" (bucket and fsm never read a clock, use randomness, do I/O or log)")
	}
	for i, e := range exceptions {
		if !used[i] {
			out = append(out, "pureExceptions: "+e.file+" "+e.rule+": nothing uses it any more: remove the exception")
		}
	}
	return out
}

// pureTableViolations checks that the allowlists admit nothing the rules
// ban.
func pureTableViolations(pureImports map[string][]string, pureTestImports []string) []string {
	var out []string
	for pkg, list := range pureImports {
		for _, imp := range list {
			if why := bannedWhy(imp); why != "" {
				out = append(out, "pureImports["+pkg+"] lists "+imp+": "+why)
			}
		}
	}
	for _, imp := range pureTestImports {
		if why := bannedWhy(imp); why != "" {
			out = append(out, "pureTestImports lists "+imp+": "+why+" (a test file needs an exception with its reason)")
		}
	}
	slices.Sort(out)
	return out
}

// TestDeterministicPackages: bucket's and fsm's files, test files
// included, read no clock, use no randomness, do no I/O, do not log and
// start no goroutine: they import only pureImports (test files also
// pureTestImports), use none of bannedCalls and have no go statement,
// except where pureExceptions says why.
func TestDeterministicPackages(t *testing.T) {
	files := moduleFiles(t, moduleRoot(t), func(pkg string) bool { _, pure := pureImports[pkg]; return pure })
	n := map[string]int{}
	for _, f := range files {
		n[f.pkg]++
	}
	for pkg := range pureImports {
		if n[pkg] < 5 {
			t.Fatalf("package %s: only %d files found: the walk is broken", pkg, n[pkg])
		}
	}
	for _, v := range pureViolations(files, pureExceptions) {
		t.Error(v)
	}
	for _, v := range pureTableViolations(pureImports, pureTestImports) {
		t.Error(v)
	}
}
