package pullauth

import "path"

// Matches reports whether registry matches one of patterns, where * matches any run of
// characters: registry hosts hold no slash, so path.Match's * spans dots and ports alike. The
// CRD allows no character that would make a pattern malformed.
func Matches(patterns []string, registry string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, registry); ok {
			return true
		}
	}
	return false
}
