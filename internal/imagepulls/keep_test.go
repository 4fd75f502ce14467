package imagepulls

import (
	"fmt"
	"slices"
	"testing"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

func incidents(scope v1alpha1.PullScope, registries ...string) []v1alpha1.PullIncident {
	var out []v1alpha1.PullIncident
	for _, r := range registries {
		out = append(out, v1alpha1.PullIncident{Registry: r, Scope: scope})
	}
	return out
}

func registries(in []v1alpha1.PullIncident) []string {
	var out []string
	for _, p := range in {
		out = append(out, p.Registry)
	}
	return out
}

func TestKeepIncidents(t *testing.T) {
	var many []string
	for i := range 5 {
		many = append(many, fmt.Sprintf("r%d.example", i))
	}
	tests := map[string]struct {
		all, told []v1alpha1.PullIncident
		want      []string
	}{
		"room for all, as they came": {all: incidents(v1alpha1.PullScopeNodeLocal, "b", "a"), want: []string{"b", "a"}},
		"the most serious fill the room, by registry": {
			all:  append(incidents(v1alpha1.PullScopeUndetermined, many[:3]...), incidents(v1alpha1.PullScopeClusterWide, many[3:]...)...),
			want: []string{"r0.example", "r3.example", "r4.example"},
		},
		"told ones keep their place over more serious new ones": {
			all:  append(incidents(v1alpha1.PullScopeClusterWide, many[:3]...), incidents(v1alpha1.PullScopeUndetermined, many[3:]...)...),
			told: incidents(v1alpha1.PullScopeUndetermined, "r3.example", "r4.example"),
			want: []string{"r0.example", "r3.example", "r4.example"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			limit := 3
			if got := registries(KeepIncidents(tc.all, tc.told, limit)); !slices.Equal(got, tc.want) {
				t.Errorf("KeepIncidents = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWorstIncident(t *testing.T) {
	all := append(incidents(v1alpha1.PullScopeUndetermined, "a"), append(incidents(v1alpha1.PullScopeClusterWide, "b", "c"), incidents(v1alpha1.PullScopeNodeLocal, "d")...)...)
	if got := WorstIncident(all); got.Registry != "b" {
		t.Errorf("WorstIncident = %s, want b, the first cluster-wide one", got.Registry)
	}
}
