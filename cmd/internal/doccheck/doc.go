// Package doccheck holds no code, only the test that every package's
// documentation is what go doc shows in full: one package comment, in
// the package's doc.go, starting "Package <name>" ("Command <name>" for a
// program), and attached to the package clause as a whole (a blank line
// between two comment blocks above the clause cuts go doc's comment at
// the blank line, silently). It reads every package of the repository,
// cmd/compare-redis's module included.
package doccheck
