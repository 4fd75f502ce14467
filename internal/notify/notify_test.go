package notify

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/alertkind"
)

var at = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

func reminder(left time.Duration) Alert {
	return Alert{
		ID: AlertID("uid", "Application/k1", "7d"), Kind: alertkind.Reminder, Severity: SeverityCritical,
		Namespace: "platform", Name: "aks-prod", DisplayName: "aks-prod-sp",
		AppID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c", TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47",
		Credential: &Credential{KeyID: "k1", Type: "Password", Source: "Application", DisplayName: "rbac", Hint: "aPp", End: at.Add(left)},
		Fix:        "az ad app credential reset --id 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c --append",
		At:         at,
	}
}

func TestTitleAndWhen(t *testing.T) {
	tests := map[string]struct {
		a    Alert
		want string
	}{
		"reminder in days":  {a: reminder(6*24*time.Hour + 5*time.Hour), want: "Secret of aks-prod-sp expires in 6 days"},
		"reminder in a day": {a: reminder(36 * time.Hour), want: "Secret of aks-prod-sp expires in 1 day"},
		"reminder in hours": {a: reminder(5 * time.Hour), want: "Secret of aks-prod-sp expires in 5 hours"},
		"expired":           {a: func() Alert { a := reminder(-3 * 24 * time.Hour); a.Kind = alertkind.Expired; return a }(), want: "Secret of aks-prod-sp expired 3 days ago"},
		"expired right now": {a: func() Alert { a := reminder(0); a.Kind = alertkind.Expired; return a }(), want: "Secret of aks-prod-sp expired just now"},
		"resolved":          {a: func() Alert { a := reminder(0); a.Kind = alertkind.Resolved; return a }(), want: "Resolved: the expiring secret of aks-prod-sp is gone"},
		"check failing, SP known by appId only": {
			a:    Alert{Kind: alertkind.CheckFailing, AppID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c"},
			want: "credwatch cannot check the credentials of 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.a.Title(); got != tc.want {
				t.Errorf("Title() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestText(t *testing.T) {
	want := `Secret of aks-prod-sp expires in 6 days

Service principal: aks-prod-sp
App ID: 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c
Tenant: 72f988bf-86f1-41af-91ab-2d7cd011db47
Credential: secret "rbac"
Key ID: k1
Hint: aPp
On object: Application
Expires: 2026-12-08 09:00 UTC (in 6 days)
Watch: platform/aks-prod
Severity: critical

What to do: az ad app credential reset --id 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c --append
`
	if got := Text(reminder(6 * 24 * time.Hour)); got != want {
		t.Errorf("Text() =\n%s\nwant\n%s", got, want)
	}
}

func TestAlertIDIsStablePerStep(t *testing.T) {
	if first, again := AlertID("u", "s", "7d"), AlertID("u", "s", "7d"); first != again {
		t.Error("same alert, different IDs")
	}
	if AlertID("u", "s", "7d") == AlertID("u", "s", "3d") || AlertID("u", "s1", "7d") == AlertID("u", "s", "17d") {
		t.Error("different alerts share an ID")
	}
}

func TestRedact(t *testing.T) {
	hook := "https://hooks.slack.com/services/T000/B000/XXXXSECRET"
	err := fmt.Errorf("posting: %w", &DeliveryError{RetryAfter: time.Second, Err: errors.New(`Post "` + hook + `": dial tcp: connection refused`)})
	got := Redact(err, hook, "")
	if strings.Contains(got.Error(), "XXXXSECRET") || !strings.Contains(got.Error(), "[redacted]") {
		t.Errorf("Redact() = %q", got)
	}
	if RetryAfterOf(got) != time.Second {
		t.Error("Redact lost the error chain")
	}
	plain := errors.New("nothing to hide")
	if Redact(plain, hook) != plain { //nolint:errorlint // the very error given, not one wrapping it, is the point
		t.Error("Redact wrapped an error with nothing to hide")
	}
}

func TestSome(t *testing.T) {
	for _, tc := range []struct {
		names []string
		total int
		want  string
	}{
		{[]string{"a"}, 1, "a"},
		{[]string{"a", "b"}, 5, "a, b and 3 more"},
		{nil, 0, ""},
	} {
		if got := Some(tc.names, tc.total); got != tc.want {
			t.Errorf("Some(%q, %d) = %q, want %q", tc.names, tc.total, got, tc.want)
		}
	}
}
