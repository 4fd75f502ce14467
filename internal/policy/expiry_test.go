package policy

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

var (
	now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	std = Thresholds{Warning: 30 * day, Critical: 7 * day}
)

func TestStateAt(t *testing.T) {
	tests := map[string]struct {
		left time.Duration
		want v1alpha1.CredentialState
	}{
		"far from expiry":            {left: 90 * day, want: v1alpha1.StateValid},
		"just outside warning":       {left: 30*day + time.Second, want: v1alpha1.StateValid},
		"exactly at warning":         {left: 30 * day, want: v1alpha1.StateWarning},
		"inside warning":             {left: 12 * day, want: v1alpha1.StateWarning},
		"exactly at critical":        {left: 7 * day, want: v1alpha1.StateCritical},
		"one second before expiry":   {left: time.Second, want: v1alpha1.StateCritical},
		"exactly at expiry":          {left: 0, want: v1alpha1.StateExpired},
		"long expired":               {left: -400 * day, want: v1alpha1.StateExpired},
		"critical inside a day":      {left: 3 * time.Hour, want: v1alpha1.StateCritical},
		"valid a second after start": {left: 365 * day, want: v1alpha1.StateValid},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := StateAt(now.Add(tc.left), now, std); got != tc.want {
				t.Errorf("StateAt(now%+v) = %s, want %s", tc.left, got, tc.want)
			}
		})
	}
}

func cred(id string, left time.Duration) v1alpha1.Credential {
	return v1alpha1.Credential{KeyID: id, EndTime: metav1.NewTime(now.Add(left))}
}

func TestEvaluate(t *testing.T) {
	tests := map[string]struct {
		creds          []v1alpha1.Credential
		wantState      v1alpha1.CredentialState
		wantEarliest   string
		wantTransition time.Duration // from now; 0 for none
		wantStates     []v1alpha1.CredentialState
	}{
		"no credentials": {
			wantState: v1alpha1.StateValid,
		},
		"one valid secret: next change at the warning threshold": {
			creds:          []v1alpha1.Credential{cred("a", 100*day)},
			wantState:      v1alpha1.StateValid,
			wantEarliest:   "a",
			wantTransition: 70 * day,
			wantStates:     []v1alpha1.CredentialState{v1alpha1.StateValid},
		},
		"warning secret: next change at critical": {
			creds:          []v1alpha1.Credential{cred("a", 10*day)},
			wantState:      v1alpha1.StateWarning,
			wantEarliest:   "a",
			wantTransition: 3 * day,
			wantStates:     []v1alpha1.CredentialState{v1alpha1.StateWarning},
		},
		"critical secret: next change at expiry": {
			creds:          []v1alpha1.Credential{cred("a", 2*day)},
			wantState:      v1alpha1.StateCritical,
			wantEarliest:   "a",
			wantTransition: 2 * day,
			wantStates:     []v1alpha1.CredentialState{v1alpha1.StateCritical},
		},
		"expired and valid: worst wins, earliest is the expired one, next change from the valid one": {
			creds:          []v1alpha1.Credential{cred("new", 200*day), cred("old", -5*day)},
			wantState:      v1alpha1.StateExpired,
			wantEarliest:   "old",
			wantTransition: 170 * day,
			wantStates:     []v1alpha1.CredentialState{v1alpha1.StateValid, v1alpha1.StateExpired},
		},
		"only expired: nothing will change": {
			creds:        []v1alpha1.Credential{cred("old", -1*time.Second)},
			wantState:    v1alpha1.StateExpired,
			wantEarliest: "old",
			wantStates:   []v1alpha1.CredentialState{v1alpha1.StateExpired},
		},
		"the soonest transition among several": {
			creds:          []v1alpha1.Credential{cred("a", 40*day), cred("b", 31*day), cred("c", 8*day)},
			wantState:      v1alpha1.StateWarning,
			wantEarliest:   "c",
			wantTransition: 1 * day,
			wantStates:     []v1alpha1.CredentialState{v1alpha1.StateValid, v1alpha1.StateValid, v1alpha1.StateWarning},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := Evaluate(tc.creds, now, std)
			if s.State != tc.wantState {
				t.Errorf("State = %s, want %s", s.State, tc.wantState)
			}
			gotEarliest := ""
			if s.Earliest != nil {
				gotEarliest = s.Earliest.KeyID
			}
			if gotEarliest != tc.wantEarliest {
				t.Errorf("Earliest = %q, want %q", gotEarliest, tc.wantEarliest)
			}
			var gotTransition time.Duration
			if !s.NextTransition.IsZero() {
				gotTransition = s.NextTransition.Sub(now)
			}
			if gotTransition != tc.wantTransition {
				t.Errorf("NextTransition = now%+v, want now%+v", gotTransition, tc.wantTransition)
			}
			for i, want := range tc.wantStates {
				if tc.creds[i].State != want {
					t.Errorf("creds[%d].State = %s, want %s", i, tc.creds[i].State, want)
				}
			}
		})
	}
}

func TestHumanDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{12*day + 5*time.Hour, "12d"},
		{48 * time.Hour, "2d"},
		{47*time.Hour + 59*time.Minute, "47h"},
		{time.Hour, "1h"},
		{59 * time.Minute, "59m"},
		{0, "0m"},
		{-30 * time.Second, "0m"},
		{-3 * day, "-3d"},
		{-90 * time.Minute, "-1h"},
	}
	for _, tc := range tests {
		if got := HumanDuration(tc.in); got != tc.want {
			t.Errorf("HumanDuration(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestThresholdsOf(t *testing.T) {
	got, err := ThresholdsOf(v1alpha1.Thresholds{Warning: "2w", Critical: "72h"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Thresholds{Warning: 14 * day, Critical: 72 * time.Hour}); got != want {
		t.Errorf("ThresholdsOf = %+v, want %+v", got, want)
	}
	if _, err := ThresholdsOf(v1alpha1.Thresholds{Warning: "30 days", Critical: "7d"}); err == nil {
		t.Error("ThresholdsOf accepted a warning of \"30 days\"")
	}
}

func TestNextDisplayChange(t *testing.T) {
	tests := map[string]struct {
		left time.Duration // end - now
		want time.Duration // change - now
	}{
		"12d5h left: 12d until 12d remain":     {left: 12*day + 5*time.Hour, want: 5*time.Hour + time.Second},
		"exactly 12d: 11d a second later":      {left: 12 * day, want: time.Second},
		"2d3h: shows 2d, then 47h":             {left: 2*day + 3*time.Hour, want: 3*time.Hour + time.Second},
		"30h30m: 30h, then 29h":                {left: 30*time.Hour + 30*time.Minute, want: 30*time.Minute + time.Second},
		"5m30s: 5m, then 4m":                   {left: 5*time.Minute + 30*time.Second, want: 31 * time.Second},
		"just expired: 0m until a minute past": {left: -10 * time.Second, want: 50 * time.Second},
		"3h past: -3h, then -4h":               {left: -3 * time.Hour, want: time.Hour},
		"47h past: -47h, then -2d":             {left: -47 * time.Hour, want: time.Hour},
		"3d12h past: -3d, then -4d":            {left: -3*day - 12*time.Hour, want: 12 * time.Hour},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			end := now.Add(tc.left)
			got := NextDisplayChange(end, now)
			if got.Sub(now) != tc.want {
				t.Fatalf("NextDisplayChange = now+%v, want now+%v", got.Sub(now), tc.want)
			}
			if HumanDuration(end.Sub(got)) == HumanDuration(end.Sub(now)) {
				t.Errorf("at the change %q still reads %q", HumanDuration(end.Sub(got)), HumanDuration(end.Sub(now)))
			}
			if HumanDuration(end.Sub(got.Add(-time.Second))) != HumanDuration(end.Sub(now)) {
				t.Errorf("a second before the change it reads %q, not %q", HumanDuration(end.Sub(got.Add(-time.Second))), HumanDuration(end.Sub(now)))
			}
		})
	}
}

func TestWorsened(t *testing.T) {
	c := func(id string, s v1alpha1.CredentialState) v1alpha1.Credential {
		return v1alpha1.Credential{KeyID: id, Source: v1alpha1.SourceApplication, State: s}
	}
	sp := c("a", v1alpha1.StateValid)
	sp.Source = v1alpha1.SourceServicePrincipal
	tests := map[string]struct {
		before, after []v1alpha1.Credential
		want          []string
	}{
		"first sight, valid: nothing":           {after: []v1alpha1.Credential{c("a", v1alpha1.StateValid)}},
		"first sight, expiring: worth an event": {after: []v1alpha1.Credential{c("a", v1alpha1.StateWarning)}, want: []string{"a"}},
		"valid to warning":                      {before: []v1alpha1.Credential{c("a", v1alpha1.StateValid)}, after: []v1alpha1.Credential{c("a", v1alpha1.StateWarning)}, want: []string{"a"}},
		"unchanged":                             {before: []v1alpha1.Credential{c("a", v1alpha1.StateCritical)}, after: []v1alpha1.Credential{c("a", v1alpha1.StateCritical)}},
		"better (thresholds lowered)":           {before: []v1alpha1.Credential{c("a", v1alpha1.StateCritical)}, after: []v1alpha1.Credential{c("a", v1alpha1.StateWarning)}},
		"same keyId on the other object is another credential": {
			before: []v1alpha1.Credential{sp}, after: []v1alpha1.Credential{c("a", v1alpha1.StateExpired)}, want: []string{"a"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, w := range Worsened(tc.before, tc.after) {
				got = append(got, w.KeyID)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("Worsened = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNewer(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	old := v1alpha1.Credential{KeyID: "old", Source: v1alpha1.SourceApplication, Type: v1alpha1.CredentialTypePassword, StartTime: at(-360 * day), EndTime: *at(5 * day)}
	hand := v1alpha1.Credential{KeyID: "hand", Source: v1alpha1.SourceApplication, Type: v1alpha1.CredentialTypePassword, StartTime: at(-day), EndTime: *at(300 * day)}
	later := v1alpha1.Credential{KeyID: "later", Source: v1alpha1.SourceApplication, Type: v1alpha1.CredentialTypePassword, StartTime: at(-2 * day), EndTime: *at(700 * day)}
	cert := v1alpha1.Credential{KeyID: "cert", Source: v1alpha1.SourceApplication, Type: v1alpha1.CredentialTypeCertificate, StartTime: at(-day), EndTime: *at(800 * day)}
	all := []v1alpha1.Credential{old, hand, later, cert}
	if n := Newer(old, all); n == nil || n.KeyID != "later" {
		t.Errorf("Newer(old) = %+v, want later, the one ending last", n)
	}
	if n := Newer(later, all); n != nil {
		t.Errorf("Newer(later) = %+v, want none: a certificate renews no secret", n)
	}
}

// A renewed secret that expired is told so once, not every day: old secrets often stay beside
// the new one for good.
