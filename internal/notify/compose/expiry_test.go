package compose_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/notify/notifytest"
	"github.com/credwatch/credwatch/internal/policy"
)

func TestExpiryConditions(t *testing.T) {
	now := notifytest.At
	day := 24 * time.Hour
	thresholds := policy.Thresholds{Warning: 30 * day, Critical: 7 * day}
	cred := func(keyID, name string, end time.Duration) *v1alpha1.Credential {
		return &v1alpha1.Credential{KeyID: keyID, DisplayName: name, Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication,
			EndTime: metav1.NewTime(now.Add(end))}
	}
	tests := map[string]struct {
		groups                    policy.Groups
		total                     int
		signIns                   bool
		wantExpiring, wantExpired compose.Condition
	}{
		"nothing near": {total: 2,
			wantExpiring: compose.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNoneExpiring, Message: "No credential expires within 30d"},
			wantExpired:  compose.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNoneExpired, Message: "No credential has expired"}},
		"one within warning": {total: 2, groups: policy.Groups{Warning: 1, FirstWarning: cred("k1", "ci", 20*day)},
			wantExpiring: compose.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonWithinWarning,
				Message: `1 credential expires within 30d; the first: secret "ci" (keyId k1, on the Application object) expires at 2026-12-22T09:00:00Z, in 20d`},
			wantExpired: compose.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNoneExpired, Message: "No credential has expired"}},
		"critical and expired": {total: 4, groups: policy.Groups{Warning: 1, Critical: 2, Expired: 1, FirstCritical: cred("k2", "", 2*day),
			FirstWarning: cred("k1", "ci", 20*day), LastExpired: cred("k3", "old", -3*day)},
			wantExpiring: compose.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonWithinCritical,
				Message: `3 credentials expire within 30d (2 within 7d); the first: secret (keyId k2, on the Application object) expires at 2026-12-04T09:00:00Z, in 2d`},
			wantExpired: compose.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCredentialExpired,
				Message: `1 of 4 credentials expired; the latest: secret "old" (keyId k3, on the Application object) expired at 2026-11-29T09:00:00Z, 3d ago`}},
	}
	used := cred("k4", "cluster", 5*day)
	used.InUse, used.LastSignIn = true, &metav1.Time{Time: now.Add(-2 * time.Hour)}
	tests["in use, with sign-ins read"] = struct {
		groups                    policy.Groups
		total                     int
		signIns                   bool
		wantExpiring, wantExpired compose.Condition
	}{total: 2, signIns: true, groups: policy.Groups{Critical: 1, FirstCritical: used, Expired: 1, LastExpired: cred("k5", "old", -day)},
		wantExpiring: compose.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonWithinCritical,
			Message: `1 credential expires within 30d (1 within 7d); the first: secret "cluster" (keyId k4, on the Application object) expires at 2026-12-07T09:00:00Z, in 5d; in use, last signed in at 2026-12-02T07:00:00Z`},
		wantExpired: compose.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCredentialExpired,
			Message: `1 of 2 credentials expired; the latest: secret "old" (keyId k5, on the Application object) expired at 2026-12-01T09:00:00Z, 24h ago; not in use, never signed in`}}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			expiring, expired := compose.ExpiryConditions(tc.groups, tc.total, thresholds, tc.signIns, now)
			if expiring != tc.wantExpiring {
				t.Errorf("Expiring = %+v\nwant       %+v", expiring, tc.wantExpiring)
			}
			if expired != tc.wantExpired {
				t.Errorf("Expired = %+v\nwant      %+v", expired, tc.wantExpired)
			}
		})
	}
}

func TestStateChange(t *testing.T) {
	w := notifytest.Watch()
	c := w.Status.Credentials[0]
	want := `Secret "rbac" (keyId 5e1c9b2a-k1, on the Application object) of "aks-prod-sp" (appId 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c) expires at 2026-12-08T09:00:00Z, in 6d; ` +
		`renew with: az ad app credential reset --id 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c --append`
	if got := compose.StateChange(w, c, notifytest.At); got != want {
		t.Errorf("StateChange =\n%s\nwant\n%s", got, want)
	}
	// A tenant scan's credential names its own application, and is renewed there.
	c.AppID, c.AppDisplayName = "11111111-2222-3333-4444-555555555555", "billing"
	want = `Secret "rbac" (keyId 5e1c9b2a-k1, on the Application object of "billing" (appId 11111111-2222-3333-4444-555555555555)) expires at 2026-12-08T09:00:00Z, in 6d; ` +
		`renew with: az ad app credential reset --id 11111111-2222-3333-4444-555555555555 --append`
	if got := compose.StateChange(w, c, notifytest.At); got != want {
		t.Errorf("StateChange of a scanned credential =\n%s\nwant\n%s", got, want)
	}
}
