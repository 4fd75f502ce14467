package imagepulls

import (
	"cmp"
	"slices"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

var scopeRank = map[v1alpha1.PullScope]int{v1alpha1.PullScopeUndetermined: 0, v1alpha1.PullScopeNodeLocal: 1, v1alpha1.PullScopeClusterWide: 2}

// KeepIncidents chooses the image-pull incidents status has room for, at most limit of all. The
// incidents told of already (in told) stay: one must not seem to end because others began. The
// rest fill what is left, the most serious first. They are listed by registry.
func KeepIncidents(all, told []v1alpha1.PullIncident, limit int) []v1alpha1.PullIncident {
	if len(all) <= limit {
		return all
	}
	known := map[string]bool{}
	for _, p := range told {
		known[p.Registry] = true
	}
	kept := slices.Clone(all)
	slices.SortStableFunc(kept, func(a, b v1alpha1.PullIncident) int {
		if known[a.Registry] != known[b.Registry] {
			if known[a.Registry] {
				return -1
			}
			return 1
		}
		return cmp.Compare(scopeRank[b.Scope], scopeRank[a.Scope])
	})
	kept = kept[:limit]
	slices.SortFunc(kept, func(a, b v1alpha1.PullIncident) int { return cmp.Compare(a.Registry, b.Registry) })
	return kept
}

// WorstIncident is the most serious of incidents, the first of those as serious; incidents is
// not empty.
func WorstIncident(incidents []v1alpha1.PullIncident) v1alpha1.PullIncident {
	worst := incidents[0]
	for _, p := range incidents[1:] {
		if scopeRank[p.Scope] > scopeRank[worst.Scope] {
			worst = p
		}
	}
	return worst
}
