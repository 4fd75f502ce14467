package saissuer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

func TestAssess(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	const issuer = "https://kubernetes.default.svc"
	ep := func(url, signs string, serves ...string) Endpoint {
		return Endpoint{URL: url, Issuer: issuer, KeyIDs: serves, SigningKeyID: signs}
	}
	servedAgo := func(kid string, ago time.Duration) v1alpha1.ServedKey {
		return v1alpha1.ServedKey{KeyID: kid, LastServed: metav1.NewTime(now.Add(-ago))}
	}
	signedAgo := func(kid string, served, signed time.Duration) v1alpha1.ServedKey {
		at := metav1.NewTime(now.Add(-signed))
		return v1alpha1.ServedKey{KeyID: kid, LastServed: metav1.NewTime(now.Add(-served)), LastSigned: &at}
	}
	for _, tc := range []struct {
		name      string
		endpoints []Endpoint
		served    []v1alpha1.ServedKey
		drift     string
		says      []string
		keys      []string
	}{
		{name: "every server serves and signs with the same key",
			endpoints: []Endpoint{ep("https://a", "k1", "k1"), ep("https://b", "k1", "k1")},
			says:      []string{"Every API server accepts the tokens the others sign, with keys k1"}, keys: []string{"k1"}},
		{name: "a rotation done right: a new key served for verification before anyone signs with it",
			endpoints: []Endpoint{ep("https://a", "k1", "k1", "k2"), ep("https://b", "k1", "k1")},
			says:      []string{"their key sets differ, as during a rotation"}, keys: []string{"k1", "k2"}},
		{name: "the rotation's second half: one server signs with the new key, which all serve",
			endpoints: []Endpoint{ep("https://a", "k1", "k1", "k2"), ep("https://b", "k2", "k1", "k2")}, keys: []string{"k1", "k2"}},
		{name: "a server signs with a key the other does not serve",
			endpoints: []Endpoint{ep("https://a", "k1", "k1"), ep("https://b", "k2", "k2")},
			drift:     v1alpha1.ReasonSigningKeyNotShared,
			says:      []string{"https://a signs with key k1, which https://b does not serve", "https://b signs with key k2, which https://a does not serve"}},
		{name: "a canary token rejected",
			endpoints: []Endpoint{ep("https://a", "k1", "k1"), {URL: "https://b", Issuer: issuer, KeyIDs: []string{"k1"}, SigningKeyID: "k1",
				Rejected: map[string]string{"https://a": "square/go-jose: error in cryptographic primitive"}}},
			drift: v1alpha1.ReasonCanaryRejected,
			says:  []string{"a token minted through https://b was rejected by https://a: square/go-jose: error in cryptographic primitive"}},
		{name: "issuers differ",
			endpoints: []Endpoint{ep("https://a", "k1", "k1"), {URL: "https://b", Issuer: "https://other", KeyIDs: []string{"k1"}, SigningKeyID: "k1"}},
			drift:     v1alpha1.ReasonIssuersDiffer, says: []string{"https://a announces issuer " + issuer + ", https://b announces https://other"}},
		{name: "a key gone ten minutes after it last signed: its tokens still hold",
			endpoints: []Endpoint{ep("https://a", "k2", "k2"), ep("https://b", "k2", "k2")},
			served:    []v1alpha1.ServedKey{signedAgo("k1", 10*time.Minute, 10*time.Minute), signedAgo("k2", 10*time.Minute, 10*time.Minute)},
			drift:     v1alpha1.ReasonKeyRemovedEarly, says: []string{"key k1 left the key set while a token it signed 10m0s ago stays valid for 1h0m0s"},
			keys: []string{"k1", "k2"}},
		{name: "a key gone after the token lifetime: retired right",
			endpoints: []Endpoint{ep("https://a", "k2", "k2"), ep("https://b", "k2", "k2")},
			served:    []v1alpha1.ServedKey{signedAgo("k1", 2*time.Hour, 2*time.Hour)}, keys: []string{"k2"}},
		{name: "checks every ten minutes: a key served on after it stopped signing, then retired an hour later",
			endpoints: []Endpoint{ep("https://a", "k2", "k2"), ep("https://b", "k2", "k2")},
			served:    []v1alpha1.ServedKey{signedAgo("k1", 10*time.Minute, 70*time.Minute), signedAgo("k2", 10*time.Minute, 10*time.Minute)},
			keys:      []string{"k2"}},
		{name: "a key only ever served for verification, withdrawn at once",
			endpoints: []Endpoint{ep("https://a", "k1", "k1"), ep("https://b", "k1", "k1")},
			served:    []v1alpha1.ServedKey{servedAgo("k2", 10*time.Minute), signedAgo("k1", 10*time.Minute, 10*time.Minute)},
			keys:      []string{"k1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Assess(Observation{Endpoints: tc.endpoints}, tc.served, time.Hour, now)
			if a.Drift != tc.drift {
				t.Errorf("drift = %q (%s), want %q", a.Drift, a.Message, tc.drift)
			}
			for _, s := range tc.says {
				if !strings.Contains(a.Message, s) {
					t.Errorf("message %q does not say %q", a.Message, s)
				}
			}
			if a.Issuer != issuer {
				t.Errorf("issuer = %q", a.Issuer)
			}
			if tc.keys != nil {
				var got []string
				for _, k := range a.Keys {
					got = append(got, k.KeyID)
				}
				if strings.Join(got, ",") != strings.Join(tc.keys, ",") {
					t.Errorf("keys remembered = %v, want %v", got, tc.keys)
				}
			}
		})
	}
}

// Each check stamps the keys it sees served, and the ones it sees signing; a key that stops
// signing keeps its last signature.
func TestAssessRemembersSignatures(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	first := Assess(Observation{Endpoints: []Endpoint{{URL: "https://a", KeyIDs: []string{"k1", "k2"}, SigningKeyID: "k1"}}}, nil, time.Hour, t0)
	t1 := t0.Add(10 * time.Minute)
	second := Assess(Observation{Endpoints: []Endpoint{{URL: "https://a", KeyIDs: []string{"k1", "k2"}, SigningKeyID: "k2"}}}, first.Keys, time.Hour, t1)
	want := map[string][2]time.Time{"k1": {t1, t0}, "k2": {t1, t1}}
	if len(second.Keys) != len(want) {
		t.Fatalf("keys = %+v", second.Keys)
	}
	for _, k := range second.Keys {
		if k.LastSigned == nil || !k.LastServed.Time.Equal(want[k.KeyID][0]) || !k.LastSigned.Time.Equal(want[k.KeyID][1]) {
			t.Errorf("%s: served %v, signed %v; want %v", k.KeyID, k.LastServed, k.LastSigned, want[k.KeyID])
		}
	}
	if first.Keys[1].LastSigned != nil {
		t.Errorf("k2 had signed nothing at the first check: %+v", first.Keys[1])
	}
}

// More keys than the status holds: the ones served now are kept before the ones gone.
func TestAssessKeepsTheServedKeys(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	signed := metav1.NewTime(now.Add(-time.Minute))
	var gone []v1alpha1.ServedKey
	for i := range maxKeys {
		gone = append(gone, v1alpha1.ServedKey{KeyID: fmt.Sprintf("a%02d", i), LastServed: signed, LastSigned: &signed})
	}
	a := Assess(Observation{Endpoints: []Endpoint{{URL: "https://a", KeyIDs: []string{"z1", "z2"}, SigningKeyID: "z1"}}}, gone, time.Hour, now)
	if len(a.Keys) != maxKeys {
		t.Fatalf("%d keys remembered, want %d", len(a.Keys), maxKeys)
	}
	if last := a.Keys[len(a.Keys)-2:]; last[0].KeyID != "z1" || last[1].KeyID != "z2" {
		t.Errorf("the keys served now were dropped: %v", last)
	}

	// More keys served than the status holds: the same ones are kept at every check.
	var many []string
	for i := range maxKeys + 8 {
		many = append(many, fmt.Sprintf("k%02d", i))
	}
	first := Assess(Observation{Endpoints: []Endpoint{{URL: "https://a", KeyIDs: many, SigningKeyID: "k00"}}}, nil, time.Hour, now)
	for range 5 {
		again := Assess(Observation{Endpoints: []Endpoint{{URL: "https://a", KeyIDs: many, SigningKeyID: "k00"}}}, nil, time.Hour, now)
		if len(again.Keys) != maxKeys || again.Keys[maxKeys-1].KeyID != first.Keys[maxKeys-1].KeyID {
			t.Fatalf("kept %v, then %v", first.Keys[maxKeys-1], again.Keys[maxKeys-1])
		}
	}
}

func TestKeyID(t *testing.T) {
	// header {"alg":"RS256","kid":"abc"}, then a payload and a signature that are not read.
	if kid, err := keyID("eyJhbGciOiJSUzI1NiIsImtpZCI6ImFiYyJ9.e30.c2ln"); err != nil || kid != "abc" {
		t.Errorf("keyID = %q, %v", kid, err)
	}
	if _, err := keyID("not-a-jwt"); err == nil {
		t.Error("a token without a header gave a kid")
	}
}

// The seed incident's aftermath, as a timeline: b signs with a key a does not serve (drift), then
// is restarted to sign with the shared key and verify both. Tokens b signed before still reach a,
// which rejects them until they expire: the condition stays True, with a reason of its own that
// names the key, the server that rejects it and when it clears, and only then says the keys agree.
func TestAssessDriftAftermath(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	const issuer = "https://kubernetes.default.svc"
	ep := func(url, signs string, serves ...string) Endpoint {
		return Endpoint{URL: url, Issuer: issuer, KeyIDs: serves, SigningKeyID: signs}
	}
	drifting := Observation{Endpoints: []Endpoint{ep("https://a", "k1", "k1"), ep("https://b", "k2", "k2")}}
	restarted := Observation{Endpoints: []Endpoint{ep("https://a", "k1", "k1"), ep("https://b", "k1", "k1", "k2")}}
	fixed := Observation{Endpoints: []Endpoint{ep("https://a", "k1", "k1", "k2"), ep("https://b", "k1", "k1", "k2")}}

	var keys []v1alpha1.ServedKey
	for _, step := range []struct {
		at        time.Duration
		obs       Observation
		drift     string
		says      string
		wantCheck time.Duration // when the assessment asks to look again; 0 for never
	}{
		{at: 0, obs: drifting, drift: v1alpha1.ReasonSigningKeyNotShared},
		{at: 10 * time.Minute, obs: restarted, drift: v1alpha1.ReasonSignedTokensStillRejected,
			says: "tokens signed with key k2 until it stopped signing are rejected by https://a until 2026-12-02T10:10:00Z", wantCheck: 70 * time.Minute},
		{at: 40 * time.Minute, obs: restarted, drift: v1alpha1.ReasonSignedTokensStillRejected, says: "until 2026-12-02T10:10:00Z", wantCheck: 70 * time.Minute},
		{at: 70 * time.Minute, obs: restarted, says: "Every API server accepts the tokens the others sign"},
	} {
		a := Assess(step.obs, keys, time.Hour, t0.Add(step.at))
		keys = a.Keys
		if a.Drift != step.drift || !strings.Contains(a.Message, step.says) {
			t.Errorf("at +%v: drift %q (%s), want %q saying %q", step.at, a.Drift, a.Message, step.drift, step.says)
		}
		if want := t0.Add(step.wantCheck); (step.wantCheck == 0) != a.Recheck.IsZero() || (step.wantCheck != 0 && !a.Recheck.Equal(want)) {
			t.Errorf("at +%v: recheck %v, want %v", step.at, a.Recheck, step.wantCheck)
		}
	}

	// Had a served k2 as well, b's old tokens would be accepted everywhere: no aftermath.
	keys = Assess(drifting, nil, time.Hour, t0).Keys
	if a := Assess(fixed, keys, time.Hour, t0.Add(10*time.Minute)); a.Drift != "" {
		t.Errorf("every server serves k2: drift %q (%s), want none", a.Drift, a.Message)
	}

	// A more severe drift comes first: b still signs with k2 while a serves only k1.
	keys = Assess(drifting, nil, time.Hour, t0).Keys
	keys = Assess(restarted, keys, time.Hour, t0.Add(10*time.Minute)).Keys
	if a := Assess(drifting, keys, time.Hour, t0.Add(20*time.Minute)); a.Drift != v1alpha1.ReasonSigningKeyNotShared ||
		!strings.Contains(a.Message, "tokens signed with key k2") {
		t.Errorf("drifting again during the aftermath: %q (%s), want SigningKeyNotShared first, the aftermath told too", a.Drift, a.Message)
	}
}
