package notify

import (
	"strings"
	"testing"
)

// A name an application's owner chose is shown on one line, and at most 64 characters of it.
func TestShown(t *testing.T) {
	for in, want := range map[string]string{
		"payments":                   "payments",
		"pay\r\nBcc: x@evil.example": "pay  Bcc: x@evil.example",
		"a\u202egnp.exe":             "a gnp.exe",
		"one\u2028two\u2029three":    "one two three",
		strings.Repeat("ü", 70):      strings.Repeat("ü", 64) + "…",
		strings.Repeat("x", 64):      strings.Repeat("x", 64),
	} {
		if got := Shown(in); got != want {
			t.Errorf("Shown(%q) = %q, want %q", in, got, want)
		}
	}
}
