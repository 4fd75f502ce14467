package pullauth

import (
	"path"
	"strings"
)

// Matches reports whether registry, lower-case as observations give it, matches one of
// patterns, where * matches any run of characters: registry hosts hold no slash, so path.Match's
// * spans dots and ports alike. Host names ignore case, and so do patterns. The CRD allows no
// character that would make a pattern malformed.
func Matches(patterns []string, registry string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(strings.ToLower(p), registry); ok {
			return true
		}
	}
	return false
}
