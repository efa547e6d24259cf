package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// pkgFile is the package clause of one Go file, and the comments above it.
type pkgFile struct {
	name string // the file's path, relative to the repository root
	test bool
	ast  *ast.File // parsed up to the package clause, comments included
	fset *token.FileSet
}

// docViolations returns what is wrong with the documentation of the
// package in directory dir (relative to the repository root), given its
// files: every file of a package with non-test files, or the test files of
// a test-only package.
func docViolations(dir string, files []pkgFile) []string {
	var docs []pkgFile
	var prod []pkgFile
	for _, f := range files {
		if !f.test {
			prod = append(prod, f)
		}
		if f.ast.Doc != nil {
			docs = append(docs, f)
		}
	}
	var out []string
	if len(prod) > 0 {
		// A package: its comment is in doc.go, and in no other file
		// (go doc would join them).
		docGo := slices.IndexFunc(prod, func(f pkgFile) bool { return path.Base(f.name) == "doc.go" })
		if docGo < 0 {
			return []string{dir + ": no doc.go: the package comment goes in doc.go"}
		}
		for _, f := range docs {
			if f.name != prod[docGo].name {
				out = append(out, f.name+": a package comment outside doc.go: go doc joins it to doc.go's; make it a plain comment or move it")
			}
		}
		docs = []pkgFile{prod[docGo]}
	} else if len(docs) != 1 {
		// A package of tests only (its documentation is its test file's).
		return []string{fmt.Sprintf("%s: %d package comments in a package of tests only: want one", dir, len(docs))}
	}
	f := docs[0]
	name := f.ast.Name.Name
	prefix := "Package " + name + " "
	if name == "main" {
		prefix = "Command " + path.Base(dir) + " "
	}
	text := ""
	if f.ast.Doc != nil {
		text = f.ast.Doc.Text()
	}
	if !strings.HasPrefix(text, prefix) {
		first, _, _ := strings.Cut(text, "\n")
		out = append(out, fmt.Sprintf("%s: go doc starts %q: want %q", f.name, first, prefix+"..."))
	}
	// Every comment above the package clause but build constraints is
	// the package comment: a detached block is cut off what go doc shows.
	pkgLine := f.fset.Position(f.ast.Package).Line
	for _, g := range f.ast.Comments {
		if g == f.ast.Doc || g.Pos() > f.ast.Package || constraint(g) {
			continue
		}
		start, end := f.fset.Position(g.Pos()).Line, f.fset.Position(g.End()).Line
		out = append(out, fmt.Sprintf("%s:%d: %d comment lines (%d-%d) are detached from the package clause at line %d by a blank line after them: go doc shows only the %d lines after it",
			f.name, end+1, end-start+1, start, end, pkgLine, lineCount(f, f.ast.Doc)))
	}
	return out
}

// constraint reports whether g is a build constraint (//go:build or
// // +build), which may stand above the package comment.
func constraint(g *ast.CommentGroup) bool {
	for _, c := range g.List {
		if !strings.HasPrefix(c.Text, "//go:build") && !strings.HasPrefix(c.Text, "// +build") {
			return false
		}
	}
	return true
}

// lineCount is the number of lines of g in f (0 for none).
func lineCount(f pkgFile, g *ast.CommentGroup) int {
	if g == nil {
		return 0
	}
	return f.fset.Position(g.End()).Line - f.fset.Position(g.Pos()).Line + 1
}

// repoPackages parses the package clauses of every Go file under root, by
// directory (nested modules included; testdata and dot or underscore
// directories skipped).
func repoPackages(t *testing.T, root string) map[string][]pkgFile {
	t.Helper()
	fset := token.NewFileSet()
	pkgs := map[string][]pkgFile{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if p != root && (strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		pkgs[path.Dir(rel)] = append(pkgs[path.Dir(rel)], pkgFile{name: rel, test: strings.HasSuffix(p, "_test.go"), ast: f, fset: fset})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// TestPackageDocs: every package of the repository has its whole comment
// in doc.go, starting "Package <name>" (docViolations).
func TestPackageDocs(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	pkgs := repoPackages(t, root)
	for _, want := range []string{"bucket", "fsm", "node", "transport/client", "cmd/permitd", "cmd/compare-redis", "jepsen-lite/runner"} {
		if _, ok := pkgs[want]; !ok {
			t.Fatalf("package %s not found: the walk is broken (found %d)", want, len(pkgs))
		}
	}
	for dir, files := range pkgs {
		for _, v := range docViolations(dir, files) {
			t.Error(v)
		}
	}
}
