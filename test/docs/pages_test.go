// Package docs checks the documentation site in docs/: every page is in mkdocs.yml's nav, every
// link from a page or the README lands on a file and a heading that exist, the site builds with
// mkdocs --strict, every YAML example is accepted by a real API server with the CRDs, and
// Chromium renders Getting started.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"

	"sigs.k8s.io/yaml"
)

// root is the repository, seen from this package's folder, where go test runs.
const root = "../.."

// page is a Markdown file of the site or the README, read once.
type page struct {
	path  string // relative to root
	lines []string
}

func readPage(path string) (page, error) {
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return page{}, err
	}
	return page{path: path, lines: strings.Split(string(b), "\n")}, nil
}

// block is a fenced code block: its info string (the language) and its text.
type block struct {
	lang string
	line int // 1-based, of the opening fence
	text string
}

var fence = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([\\w-]*)")

// blocks returns the page's fenced code blocks, and its other lines (with code blocks blanked,
// so that line numbers hold) for links and headings.
func (p page) blocks() (code []block, prose []string) {
	prose = make([]string, len(p.lines))
	var open *block
	var marker string
	var body []string
	for i, l := range p.lines {
		m := fence.FindStringSubmatch(l)
		switch {
		case open == nil && m != nil:
			open, marker, body = &block{lang: m[2], line: i + 1}, m[1], nil
		case open != nil && m != nil && strings.HasPrefix(strings.TrimSpace(l), marker) && m[2] == "":
			open.text = strings.Join(body, "\n")
			code = append(code, *open)
			open = nil
		case open != nil:
			body = append(body, l)
		default:
			prose[i] = l
		}
	}
	return code, prose
}

var (
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	explicitID = regexp.MustCompile(`\s*\{[^}]*#([\w-]+)[^}]*\}\s*$`)
	inlineCode = regexp.MustCompile("`([^`]*)`")
	mdLink     = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\)`)
	notWord    = regexp.MustCompile(`[^\w\s-]`)
	dashes     = regexp.MustCompile(`[-\s]+`)
)

// anchors returns the ids of the page's headings, as Python-Markdown's toc extension makes them
// (mkdocs' default): an explicit {#id} wins; otherwise the heading's text, without its markup,
// in ASCII, stripped of what is not a word character, space or hyphen, lowercased, its
// runs of spaces and hyphens made one hyphen; a repeat gets _1, _2.
func (p page) anchors() map[string]bool {
	_, prose := p.blocks()
	ids := map[string]bool{}
	for _, l := range prose {
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		text := m[2]
		if id := explicitID.FindStringSubmatch(text); id != nil {
			ids[id[1]] = true
			continue
		}
		id := slug(text)
		for n, base := 1, id; ids[id]; n++ {
			id = fmt.Sprintf("%s_%d", base, n)
		}
		ids[id] = true
	}
	return ids
}

func slug(text string) string {
	text = inlineCode.ReplaceAllString(text, "$1")
	text = mdLink.ReplaceAllString(text, "$1")
	text = strings.ReplaceAll(text, "*", "")
	// Python folds accents to their letter first (NFKD); the site's headings are ASCII, so a
	// character beyond it is dropped, as Python drops what has no ASCII form.
	var ascii strings.Builder
	for _, r := range text {
		if r < unicode.MaxASCII {
			ascii.WriteRune(r)
		}
	}
	s := strings.ToLower(strings.TrimSpace(notWord.ReplaceAllString(ascii.String(), "")))
	return dashes.ReplaceAllString(s, "-")
}

// link is a Markdown link of a page's prose.
type link struct {
	line   int
	target string
}

func (p page) links() []link {
	_, prose := p.blocks()
	// A link's text may wrap onto the next line, so the prose is read as one text. Inline code,
	// which may show a link's syntax without being one, is blanked to spaces of its length so
	// that offsets, and so line numbers, hold.
	text := inlineCode.ReplaceAllStringFunc(strings.Join(prose, "\n"), func(code string) string {
		return strings.Map(func(r rune) rune {
			if r == '\n' {
				return r
			}
			return ' '
		}, code)
	})
	var out []link
	for _, m := range mdLink.FindAllStringSubmatchIndex(text, -1) {
		out = append(out, link{line: strings.Count(text[:m[0]], "\n") + 1, target: text[m[4]:m[5]]})
	}
	return out
}

// navPages returns the pages mkdocs.yml's nav lists, relative to docs/.
func navPages() ([]string, error) {
	b, err := os.ReadFile(filepath.Join(root, "mkdocs.yml"))
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Nav []any `json:"nav"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return nil, err
	}
	var pages []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			pages = append(pages, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(cfg.Nav)
	return pages, nil
}
