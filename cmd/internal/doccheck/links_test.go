package doccheck

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/permitd/permitd/cmd/internal/mddoc"
)

// Line budgets of the documentation: the root README is the front door,
// read in ten minutes; a part's manual (a README.md in its folder) is
// read when that part is needed.
const (
	rootReadmeMaxLines = 300
	manualMaxLines     = 800
)

// linkViolations returns every relative link of docs whose file does not
// exist (exists answers for a repository-relative path) or whose anchor
// is no heading or <a id> of the Markdown file it names.
func linkViolations(docs []*mddoc.Doc, exists func(rel string) bool) []string {
	byPath := map[string]*mddoc.Doc{}
	for _, d := range docs {
		byPath[d.Path] = d
	}
	var out []string
	for _, d := range docs {
		for _, l := range d.Links {
			if strings.Contains(l.Target, "://") || strings.HasPrefix(l.Target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(l.Target, "#")
			target := d.Path
			if file != "" {
				target = path.Clean(path.Join(path.Dir(d.Path), file))
				if strings.HasPrefix(target, "../") || !exists(target) {
					out = append(out, fmt.Sprintf("%s:%d: link %q: %s does not exist", d.Path, l.Line, l.Target, target))
					continue
				}
			}
			if anchor == "" {
				continue
			}
			to, ok := byPath[target]
			switch {
			case !ok && strings.HasSuffix(target, ".md"):
				out = append(out, fmt.Sprintf("%s:%d: link %q: %s is not among the documents read", d.Path, l.Line, l.Target, target))
			case !ok:
				// An anchor into a source file (a line, "#L10") is GitHub's.
			case !to.Anchors[anchor]:
				out = append(out, fmt.Sprintf("%s:%d: link %q: %s has no heading with the anchor #%s", d.Path, l.Line, l.Target, target, anchor))
			}
		}
	}
	return out
}

// sizeViolations returns the documents over their line budget: the root
// README.md over rootReadmeMaxLines, any other README.md over
// manualMaxLines.
func sizeViolations(docs []*mddoc.Doc) []string {
	var out []string
	for _, d := range docs {
		limit := 0
		switch {
		case d.Path == "README.md":
			limit = rootReadmeMaxLines
		case path.Base(d.Path) == "README.md":
			limit = manualMaxLines
		}
		if limit > 0 && d.Lines > limit {
			out = append(out, fmt.Sprintf("%s: %d lines, at most %d", d.Path, d.Lines, limit))
		}
	}
	return out
}

// repoDocs loads every Markdown file of the repository.
func repoDocs(t *testing.T) (root string, docs []*mddoc.Doc) {
	t.Helper()
	root = filepath.Join("..", "..", "..")
	docs, err := mddoc.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 3 {
		t.Fatalf("found %d Markdown files under %s: is the walk still right?", len(docs), root)
	}
	return root, docs
}

// TestDocLinksResolve: every relative link in every Markdown file of the
// repository names a file that exists and, with an anchor, a heading of
// that file (GitHub's slug of it).
func TestDocLinksResolve(t *testing.T) {
	root, docs := repoDocs(t)
	exists := func(rel string) bool {
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
		return err == nil
	}
	for _, v := range linkViolations(docs, exists) {
		t.Error(v)
	}
}

// TestDocSizes: the root README stays a front door (at most 300 lines)
// and each part's manual at most 800 lines.
func TestDocSizes(t *testing.T) {
	_, docs := repoDocs(t)
	for _, v := range sizeViolations(docs) {
		t.Error(v)
	}
}
