package policy

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

func TestMarkInUse(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-ago)); return &t }
	for _, tc := range []struct {
		name     string
		signedIn *metav1.Time
		inUse    bool
		next     time.Time
	}{
		{"never signed in", nil, false, time.Time{}},
		{"an hour ago", at(time.Hour), true, now.Add(DefaultActiveWithin - time.Hour)},
		{"just within", at(DefaultActiveWithin - time.Second), true, now.Add(time.Second)},
		{"exactly the window ago", at(DefaultActiveWithin), false, time.Time{}},
		{"a month ago", at(30 * 24 * time.Hour), false, time.Time{}},
	} {
		creds := []v1alpha1.Credential{{KeyID: "k", LastSignIn: tc.signedIn, InUse: !tc.inUse}}
		next := MarkInUse(creds, DefaultActiveWithin, now)
		if creds[0].InUse != tc.inUse || !next.Equal(tc.next) {
			t.Errorf("%s: in use %v, next %v; want %v, %v", tc.name, creds[0].InUse, next, tc.inUse, tc.next)
		}
	}
}

func TestInUseSummary(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	cred := func(key string, ago time.Duration, inUse bool) v1alpha1.Credential {
		at := metav1.NewTime(now.Add(-ago))
		return v1alpha1.Credential{KeyID: key, LastSignIn: &at, InUse: inUse}
	}
	for _, tc := range []struct {
		creds []v1alpha1.Credential
		want  string
	}{
		{nil, ""},
		{[]v1alpha1.Credential{cred("0a1b2c3d-0000", time.Hour, false)}, ""},
		{[]v1alpha1.Credential{cred("old00000-0000", 3*time.Hour, true), cred("new00000-0000", time.Hour, true)}, "new00000,old00000"},
		{[]v1alpha1.Credential{cred("a", 1, true), cred("b", 2, true), cred("c", 3, true), cred("d", 4, true), cred("e", 5, true)}, "a,b,c,+2"},
	} {
		if got := InUseSummary(tc.creds); got != tc.want {
			t.Errorf("InUseSummary = %q, want %q", got, tc.want)
		}
	}
}

// Sign-ins are evidence while read well, and for a day after reads began to fail; never when the
// report is refused for good.
func TestSignInsKnown(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	read := metav1.NewTime(now.Add(-time.Hour))
	cond := func(status metav1.ConditionStatus, reason string, since time.Duration) *metav1.Condition {
		return &metav1.Condition{Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(now.Add(-since))}
	}
	for _, tc := range []struct {
		name string
		read *metav1.Time
		cond *metav1.Condition
		want bool
	}{
		{"read", &read, cond(metav1.ConditionTrue, v1alpha1.ReasonSignInsRead, 30*24*time.Hour), true},
		{"never read", nil, nil, false},
		{"failing for an hour", &read, cond(metav1.ConditionFalse, v1alpha1.ReasonThrottled, time.Hour), true},
		{"failing for a day", &read, cond(metav1.ConditionFalse, v1alpha1.ReasonThrottled, RetireMargin), false},
		{"no licence", &read, cond(metav1.ConditionFalse, v1alpha1.ReasonSignInsUnavailable, time.Minute), false},
		{"refused by the identity", &read, cond(metav1.ConditionFalse, v1alpha1.ReasonIdentityNotAllowed, time.Minute), false},
	} {
		if got := SignInsKnown(tc.read, tc.cond, now); got != tc.want {
			t.Errorf("%s: known %v, want %v", tc.name, got, tc.want)
		}
	}
}
