package mddoc

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Files returns the Markdown files under root (relative to root, with
// slashes, sorted), skipping hidden folders, testdata, node_modules and
// the folders .gitignore keeps out of the repository that tools write
// documentation-like files into (jepsen-lite/out, reports, tmp).
func Files(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && skipDir(rel, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".md") {
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// skipDir reports whether a folder holds no documentation of the project.
func skipDir(rel, name string) bool {
	if strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" {
		return true
	}
	switch rel {
	case "jepsen-lite/out", "reports", "tmp", "data", "secure":
		return true
	}
	return false
}

// Load parses every Markdown file under root.
func Load(root string) ([]*Doc, error) {
	files, err := Files(root)
	if err != nil {
		return nil, err
	}
	docs := make([]*Doc, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		docs = append(docs, Parse(f, string(b)))
	}
	return docs, nil
}
