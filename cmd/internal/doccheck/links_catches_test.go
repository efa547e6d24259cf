package doccheck

import (
	"slices"
	"strings"
	"testing"

	"github.com/permitd/permitd/cmd/internal/mddoc"
)

// TestLinkCheckCatchesBrokenLinks: a missing file, a missing anchor in
// another document and in the same one, and a link out of the repository
// are each reported; a good file link, a good anchor (the second of two
// equal headings included), a source file's line anchor and a URL are
// not.
func TestLinkCheckCatchesBrokenLinks(t *testing.T) {
	docs := []*mddoc.Doc{
		mddoc.Parse("README.md", "# Top\n## Same\n## Same\n"+
			"[ok](fsm/README.md#guarantees) [ok](#same-1) [ok](fsm/) [ok](node/raft.go#L10) [ok](https://example.com/#x)\n"+
			"[gone](fsm/GONE.md) [no anchor](fsm/README.md#nope) [self](#missing) [out](../etc/passwd)\n"),
		mddoc.Parse("fsm/README.md", "# fsm\n## Guarantees\n"),
	}
	exists := func(rel string) bool {
		return slices.Contains([]string{"README.md", "fsm/README.md", "fsm", "node/raft.go"}, rel)
	}
	got := linkViolations(docs, exists)
	want := []string{
		`README.md:5: link "fsm/GONE.md": fsm/GONE.md does not exist`,
		`README.md:5: link "fsm/README.md#nope": fsm/README.md has no heading with the anchor #nope`,
		`README.md:5: link "#missing": README.md has no heading with the anchor #missing`,
		`README.md:5: link "../etc/passwd": ../etc/passwd does not exist`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("linkViolations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSizeCheckCatchesLongDocs: a root README over 300 lines and a manual
// over 800 are reported; another Markdown file of any length is not.
func TestSizeCheckCatchesLongDocs(t *testing.T) {
	lines := func(n int) string { return strings.Repeat("x\n", n) }
	docs := []*mddoc.Doc{
		mddoc.Parse("README.md", lines(301)),
		mddoc.Parse("fsm/README.md", lines(801)),
		mddoc.Parse("bucket/README.md", lines(800)),
		mddoc.Parse("jepsen-lite/NOTES.md", lines(2000)),
	}
	want := []string{"README.md: 301 lines, at most 300", "fsm/README.md: 801 lines, at most 800"}
	if got := sizeViolations(docs); !slices.Equal(got, want) {
		t.Errorf("sizeViolations = %q, want %q", got, want)
	}
}
