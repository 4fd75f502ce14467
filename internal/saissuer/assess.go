package saissuer

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// Observation is what one check of the API servers found.
type Observation struct {
	Endpoints []Endpoint
}

// Endpoint is one API server's answers.
type Endpoint struct {
	URL    string
	Issuer string
	// KeyIDs are the kids of its JWKS, sorted.
	KeyIDs []string
	// SigningKeyID is the kid of the canary token minted through it.
	SigningKeyID string
	// Rejected maps the endpoints that rejected the canary token minted through this one to why.
	Rejected map[string]string
}

// Assessment is whether the API servers agree on the issuer's keys.
type Assessment struct {
	// Drift is empty when every signing key is verified everywhere; else the reason of the
	// SigningKeyDrift condition, Message saying what and where.
	Drift   string
	Message string
	// Keys are the served keys to remember, for telling a key removed too early.
	Keys []v1alpha1.ServedKey
	// Issuer is the issuer URL the endpoints announce (the first one's, when they differ).
	Issuer string
}

// maxKeys bounds the remembered keys, as the CRD does.
const maxKeys = 32

// Assess decides from an observation, the keys served before and the token lifetime whether the
// API servers drift. Key sets that differ are not drift by themselves: a rotation done right adds
// the new key for verification on every server, one by one, before any signs with it. Drift is a
// signing key another server does not serve, a canary token another server rejects, or a key gone
// while tokens it signed are still valid.
func Assess(obs Observation, served []v1alpha1.ServedKey, lifetime time.Duration, now time.Time) Assessment {
	var a Assessment
	serving := map[string]bool{}
	for _, e := range obs.Endpoints {
		for _, k := range e.KeyIDs {
			serving[k] = true
		}
		if a.Issuer == "" {
			a.Issuer = e.Issuer
		}
	}

	var problems []string
	reason := ""
	add := func(r, msg string) {
		if reason == "" {
			reason = r
		}
		problems = append(problems, msg)
	}
	for _, e := range obs.Endpoints {
		for _, other := range obs.Endpoints {
			if e.SigningKeyID != "" && other.URL != e.URL && !slices.Contains(other.KeyIDs, e.SigningKeyID) {
				add(v1alpha1.ReasonSigningKeyNotShared, fmt.Sprintf("%s signs with key %s, which %s does not serve", e.URL, e.SigningKeyID, other.URL))
			}
		}
	}
	for _, e := range obs.Endpoints {
		for _, other := range slices.Sorted(maps.Keys(e.Rejected)) {
			add(v1alpha1.ReasonCanaryRejected, fmt.Sprintf("a token minted through %s was rejected by %s: %s", e.URL, other, e.Rejected[other]))
		}
	}
	for i := 0; i+1 < len(obs.Endpoints); i++ {
		if a, b := obs.Endpoints[i], obs.Endpoints[i+1]; a.Issuer != b.Issuer {
			add(v1alpha1.ReasonIssuersDiffer, fmt.Sprintf("%s announces issuer %s, %s announces %s", a.URL, a.Issuer, b.URL, b.Issuer))
		}
	}
	for _, k := range served {
		if !serving[k.KeyID] && now.Sub(k.LastServed.Time) < lifetime {
			add(v1alpha1.ReasonKeyRemovedEarly, fmt.Sprintf("key %s left the key set %s after it was last served, while tokens it signed stay valid for %s",
				k.KeyID, now.Sub(k.LastServed.Time).Round(time.Second), lifetime))
		}
	}
	a.Drift = reason
	a.Message = strings.Join(problems, "; ")
	if reason == "" {
		a.Message = "Every API server accepts the tokens the others sign, with keys " + strings.Join(slices.Sorted(maps.Keys(serving)), ", ")
		if setsDiffer(obs.Endpoints) {
			a.Message += " (their key sets differ, as during a rotation, but every signing key is served everywhere)"
		}
	}

	// Remember what is served now, and what was served within a token lifetime.
	for k := range serving {
		a.Keys = append(a.Keys, v1alpha1.ServedKey{KeyID: k, LastServed: metav1.NewTime(now)})
	}
	for _, k := range served {
		if !serving[k.KeyID] && now.Sub(k.LastServed.Time) < lifetime {
			a.Keys = append(a.Keys, k)
		}
	}
	slices.SortFunc(a.Keys, func(x, y v1alpha1.ServedKey) int { return strings.Compare(x.KeyID, y.KeyID) })
	if len(a.Keys) > maxKeys {
		a.Keys = a.Keys[:maxKeys]
	}
	return a
}

func setsDiffer(eps []Endpoint) bool {
	for i := 1; i < len(eps); i++ {
		if !slices.Equal(eps[0].KeyIDs, eps[i].KeyIDs) {
			return true
		}
	}
	return false
}
