package nodes

import (
	"fmt"
	"strings"
	"testing"
)

// demoEnv makes TestExpiredClusterSecretIsTheOutage a demo, as `make demo-cluster` runs it: it
// tells the person watching what happens, and keeps the cluster up until Ctrl-C.
const demoEnv = "CREDWATCH_DEMO_CLUSTER"

// story tells what a story's test sees: in the test's log or, in a demo, to the person watching.
type story struct {
	t    *testing.T
	demo bool
}

// say tells what happens next.
func (s story) say(format string, args ...any) {
	s.t.Helper()
	if s.demo {
		fmt.Printf("\n==> "+format+"\n", args...)
		return
	}
	s.t.Logf("==> "+format, args...)
}

// detail tells what was seen.
func (s story) detail(format string, args ...any) {
	s.t.Helper()
	if s.demo {
		fmt.Print(indent(fmt.Sprintf(format, args...)))
		return
	}
	s.t.Logf(format, args...)
}

// show runs kubectl, which logs what it printed, and shows it in a demo.
func (s story) show(args ...string) {
	s.t.Helper()
	out := kubectl(s.t, args...)
	if s.demo {
		fmt.Print(indent(out))
	}
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "  " + strings.Join(lines, "\n  ") + "\n"
}
