package saissuer

import (
	"cmp"
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
	// Recheck is when the drift's aftermath ends and the condition may change; zero for none.
	Recheck time.Time
}

// maxKeys bounds the remembered keys, as the CRD does.
const maxKeys = 32

// drift is what an assessment found wrong: the reason of the first problem, and every problem.
type drift struct {
	reason   string
	problems []string
}

func (d *drift) add(reason, msg string) {
	if d.reason == "" {
		d.reason = reason
	}
	d.problems = append(d.problems, msg)
}

// disagreements are what the API servers disagree on now: a signing key another does not serve,
// a canary token another rejects, issuers that differ.
func (d *drift) disagreements(obs Observation) {
	for _, e := range obs.Endpoints {
		for _, other := range obs.Endpoints {
			if e.SigningKeyID != "" && other.URL != e.URL && !slices.Contains(other.KeyIDs, e.SigningKeyID) {
				d.add(v1alpha1.ReasonSigningKeyNotShared, fmt.Sprintf("%s signs with key %s, which %s does not serve", e.URL, e.SigningKeyID, other.URL))
			}
		}
	}
	for _, e := range obs.Endpoints {
		for _, other := range slices.Sorted(maps.Keys(e.Rejected)) {
			d.add(v1alpha1.ReasonCanaryRejected, fmt.Sprintf("a token minted through %s was rejected by %s: %s", e.URL, other, e.Rejected[other]))
		}
	}
	for i := 0; i+1 < len(obs.Endpoints); i++ {
		if a, b := obs.Endpoints[i], obs.Endpoints[i+1]; a.Issuer != b.Issuer {
			d.add(v1alpha1.ReasonIssuersDiffer, fmt.Sprintf("%s announces issuer %s, %s announces %s", a.URL, a.Issuer, b.URL, b.Issuer))
		}
	}
}

// removedEarly are the keys served before that left while tokens they signed are still valid.
// Only a key seen signing can have left valid tokens behind, and only the last check that saw it
// sign is known: it may have signed until just before it left, so a removal found more than a
// token lifetime after that check may still have been early, but is not reported. Catching
// every early removal takes checks at least as often as tokens live.
func (d *drift) removedEarly(served []v1alpha1.ServedKey, serving map[string]bool, lifetime time.Duration, now time.Time) {
	for _, k := range served {
		if !serving[k.KeyID] && stillSigned(k, lifetime, now) {
			signed := "recently"
			if k.LastSigned != nil {
				signed = now.Sub(k.LastSigned.Time).Round(time.Second).String() + " ago"
			}
			d.add(v1alpha1.ReasonKeyRemovedEarly, fmt.Sprintf("key %s left the key set while a token it signed %s stays valid for %s",
				k.KeyID, signed, lifetime))
		}
	}
}

// stillRejected are the tokens that servers reject until they expire, and returns when the
// first of those ends. The canary proves the present; this, the recent past: a server that
// stopped signing with a key another never served leaves tokens that other server rejects until
// they expire.
func (d *drift) stillRejected(obs Observation, keys []v1alpha1.ServedKey, serving map[string]bool, now time.Time) time.Time {
	var recheck time.Time
	for _, k := range keys {
		if k.TokensValidUntil == nil || !now.Before(k.TokensValidUntil.Time) || !serving[k.KeyID] {
			continue
		}
		var rejecting []string
		for _, e := range obs.Endpoints {
			if !slices.Contains(e.KeyIDs, k.KeyID) {
				rejecting = append(rejecting, e.URL)
			}
		}
		if len(rejecting) > 0 {
			d.add(v1alpha1.ReasonSignedTokensStillRejected, fmt.Sprintf("tokens signed with key %s until it stopped signing are rejected by %s until %s, when the last of them expires",
				k.KeyID, strings.Join(rejecting, ", "), k.TokensValidUntil.UTC().Format(time.RFC3339)))
			recheck = earliest(recheck, k.TokensValidUntil.Time)
		}
	}
	return recheck
}

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

	var d drift
	d.disagreements(obs)
	d.removedEarly(served, serving, lifetime, now)
	a.Keys = remember(obs, served, serving, lifetime, now)
	a.Recheck = d.stillRejected(obs, a.Keys, serving, now)
	a.Drift = d.reason
	a.Message = strings.Join(d.problems, "; ")
	if d.reason == "" {
		a.Message = "Every API server accepts the tokens the others sign, with keys " + strings.Join(slices.Sorted(maps.Keys(serving)), ", ")
		if setsDiffer(obs.Endpoints) {
			a.Message += " (their key sets differ, as during a rotation, but every signing key is served everywhere)"
		}
	}
	return a
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// stillSigned says whether tokens k signed may still be valid: up to a lifetime after the last
// check that saw it sign, or after the first that found a server no longer signing with it.
func stillSigned(k v1alpha1.ServedKey, lifetime time.Duration, now time.Time) bool {
	return (k.LastSigned != nil && now.Sub(k.LastSigned.Time) < lifetime) || (k.TokensValidUntil != nil && now.Before(k.TokensValidUntil.Time))
}

// remember keeps the keys served now, with when each last signed, and the keys gone whose tokens
// are still valid; the most recently served first when there are more than the status holds.
func remember(obs Observation, served []v1alpha1.ServedKey, serving map[string]bool, lifetime time.Duration, now time.Time) []v1alpha1.ServedKey {
	before := map[string]v1alpha1.ServedKey{}
	for _, k := range served {
		before[k.KeyID] = k
	}
	signing := map[string]bool{}
	for _, e := range obs.Endpoints {
		if e.SigningKeyID != "" {
			signing[e.SigningKeyID] = true
		}
	}
	stamp := metav1.NewTime(now)
	var keys []v1alpha1.ServedKey
	for k := range serving {
		prev := before[k]
		sk := v1alpha1.ServedKey{KeyID: k, LastServed: stamp, LastSigned: prev.LastSigned, Signers: signersOf(obs, k),
			TokensValidUntil: prev.TokensValidUntil}
		if signing[k] {
			sk.LastSigned = &stamp
		}
		for _, s := range prev.Signers {
			if !slices.Contains(sk.Signers, s) {
				// s stopped signing with k at some moment since the last check; its tokens live on.
				until := metav1.NewTime(now.Add(lifetime))
				if sk.TokensValidUntil == nil || sk.TokensValidUntil.Before(&until) {
					sk.TokensValidUntil = &until
				}
			}
		}
		if sk.TokensValidUntil != nil && !now.Before(sk.TokensValidUntil.Time) {
			sk.TokensValidUntil = nil
		}
		keys = append(keys, sk)
	}
	for _, k := range served {
		if !serving[k.KeyID] && stillSigned(k, lifetime, now) {
			keys = append(keys, k)
		}
	}
	if len(keys) > maxKeys {
		// By key ID among those served as recently, so that the same keys stay from check to check.
		slices.SortFunc(keys, func(x, y v1alpha1.ServedKey) int {
			return cmp.Or(y.LastServed.Compare(x.LastServed.Time), strings.Compare(x.KeyID, y.KeyID))
		})
		keys = keys[:maxKeys]
	}
	slices.SortFunc(keys, func(x, y v1alpha1.ServedKey) int { return strings.Compare(x.KeyID, y.KeyID) })
	return keys
}

// signersOf lists the endpoints that signed the canary token with key k.
func signersOf(obs Observation, k string) []string {
	var out []string
	for _, e := range obs.Endpoints {
		if e.SigningKeyID == k && len(out) < maxSigners {
			out = append(out, e.URL)
		}
	}
	return out
}

// maxSigners bounds a key's signers, as the CRD does.
const maxSigners = 16

func setsDiffer(eps []Endpoint) bool {
	for i := 1; i < len(eps); i++ {
		if !slices.Equal(eps[0].KeyIDs, eps[i].KeyIDs) {
			return true
		}
	}
	return false
}
