package policy

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

func onSP(c v1alpha1.Credential) v1alpha1.Credential {
	c.Source = v1alpha1.SourceServicePrincipal
	return c
}

func endingAt(c v1alpha1.Credential, end time.Time) v1alpha1.Credential {
	c.EndTime = metav1.NewTime(end)
	return c
}

func TestFindingsOf(t *testing.T) {
	pw, cert := v1alpha1.CredentialTypePassword, v1alpha1.CredentialTypeCertificate
	never := time.Date(2299, time.December, 31, 0, 0, 0, 0, time.UTC)
	noStart := scanned("a", "no-start", pw, 0, 5000*day)
	noStart.StartTime = nil
	tests := []struct {
		name  string
		creds []v1alpha1.Credential
		saml  string // the appId whose service principal is SAML
		h     Hygiene
		want  []string // kind/app/key, in the order listed
	}{
		{name: "a two-year secret, Graph's default, across a leap day", creds: []v1alpha1.Credential{scanned("a", "k", pw, -day, 730*day)}},
		{name: "a second over the slack", creds: []v1alpha1.Credential{scanned("a", "k", pw, -day, 730*day+time.Second)},
			want: []string{"LongLived/a/k"}},
		{name: "a long certificate too", creds: []v1alpha1.Credential{scanned("a", "k", cert, -1000*day, 100*day)},
			want: []string{"LongLived/a/k"}},
		{name: "the policy's own lifetime", h: Hygiene{MaxLifetime: 90 * day, MaxLiveSecrets: 2},
			creds: []v1alpha1.Credential{scanned("a", "k", pw, -10*day, 85*day)}, want: []string{"LongLived/a/k"}},
		{name: "expired: the expiry's business, not hygiene's", creds: []v1alpha1.Credential{scanned("a", "k", pw, -5000*day, -day)}},
		{name: "an unknown start says nothing of a lifetime", creds: []v1alpha1.Credential{noStart}},
		{name: "the portal's never", creds: []v1alpha1.Credential{endingAt(scanned("a", "k", pw, -day, 0), never)},
			want: []string{"NeverExpires/a/k"}},
		{name: "a secret on the service principal", creds: []v1alpha1.Credential{onSP(scanned("a", "k", pw, -day, 300*day))},
			want: []string{"ServicePrincipalSecret/a/k"}},
		{name: "a certificate on the service principal is not a secret", creds: []v1alpha1.Credential{onSP(scanned("a", "k", cert, -day, 300*day))}},
		{name: "SAML: the service principal's long secret and certificate are by design", saml: "a",
			creds: []v1alpha1.Credential{onSP(scanned("a", "k", pw, -day, 3000*day)), onSP(scanned("a", "c", cert, -day, 1200*day)),
				scanned("a", "app-secret", pw, -day, 3000*day), onSP(scanned("b", "other", pw, -day, 300*day))},
			want: []string{"ServicePrincipalSecret/b/other", "LongLived/a/app-secret"}},
		{name: "not yet valid", creds: []v1alpha1.Credential{scanned("a", "k", pw, 3*day, 300*day)},
			want: []string{"NotYetValid/a/k"}},
		{name: "starts after it ends, expired or not", creds: []v1alpha1.Credential{scanned("a", "k", pw, -day, -2*day), scanned("b", "k", pw, 30*day, 20*day)},
			want: []string{"StartAfterEnd/a/k", "StartAfterEnd/b/k"}},
		{name: "three live secrets over two objects", creds: []v1alpha1.Credential{
			scanned("a", "1", pw, -day, 300*day), scanned("a", "2", pw, -day, 300*day), onSP(scanned("a", "3", pw, -day, 300*day)),
			scanned("a", "expired", pw, -400*day, -day), scanned("a", "cert", cert, -day, 300*day), scanned("b", "1", pw, -day, 300*day)},
			want: []string{"ServicePrincipalSecret/a/3", "ManySecrets/a/"}},
		{name: "sign-ins read: unused, never used, in use, too young to tell", h: usage,
			creds: []v1alpha1.Credential{signedIn(scanned("a", "idle", pw, -200*day, 300*day), -100*day), scanned("a", "never", pw, -200*day, 300*day),
				signedIn(scanned("b", "used", pw, -200*day, 300*day), -day), scanned("b", "young", pw, -10*day, 300*day)},
			want: []string{"NeverUsed/a/never", "Unused/a/idle"}},
		{name: "sign-ins not read: nothing is unused", creds: []v1alpha1.Credential{scanned("a", "never", pw, -200*day, 300*day)}},
		{name: "findings of every kind in their order", creds: []v1alpha1.Credential{
			scanned("z", "later", pw, 2*day, 300*day), scanned("z", "long", pw, -day, 900*day), onSP(scanned("y", "sp", pw, -day, 30*day)),
			endingAt(scanned("x", "never", cert, -day, 0), never), scanned("w", "backwards", cert, 5*day, 4*day)},
			want: []string{"StartAfterEnd/w/backwards", "NeverExpires/x/never", "ServicePrincipalSecret/y/sp", "LongLived/z/long", "NotYetValid/z/later"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.h
			if h == (Hygiene{}) {
				h = Hygiene{MaxLifetime: DefaultMaxLifetime, MaxLiveSecrets: DefaultMaxLiveSecrets}
			}
			f := FindingsOf(tt.creds, func(app string) bool { return app == tt.saml }, now, h, MaxListedFindings)
			var got []string
			counts := map[v1alpha1.FindingKind]int32{}
			for _, fd := range f.Listed {
				got = append(got, fmt.Sprintf("%s/%s/%s", fd.Kind, fd.Credential.AppID, fd.Credential.KeyID))
				counts[fd.Kind]++
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("findings %v, want %v", got, tt.want)
			}
			if !reflect.DeepEqual(f.Counts, counts) || f.Total() != int32(len(tt.want)) {
				t.Errorf("counts %v (total %d), want %v", f.Counts, f.Total(), counts)
			}
		})
	}
}

// usage is the default policy of a watch that reads sign-ins.
var usage = Hygiene{MaxLifetime: DefaultMaxLifetime, MaxLiveSecrets: 3, UnusedAfter: DefaultUnusedAfter, SignInsKnown: true}

func signedIn(c v1alpha1.Credential, at time.Duration) v1alpha1.Credential {
	t := metav1.NewTime(now.Add(at))
	c.LastSignIn = &t
	return c
}

// An unused credential is found once it and its last sign-in are older than unusedAfter.
func TestFindingsNextChangeOfUse(t *testing.T) {
	c := []v1alpha1.Credential{signedIn(scanned("a", "k", v1alpha1.CredentialTypePassword, -200*day, 300*day), -80*day)}
	f := FindingsOf(c, func(string) bool { return false }, now, usage, 50)
	if want := now.Add(10 * day); f.Total() != 0 || !f.NextChange.Equal(want) {
		t.Errorf("findings %v, next change %v; want none until %v", f.Counts, f.NextChange, want)
	}
}

func TestFindingsOfBoundsTheList(t *testing.T) {
	var creds []v1alpha1.Credential
	for i := range 60 {
		creds = append(creds, onSP(scanned(fmt.Sprintf("app-%02d", i), "k", v1alpha1.CredentialTypePassword, -day, 100*day)))
	}
	f := FindingsOf(creds, func(string) bool { return false }, now, Hygiene{MaxLifetime: DefaultMaxLifetime, MaxLiveSecrets: 2}, 50)
	if len(f.Listed) != 50 || f.Unlisted != 10 || f.Counts[v1alpha1.FindingServicePrincipalSecret] != 60 {
		t.Errorf("listed %d, unlisted %d, counted %d; want 50, 10, 60", len(f.Listed), f.Unlisted, f.Counts[v1alpha1.FindingServicePrincipalSecret])
	}
	if f.Listed[0].Credential.AppID != "app-00" || f.Listed[49].Credential.AppID != "app-49" {
		t.Errorf("listed from %s to %s, want app-00 to app-49", f.Listed[0].Credential.AppID, f.Listed[49].Credential.AppID)
	}
}

func TestFindingsNextChange(t *testing.T) {
	pw := v1alpha1.CredentialTypePassword
	creds := []v1alpha1.Credential{
		scanned("a", "1", pw, -day, 40*day), scanned("a", "2", pw, -day, 300*day), scanned("a", "3", pw, 3*day, 300*day),
	}
	f := FindingsOf(creds, func(string) bool { return false }, now, Hygiene{MaxLifetime: DefaultMaxLifetime, MaxLiveSecrets: 2}, 50)
	// "3" starts in three days, when NotYetValid goes; ManySecrets goes when "1" ends.
	if want := now.Add(3 * day); !f.NextChange.Equal(want) {
		t.Errorf("next change %v, want %v", f.NextChange, want)
	}
	later := FindingsOf(creds, func(string) bool { return false }, now.Add(41*day), Hygiene{MaxLifetime: DefaultMaxLifetime, MaxLiveSecrets: 2}, 50)
	if later.Total() != 0 {
		t.Errorf("after a secret ended and the next started: %v, want none", later.Counts)
	}
}

func TestHygieneOf(t *testing.T) {
	h, err := HygieneOf(nil)
	if err != nil || h.MaxLifetime != 730*day || h.MaxLiveSecrets != 2 {
		t.Errorf("default %+v, %v", h, err)
	}
	five := int32(5)
	h, err = HygieneOf(&v1alpha1.Hygiene{MaxLifetime: "1w", MaxLiveSecrets: &five})
	if err != nil || h.MaxLifetime != 7*day || h.MaxLiveSecrets != 5 {
		t.Errorf("set %+v, %v", h, err)
	}
	if h, err := HygieneOf(&v1alpha1.Hygiene{UnusedAfter: "30d"}); err != nil || h.UnusedAfter != 30*day || h.MaxLifetime != 730*day {
		t.Errorf("unusedAfter set %+v, %v", h, err)
	}
	if h, _ := HygieneOf(nil); h.UnusedAfter != DefaultUnusedAfter {
		t.Errorf("default unusedAfter %v", h.UnusedAfter)
	}
	if _, err := HygieneOf(&v1alpha1.Hygiene{MaxLifetime: "2y"}); err == nil {
		t.Error("2y parsed; want an error")
	}
}
