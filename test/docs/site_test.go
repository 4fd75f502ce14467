package docs

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tool finds a program of Debian's packages that `make docs-packages` installs.
func tool(t *testing.T, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s: skipped under -short", name)
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not on the PATH: run `make test` (or `make docs-packages` as root), which installs it from Debian's packages", name)
	}
	return p
}

// run runs a program in its own process group and kills the whole group when it ends or times
// out: Chromium leaves helper processes behind otherwise.
func run(t *testing.T, timeout time.Duration, name string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	return out.String(), errs.String(), err
}

var (
	siteOnce sync.Once
	siteDir  string
	siteErr  string
)

// site builds the site once for the package's tests, into a folder removed when they end.
func site(t *testing.T) string {
	t.Helper()
	mkdocs := tool(t, "mkdocs")
	siteOnce.Do(func() {
		dir, err := os.MkdirTemp("", "credwatch-site-")
		if err != nil {
			siteErr = err.Error()
			return
		}
		siteDir = filepath.Join(dir, "site")
		_, stderr, err := run(t, 2*time.Minute, mkdocs, "build", "--strict", "--config-file", filepath.Join(root, "mkdocs.yml"), "--site-dir", siteDir)
		if err != nil {
			siteErr = err.Error() + ":\n" + stderr
		}
	})
	if siteErr != "" {
		t.Fatalf("mkdocs build --strict failed: %s", siteErr)
	}
	return siteDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if siteDir != "" {
		_ = os.RemoveAll(filepath.Dir(siteDir))
	}
	os.Exit(code)
}

// A warning (a link to a page that does not exist, a nav entry without its file) fails the build.
func TestTheSiteBuildsStrictly(t *testing.T) {
	dir := site(t)
	for _, p := range []string{"index.html", "getting-started/index.html", "api/index.html", "troubleshooting/index.html", "search/search_index.json"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("the site has no %s", p)
		}
	}
}

// The ids mkdocs gives headings are what links land on; the link check computes them itself, so
// that it runs without mkdocs, and this holds it to what mkdocs really makes.
func TestHeadingIDsAreTheSites(t *testing.T) {
	dir := site(t)
	ids := regexp.MustCompile(`<h[1-6] id="([^"]+)"`)
	for _, f := range sitePages(t) {
		pg, err := readPage("docs/" + f)
		if err != nil {
			t.Fatal(err)
		}
		html := strings.TrimSuffix(f, ".md") + "/index.html"
		if f == "index.md" {
			html = "index.html"
		}
		b, err := os.ReadFile(filepath.Join(dir, html))
		if err != nil {
			t.Fatal(err)
		}
		built := map[string]bool{}
		for _, m := range ids.FindAllStringSubmatch(string(b), -1) {
			built[m[1]] = true
		}
		ours := pg.anchors()
		for id := range built {
			if !ours[id] {
				t.Errorf("docs/%s: mkdocs makes heading id %q, which the link check does not compute", f, id)
			}
		}
		for id := range ours {
			if !built[id] {
				t.Errorf("docs/%s: the link check computes heading id %q, which mkdocs does not make", f, id)
			}
		}
	}
}

var (
	htmlTag = regexp.MustCompile(`<html[^>]*>`)
	tags    = regexp.MustCompile(`(?s)<script.*?</script>|<style.*?</style>|<[^>]*>`)
	spaces  = regexp.MustCompile(`\s+`)
)

// Chromium, as a reader's browser, loads Getting started from a local server with the theme's
// scripts and styles, and its rendered DOM holds the page's steps; its screenshot is kept.
func TestGettingStartedRendersInChromium(t *testing.T) {
	chromium := tool(t, "chromium")
	srv := httptest.NewServer(http.FileServer(http.Dir(site(t))))
	defer srv.Close()
	url := srv.URL + "/getting-started/"
	profile := t.TempDir()
	shot := filepath.Join(artifacts(t), "getting-started.png")
	common := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--hide-scrollbars", "--user-data-dir=" + profile,
		"--window-size=1280,2400",
		// Chromium dumps or shoots the page at its load event, which may come before the theme's
		// script has laid out what it adds. A virtual-time budget has it wait until the page
		// has been idle for that long in virtual time, which passes at once when nothing is
		// pending.
		"--virtual-time-budget=10000"}

	dom, stderr, err := run(t, 2*time.Minute, chromium, append(common, "--dump-dom", url)...)
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v\n%s", err, stderr)
	}
	text := spaces.ReplaceAllString(tags.ReplaceAllString(dom, " "), " ")
	for _, want := range []string{
		"Getting started", "helm install credwatch", "kubectl apply", "kubectl get cw",
		"AzureIdentity", "CredentialWatch", "What you see",
		// The theme's navigation, drawn by its templates: the page is part of the site.
		"Overview", "Troubleshooting", "API reference",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the rendered page has no %q", want)
		}
	}
	// The theme's script, as it runs, swaps the page's no-js class for js and installs its
	// focus-visible polyfill (the served HTML says no-js): the page ran in the browser, it was not
	// merely served. (Its copy buttons would say so too, but it mounts them only on the code
	// blocks it sees come into view, which headless Chromium does not always report in time.)
	if html := htmlTag.FindString(dom); !strings.Contains(html, "js-focus-visible") || strings.Contains(html, "no-js") {
		t.Errorf("the rendered page's root is %s: the theme's script did not run", html)
	}

	if _, stderr, err := run(t, 2*time.Minute, chromium, append(common, "--screenshot="+shot, url)...); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, stderr)
	}
	img, err := os.ReadFile(shot)
	if err != nil || !bytes.HasPrefix(img, []byte("\x89PNG")) || len(img) < 20_000 {
		t.Fatalf("no screenshot worth keeping at %s (%d bytes, %v)", shot, len(img), err)
	}
	t.Logf("screenshot of Getting started: %s", shot)
}

// artifacts is where tests keep what a person looks at afterwards: $ARTIFACTS (make test sets it
// to bin/artifacts), else a temporary folder.
func artifacts(t *testing.T) string {
	dir := os.Getenv("ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, "docs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
