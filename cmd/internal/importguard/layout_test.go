package importguard

import (
	"os"
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

// TestTopLevelLayout fails when the module root holds a folder or a Go
// file the design does not name (dotfiles such as .ci are the build's;
// other files, such as a binary built in place, are not packages).
func TestTopLevelLayout(t *testing.T) {
	entries, err := os.ReadDir(moduleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || slices.Contains(topLevel, name) ||
			!e.IsDir() && !strings.HasSuffix(name, ".go") {
			continue
		}
		t.Errorf("top level holds %q; the design fixes it to %v (and dotfiles): put packages inside those folders", name, topLevel)
	}
}
