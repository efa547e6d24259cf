package importguard

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// srcFile is one Go file of the module, parsed.
type srcFile struct {
	pkg  string // the package's directory, relative to the module root ("fsm")
	path string // the file's path, relative to the module root ("fsm/fsm.go")
	test bool   // a _test.go file (of the package or of its external test package)
	fset *token.FileSet
	ast  *ast.File
}

// imports returns the import paths of f.
func (f srcFile) imports() []string {
	var out []string
	for _, s := range f.ast.Imports {
		p, err := strconv.Unquote(s.Path.Value)
		if err == nil {
			out = append(out, p)
		}
	}
	return out
}

// moduleFiles parses every Go file of the module rooted at root: test files
// included, and files of every platform (build constraints are not
// evaluated, so a file built only on another OS is checked too). Nested
// modules (cmd/compare-redis), testdata and dot or underscore directories
// are skipped. Files of the directories full returns true for are parsed
// whole; the others up to their imports.
func moduleFiles(t *testing.T, root string, full func(pkg string) bool) []srcFile {
	t.Helper()
	var out []srcFile
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path == root {
				return nil
			}
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module (cmd/compare-redis)
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		pkg := filepath.ToSlash(filepath.Dir(rel))
		mode := parser.ImportsOnly
		if full(pkg) {
			mode = parser.SkipObjectResolution
		}
		f, err := parser.ParseFile(fset, path, nil, mode)
		if err != nil {
			return err
		}
		out = append(out, srcFile{pkg: pkg, path: rel, test: strings.HasSuffix(path, "_test.go"), fset: fset, ast: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// moduleRoot is the root of the module this test runs in.
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
