package docs

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sitePages returns every Markdown file under docs/, relative to docs/.
func sitePages(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, err := filepath.Rel(filepath.Join(root, "docs"), p)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readerPages returns what a reader reads, relative to the repository: the README and the site.
func readerPages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md"}
	for _, f := range sitePages(t) {
		out = append(out, "docs/"+f)
	}
	return out
}

// mkdocs --strict fails on a nav entry that is no file, but only mentions a file that is in no
// nav, which a reader then cannot find: both are failures here.
func TestEveryPageIsInTheNav(t *testing.T) {
	nav, err := navPages()
	if err != nil {
		t.Fatal(err)
	}
	files := sitePages(t)
	for _, f := range files {
		if !slices.Contains(nav, f) {
			t.Errorf("docs/%s is in no entry of mkdocs.yml's nav: add it, or it is an orphan no reader finds", f)
		}
	}
	for _, n := range nav {
		if !slices.Contains(files, n) {
			t.Errorf("mkdocs.yml's nav lists %s, which is not in docs/", n)
		}
	}
	for _, want := range []string{"index.md", "getting-started.md", "troubleshooting.md", "upgrading.md", "api.md"} {
		if !slices.Contains(nav, want) {
			t.Errorf("the nav has no %s", want)
		}
	}
}

// mkdocs 1.4 checks that a link's page exists, not that its heading does, and GitHub renders the
// README's links into docs/ without checking either: a section renamed or moved would leave
// links that land at the top of a page, or nowhere.
func TestEveryLinkLands(t *testing.T) {
	targets := map[string]page{}
	load := func(p string) (page, bool) {
		if pg, ok := targets[p]; ok {
			return pg, true
		}
		pg, err := readPage(p)
		if err != nil {
			return page{}, false
		}
		targets[p] = pg
		return pg, true
	}
	checked := 0
	for _, src := range readerPages(t) {
		pg, ok := load(src)
		if !ok {
			t.Fatalf("reading %s", src)
		}
		for _, l := range pg.links() {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			checked++
			if msg := resolve(src, l.target, load); msg != "" {
				t.Errorf("%s:%d: link %q %s", src, l.line, l.target, msg)
			}
		}
	}
	if checked < 40 {
		t.Errorf("only %d links were checked: the link parser has stopped finding them", checked)
	}
}

// resolve says what is wrong with a link from the page src, or "" when it lands.
func resolve(src, target string, load func(string) (page, bool)) string {
	file, anchor, _ := strings.Cut(target, "#")
	dest := src
	if file != "" {
		dest = path.Clean(path.Join(path.Dir(src), file))
	}
	if strings.HasPrefix(dest, "../") {
		return "leaves the repository"
	}
	if strings.HasPrefix(src, "docs/") && !strings.HasPrefix(dest, "docs/") {
		return "leaves docs/, which mkdocs does not publish: link to the file on GitHub instead"
	}
	if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
		return "names a file that does not exist"
	}
	if anchor == "" {
		return ""
	}
	if !strings.HasSuffix(dest, ".md") {
		return "has an anchor into a file that is not Markdown"
	}
	pg, ok := load(dest)
	if !ok {
		return "names a page that cannot be read"
	}
	if !pg.anchors()[anchor] {
		return "names a heading " + dest + " does not have"
	}
	return ""
}
