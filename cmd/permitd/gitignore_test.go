package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/permitd/permitd/cmd/internal/mddoc"
)

// readmeWrites are the commands of a shell block that write a file or a
// folder into the directory they run in: the group is the path.
var readmeWrites = []struct {
	re  *regexp.Regexp
	dir bool
}{
	{regexp.MustCompile(`\bgo build -o (\S+)`), false},
	{regexp.MustCompile(`\bmkdir (?:-p )?(\S+)`), true},
	{regexp.MustCompile(`\s--out (\S+)`), true},
	{regexp.MustCompile(`\bsnapshot save (\S+)`), false},
	{regexp.MustCompile(`\d?>>?\s*([^\s&|;)]+)`), false},
}

// docWrittenPaths returns the relative paths the documentation's shell
// blocks write, run from the repository root (a block stops counting at
// its first cd, after which its paths are elsewhere).
func docWrittenPaths(t *testing.T) map[string]bool {
	t.Helper()
	docs, err := mddoc.Load(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	var bodies []string
	for _, d := range docs {
		for _, b := range d.Blocks {
			if b.Lang == "sh" || b.Lang == "bash" || b.Lang == "shell" {
				bodies = append(bodies, b.Body)
			}
		}
	}
	for _, body := range bodies {
	lines:
		for _, line := range strings.Split(body, "\n") {
			for _, seg := range regexp.MustCompile(`&&|;|\|\|`).Split(line, -1) {
				if strings.HasPrefix(strings.TrimSpace(seg), "cd ") {
					break lines
				}
				for _, w := range readmeWrites {
					for _, m := range w.re.FindAllStringSubmatch(seg, -1) {
						p := strings.Trim(m[1], `"'`)
						if p == "" || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") || strings.HasPrefix(p, "$") || strings.HasPrefix(p, "&") || strings.HasPrefix(p, "..") {
							continue
						}
						if w.dir {
							p += "/"
						}
						out[p] = true
					}
				}
			}
		}
	}
	return out
}

// TestGitignoreCoversDocWalkthroughs: every file and folder a doc's
// shell block writes into the repository root (the built binary, data/,
// certs/, tokens, a backup, ...) is ignored by git, so that following the
// the docs leave no secret or data to commit by mistake.
func TestGitignoreCoversDocWalkthroughs(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	root := filepath.Join("..", "..")
	if err := exec.Command(git, "-C", root, "rev-parse", "--is-inside-work-tree").Run(); err != nil {
		t.Skip("not a git work tree")
	}
	paths := docWrittenPaths(t)
	for _, want := range []string{"permitd", "data/", "secure/certs/", "secure/app.token"} {
		if !paths[want] {
			t.Errorf("the docs' blocks no longer seem to write %s: is the parser still right? found %v", want, paths)
		}
	}
	for p := range paths {
		probe := p
		if strings.HasSuffix(p, "/") {
			probe = p + "file" // a file in the folder
		}
		if err := exec.Command(git, "-C", root, "check-ignore", "-q", "--no-index", probe).Run(); err != nil {
			t.Errorf("a doc writes %s into the repository root, which .gitignore does not cover", p)
		}
	}
}
