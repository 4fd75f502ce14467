package policy

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

func scanned(app, key string, typ v1alpha1.CredentialType, start, end time.Duration) v1alpha1.Credential {
	s := metav1.NewTime(now.Add(start))
	return v1alpha1.Credential{AppID: app, KeyID: key, Type: typ, Source: v1alpha1.SourceApplication,
		StartTime: &s, EndTime: metav1.NewTime(now.Add(end))}
}

func TestViewScan(t *testing.T) {
	pw, cert := v1alpha1.CredentialTypePassword, v1alpha1.CredentialTypeCertificate
	all := []v1alpha1.Credential{
		scanned("a", "ancient", pw, -800*day, -400*day),     // expired long ago, never renewed
		scanned("b", "old", pw, -400*day, -10*day),          // renewed by b/new
		scanned("b", "new", pw, -11*day, 355*day),           // valid
		scanned("b", "cert", cert, -300*day, 2*day),         // critical: a certificate is not renewed by a secret
		scanned("c", "yesterday", pw, -365*day, -1*day),     // expired
		scanned("d", "soon", pw, -340*day, 20*day),          // warning
		scanned("e", "other-app", pw, -1*day, 90*day),       // valid; does not renew a's
		scanned("a", "older-start", pw, -900*day, -300*day), // also a's: neither Renews the other's start and end both
	}
	before := append([]v1alpha1.Credential(nil), all...)

	v := ViewScan(all, now, std, 3)
	var listed []string
	for _, c := range v.Listed {
		listed = append(listed, c.KeyID+"="+string(c.State))
	}
	// Nearest their expiry first: yesterday (1d), cert (2d), soon (20d); then ancient and
	// older-start, which do not fit.
	if want := []string{"yesterday=Expired", "cert=Critical", "soon=Warning"}; !reflect.DeepEqual(listed, want) {
		t.Errorf("listed %v, want %v", listed, want)
	}
	if v.Unlisted != 2 {
		t.Errorf("unlisted %d, want 2 (ancient, older-start)", v.Unlisted)
	}
	if v.Renewed != 1 {
		t.Errorf("renewed %d, want 1 (b/old, by b/new)", v.Renewed)
	}
	wantCounts := map[v1alpha1.CredentialState]int32{v1alpha1.StateExpired: 3, v1alpha1.StateCritical: 1, v1alpha1.StateWarning: 1, v1alpha1.StateValid: 2}
	if !reflect.DeepEqual(v.Counts, wantCounts) {
		t.Errorf("counts %v, want %v", v.Counts, wantCounts)
	}
	if v.State != v1alpha1.StateExpired || v.Earliest.KeyID != "ancient" {
		t.Errorf("state %s, earliest %s; want Expired and ancient", v.State, v.Earliest.KeyID)
	}
	// The next change of state: soon turns Critical 13 days from now, before cert expires in 2.
	if want := now.Add(2 * day); !v.NextTransition.Equal(want) {
		t.Errorf("next transition %v, want %v (cert expiring)", v.NextTransition, want)
	}
	// However few are listed, each state's most telling credential is known, for the conditions.
	one := ViewScan(all, now, std, 1)
	if len(one.Listed) != 1 || one.FirstCritical == nil || one.FirstCritical.KeyID != "cert" ||
		one.FirstWarning == nil || one.FirstWarning.KeyID != "soon" || one.LastExpired == nil || one.LastExpired.KeyID != "yesterday" {
		t.Errorf("with one listed: first critical %v, first warning %v, last expired %v; want cert, soon, yesterday", one.FirstCritical, one.FirstWarning, one.LastExpired)
	}
	if !reflect.DeepEqual(all, before) {
		t.Error("ViewScan changed the scan it was given")
	}
}

func TestViewScanOfNothing(t *testing.T) {
	v := ViewScan(nil, now, std, MaxListed)
	if v.State != v1alpha1.StateValid || v.Earliest != nil || len(v.Listed) != 0 || !v.NextTransition.IsZero() {
		t.Errorf("empty scan: %+v", v)
	}
}

func TestWorsenedSince(t *testing.T) {
	pw := v1alpha1.CredentialTypePassword
	all := []v1alpha1.Credential{
		scanned("a", "crossed-warning", pw, -300*day, 30*day-30*time.Minute), // Valid an hour ago, Warning now
		scanned("b", "long-expired", pw, -400*day, -100*day),                 // Expired then and now
		scanned("c", "just-expired", pw, -300*day, -time.Minute),             // Critical then, Expired now
		scanned("d", "old", pw, -400*day, -30*time.Minute),                   // renewed by d/new: no news
		scanned("d", "new", pw, -10*day, 300*day),
	}
	var got []string
	for _, c := range WorsenedSince(all, now.Add(-time.Hour), now, std) {
		got = append(got, c.KeyID+"="+string(c.State))
	}
	if want := []string{"just-expired=Expired", "crossed-warning=Warning"}; !reflect.DeepEqual(got, want) {
		t.Errorf("worsened %v, want %v", got, want)
	}
}

// TestReplaced: a credential is replaced only by a newer one of its application and kind that has
// started; where only credwatch moves the consumers, only by the secret its rotation put in use.
func TestReplaced(t *testing.T) {
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	secret := func(app, key string, start, end time.Duration) v1alpha1.Credential {
		s := metav1.NewTime(now.Add(start))
		return v1alpha1.Credential{AppID: app, KeyID: key, Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication,
			StartTime: &s, EndTime: metav1.NewTime(now.Add(end))}
	}
	day := 24 * time.Hour
	old, byHand, future := secret("a", "old", -300*day, 5*day), secret("a", "by-hand", -day, 360*day), secret("a", "future", 10*day, 400*day)
	rotated := secret("a", "rotated", -2*day, 363*day)
	spObject := secret("a", "sp", -day, 360*day)
	spObject.Source = v1alpha1.SourceServicePrincipal
	last := &v1alpha1.LastRotation{KeyID: "rotated"}
	retiring := &v1alpha1.RotationStatus{Step: v1alpha1.StepRetiring, KeyID: "rotated", RetireTime: &metav1.Time{Time: now.Add(7 * day)}}
	unpublished := &v1alpha1.RotationStatus{Step: v1alpha1.StepRetiring, KeyID: "rotated"}
	// A tenant scan's many credentials take the grouped path.
	many := []v1alpha1.Credential{old, byHand}
	for i := range pairwiseUpTo {
		many = append(many, secret(fmt.Sprint("app-", i), "k", -day, 30*day))
	}
	for _, tc := range []struct {
		name         string
		all          []v1alpha1.Credential
		last         *v1alpha1.LastRotation
		rotation     *v1alpha1.RotationStatus
		rotationOnly bool
		want         []string
	}{
		{"renewed by hand", []v1alpha1.Credential{old, byHand}, nil, nil, false, []string{"old"}},
		{"the renewal starts later", []v1alpha1.Credential{old, future}, nil, nil, false, nil},
		{"another application's", []v1alpha1.Credential{old, secret("b", "other", -day, 360*day)}, nil, nil, false, nil},
		{"the other object's", []v1alpha1.Credential{old, spObject}, nil, nil, false, nil},
		{"a cluster moves only when reset", []v1alpha1.Credential{old, byHand}, nil, nil, true, nil},
		{"its last rotation's secret", []v1alpha1.Credential{old, byHand, rotated}, last, nil, true, []string{"old"}},
		{"its rotation's secret, in its Secret", []v1alpha1.Credential{old, byHand, rotated}, nil, retiring, true, []string{"old"}},
		{"its rotation's secret, not handed over yet", []v1alpha1.Credential{old, byHand, rotated}, nil, unpublished, true, nil},
		{"a tenant's many", many, nil, nil, false, []string{"old"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, i := range Replaced(nil, tc.all, tc.last, tc.rotation, tc.rotationOnly, now) {
				got = append(got, tc.all[i].KeyID)
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("replaced %v, want %v", got, tc.want)
			}
		})
	}
}
