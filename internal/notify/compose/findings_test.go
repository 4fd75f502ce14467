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

func TestFinding(t *testing.T) {
	now := notifytest.At
	day := 24 * time.Hour
	h := policy.Hygiene{MaxLifetime: 730 * day, MaxLiveSecrets: 2, UnusedAfter: 90 * day}
	w := notifytest.Watch()
	cred := func(src v1alpha1.CredentialSource, typ v1alpha1.CredentialType, start, end time.Duration) v1alpha1.Credential {
		s := metav1.NewTime(now.Add(start))
		return v1alpha1.Credential{KeyID: "0f6c2b1e-key", DisplayName: "ci", Type: typ, Source: src, StartTime: &s, EndTime: metav1.NewTime(now.Add(end))}
	}
	scanned := func(c v1alpha1.Credential) v1alpha1.Credential {
		c.AppID, c.AppDisplayName = "7d1e5a3c-0000-4000-8000-000000000001", "payments"
		return c
	}
	app, sp := v1alpha1.SourceApplication, v1alpha1.SourceServicePrincipal
	pw, cert := v1alpha1.CredentialTypePassword, v1alpha1.CredentialTypeCertificate
	tests := map[string]struct {
		f    policy.Finding
		want string
	}{
		"long-lived, on a watch of one application": {policy.Finding{Kind: v1alpha1.FindingLongLived, Credential: cred(app, pw, -10*day, 3640*day)},
			`Secret "ci" (keyId 0f6c2b1e-key, on the Application object) of "aks-prod-sp" (appId 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c) is valid for 3650 days (2026-11-22T09:00:00Z to 2036-11-19T09:00:00Z), ` +
				`longer than the 730 days the policy allows: add a shorter-lived one, move its users to it, then remove this one (az ad app credential delete --id 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c --key-id 0f6c2b1e-key)`},
		"a certificate that never expires, in a tenant scan": {policy.Finding{Kind: v1alpha1.FindingNeverExpires, Credential: scanned(cred(app, cert, -day, 100000*day))},
			`Certificate "ci" (keyId 0f6c2b1e-key, on the Application object of "payments" (appId 7d1e5a3c-0000-4000-8000-000000000001)) never expires (it ends at 2300-09-17T09:00:00Z): ` +
				`a leaked copy would work for ever; add one that expires, move its users to it, then remove this one (az ad app credential delete --id 7d1e5a3c-0000-4000-8000-000000000001 --key-id 0f6c2b1e-key --cert)`},
		"a secret on the service principal": {policy.Finding{Kind: v1alpha1.FindingServicePrincipalSecret, Credential: scanned(cred(sp, pw, -day, 300*day))},
			`Secret "ci" (keyId 0f6c2b1e-key, on the ServicePrincipal object of "payments" (appId 7d1e5a3c-0000-4000-8000-000000000001)) is on the service principal, where the portal's app registration does not show it ` +
				`(az ad sp credential reset puts secrets there): if nothing signs in with it, remove it (az ad sp credential delete --id 7d1e5a3c-0000-4000-8000-000000000001 --key-id 0f6c2b1e-key)`},
		"many secrets": {policy.Finding{Kind: v1alpha1.FindingManySecrets, LiveSecrets: 4, Credential: v1alpha1.Credential{AppID: "7d1e5a3c-0000-4000-8000-000000000001", AppDisplayName: "payments"}},
			`"payments" (appId 7d1e5a3c-0000-4000-8000-000000000001) holds 4 client secrets that have not expired, more than the 2 the policy allows: remove those nothing signs in with ` +
				`(az ad app credential list --id 7d1e5a3c-0000-4000-8000-000000000001 and az ad sp credential list --id 7d1e5a3c-0000-4000-8000-000000000001 show them)`},
		"never used": {policy.Finding{Kind: v1alpha1.FindingNeverUsed, Credential: cred(app, pw, -200*day, 300*day)},
			`Secret "ci" (keyId 0f6c2b1e-key, on the Application object) of "aks-prod-sp" (appId 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c) has not signed in since it was created at 2026-05-16T09:00:00Z, as far as Graph's sign-in report knows, ` +
				`longer than the 90 days the policy allows: if nothing needs it, remove it (az ad app credential delete --id 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c --key-id 0f6c2b1e-key)`},
		"unused": {policy.Finding{Kind: v1alpha1.FindingUnused, Credential: func() v1alpha1.Credential {
			c := cred(sp, cert, -400*day, 300*day)
			at := metav1.NewTime(now.Add(-120 * day))
			c.LastSignIn = &at
			return c
		}()},
			`Certificate "ci" (keyId 0f6c2b1e-key, on the ServicePrincipal object) of "aks-prod-sp" (appId 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c) last signed in at 2026-08-04T09:00:00Z, longer ago than the 90 days the policy allows: ` +
				`if nothing needs it any more, let it expire or remove it (az ad sp credential delete --id 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c --key-id 0f6c2b1e-key --cert)`},
		"not yet valid": {policy.Finding{Kind: v1alpha1.FindingNotYetValid, Credential: cred(app, pw, 2*day, 300*day)},
			`Secret "ci" (keyId 0f6c2b1e-key, on the Application object) of "aks-prod-sp" (appId 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c) is not valid before 2026-12-04T09:00:00Z: nothing can sign in with it until then`},
		"starts after it ends": {policy.Finding{Kind: v1alpha1.FindingStartAfterEnd, Credential: cred(sp, cert, 2*day, day)},
			`Certificate "ci" (keyId 0f6c2b1e-key, on the ServicePrincipal object) of "aks-prod-sp" (appId 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c) starts at 2026-12-04T09:00:00Z, after it ends at 2026-12-03T09:00:00Z: ` +
				`nothing can ever sign in with it; remove it (az ad sp credential delete --id 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c --key-id 0f6c2b1e-key --cert)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := compose.Finding(w, tc.f, h); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
