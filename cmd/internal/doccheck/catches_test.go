package doccheck

import (
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
)

// TestDocCheckCatchesAViolation: docViolations rejects a comment cut by a
// blank line, a package without doc.go, a comment that does not start
// with the package's name, a second package comment, and a package of
// tests only without its comment; it accepts a program's "Command".
func TestDocCheckCatchesAViolation(t *testing.T) {
	fset := token.NewFileSet()
	file := func(name, src string) pkgFile {
		f, err := parser.ParseFile(fset, name, src, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		return pkgFile{name: name, test: strings.HasSuffix(name, "_test.go"), ast: f, fset: fset}
	}
	cases := []struct {
		dir   string
		files []pkgFile
		want  []string
	}{
		{"cut", []pkgFile{file("cut/doc.go", "// Package cut is cut.\n//\n// # Part one\n\n// # Part two\npackage cut\n")}, []string{
			`cut/doc.go: go doc starts "# Part two": want "Package cut ..."`,
			"cut/doc.go:4: 3 comment lines (1-3) are detached from the package clause at line 6 by a blank line after them: go doc shows only the 1 lines after it",
		}},
		{"nodoc", []pkgFile{file("nodoc/x.go", "// Package nodoc is documented in the wrong file.\npackage nodoc\n")}, []string{
			"nodoc: no doc.go: the package comment goes in doc.go",
		}},
		{"named", []pkgFile{
			file("named/doc.go", "// This package is named.\npackage named\n"),
			file("named/x.go", "// Package named again.\npackage named\n"),
		}, []string{
			"named/x.go: a package comment outside doc.go: go doc joins it to doc.go's; make it a plain comment or move it",
			`named/doc.go: go doc starts "This package is named.": want "Package named ..."`,
		}},
		{"cmd/tool", []pkgFile{file("cmd/tool/doc.go", "//go:build linux\n\n// Command tool is a program.\npackage main\n")}, nil},
		{"cmd/other", []pkgFile{file("cmd/other/doc.go", "// Package main is a program.\npackage main\n")}, []string{
			`cmd/other/doc.go: go doc starts "Package main is a program.": want "Command other ..."`,
		}},
		{"testsonly", []pkgFile{file("testsonly/a_test.go", "package testsonly_test\n")}, []string{
			"testsonly: 0 package comments in a package of tests only: want one",
		}},
	}
	for _, tc := range cases {
		if got := docViolations(tc.dir, tc.files); !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.dir, got, tc.want)
		}
	}
}
