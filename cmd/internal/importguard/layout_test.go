package importguard

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// topLevel is the repository's top level as the design fixes it: every
// package lives inside one of these folders, so a new folder beside them
// (an internal/, a pkg/) is a design change, not a refactoring.
var topLevel = []string{
	"LICENSE", "README.md", "bucket", "cmd", "fsm", "go.mod", "go.sum",
	"jepsen-lite", "node", "transport",
}

// TestTopLevelLayout fails when the module root holds a Go file, or a
// folder with Go files in it, that the design does not name (dotfiles
// such as .ci are the build's; other files and folders, such as a binary
// built in place or a walkthrough's data directory, are not packages).
func TestTopLevelLayout(t *testing.T) {
	entries, err := os.ReadDir(moduleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || slices.Contains(topLevel, name) ||
			!e.IsDir() && !strings.HasSuffix(name, ".go") ||
			e.IsDir() && !holdsGo(t, filepath.Join(moduleRoot(t), name)) {
			continue
		}
		t.Errorf("top level holds %q; the design fixes it to %v (and dotfiles): put packages inside those folders", name, topLevel)
	}
}

// holdsGo reports whether the folder dir holds a Go file at any depth.
func holdsGo(t *testing.T, dir string) bool {
	found := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
