package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// literals returns every string literal of the operator's own Go code (api, controllers,
// internal, cmd; not tests): the condition reasons and event reasons a user can see are among them.
func literals(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, dir := range []string{"api", "controllers", "internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						out[s] = true
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

var (
	conditionReason = regexp.MustCompile("`(?:[A-Z][A-Za-z]+)=(?:False|True|Unknown) ([A-Z][A-Za-z]+)`")
	eventReason     = regexp.MustCompile("[Ee]vents? `([A-Z][A-Za-z]+)`")
)

// A reason the pages give that the operator never writes sends a reader looking for a text that
// will not come: the docs once said RotationBlocked for a condition whose reason is Blocked.
func TestThePagesNameReasonsTheOperatorWrites(t *testing.T) {
	have := literals(t)
	if !have["Blocked"] || !have["IdentityNotAllowed"] {
		t.Fatal("the operator's string literals were not read")
	}
	checked := 0
	for _, f := range sitePages(t) {
		if f == "api.md" {
			continue
		}
		pg, err := readPage("docs/" + f)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range pg.lines {
			for _, re := range []*regexp.Regexp{conditionReason, eventReason} {
				for _, m := range re.FindAllStringSubmatch(l, -1) {
					checked++
					if !have[m[1]] {
						t.Errorf("docs/%s:%d: %q is no reason the operator writes", f, i+1, m[1])
					}
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d reasons were checked: the patterns no longer find them", checked)
	}
}
