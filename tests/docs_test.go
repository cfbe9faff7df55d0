package tests

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The repository stands alone: every Markdown document that code, scripts or documents cite
// is in the repository (docs/<name>.md, or README.md), so no comment points to design notes
// that readers of the repository cannot open.
func TestCitedDocumentsExist(t *testing.T) {
	root := repoRoot()
	cite := regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]+\.md\b`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".sh", ".js":
		default:
			if d.Name() != "Makefile" {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range cite.FindAllString(string(b), -1) {
			name := filepath.Base(m)
			found := false
			for _, c := range []string{filepath.Join(root, "docs", name), filepath.Join(root, name), filepath.Join(filepath.Dir(path), m)} {
				if _, err := os.Stat(c); err == nil {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s cites %s, which is not in the repository", rel, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
