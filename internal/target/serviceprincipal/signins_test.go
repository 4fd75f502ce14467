package serviceprincipal

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/policy/policytest"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

// With spec.usage.signIns, a check reads when each credential last signed in, at most hourly, as
// the identity allows; a tenant without the licence, a cloud without the report, a refusal and a
// failure each say so on SignInsRead and keep what was known.
func TestRecordSignIns(t *testing.T) {
	signedIn := policytest.Now.Add(-2 * time.Hour)
	known := metav1.NewTime(policytest.Now.Add(-48 * time.Hour))
	for _, tc := range []struct {
		name        string
		ops         []v1alpha1.Operation
		unavailable string
		readAgo     time.Duration // since the last ask; 0: never asked
		answer      error
		wantReason  string
		wantAsked   bool
		wantLast    *metav1.Time
	}{
		{name: "read", ops: []v1alpha1.Operation{v1alpha1.OperationReadSignIns}, wantReason: v1alpha1.ReasonSignInsRead, wantAsked: true,
			wantLast: &metav1.Time{Time: signedIn}},
		{name: "asked within the hour", ops: []v1alpha1.Operation{v1alpha1.OperationReadSignIns}, readAgo: 30 * time.Minute, wantLast: &known},
		{name: "asked over an hour ago", ops: []v1alpha1.Operation{v1alpha1.OperationReadSignIns}, readAgo: 61 * time.Minute,
			wantReason: v1alpha1.ReasonSignInsRead, wantAsked: true, wantLast: &metav1.Time{Time: signedIn}},
		{name: "not allowed", wantReason: v1alpha1.ReasonIdentityNotAllowed, wantLast: &known},
		{name: "another cloud", ops: []v1alpha1.Operation{v1alpha1.OperationReadSignIns}, unavailable: "not in this cloud",
			wantReason: v1alpha1.ReasonSignInsUnavailable, wantLast: &known},
		{name: "no licence", ops: []v1alpha1.Operation{v1alpha1.OperationReadSignIns}, answer: fmt.Errorf("reading: %w", graph.ErrSignInsUnlicensed),
			wantReason: v1alpha1.ReasonSignInsUnavailable, wantAsked: true, wantLast: &known},
		{name: "refused", ops: []v1alpha1.Operation{v1alpha1.OperationReadSignIns}, answer: &azerr.Error{Kind: azerr.KindForbidden, Status: 403, Needs: "AuditLog.Read.All"},
			wantReason: v1alpha1.ReasonAccessDenied, wantAsked: true, wantLast: &known},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := false
			k := Kind{Events: &targettest.Events{}, MailsOwners: func(*v1alpha1.CredentialWatch, access.Identity) bool { return false }, SignInsUnavailable: tc.unavailable, Azure: fakeAzure{app{SignInsFunc: func() ([]graph.KeyUse, error) {
				asked = true
				return []graph.KeyUse{{KeyID: "K", Source: graph.Application, LastSignIn: signedIn}}, tc.answer
			}}}}
			obj := &v1alpha1.CredentialWatch{Spec: v1alpha1.CredentialWatchSpec{Usage: &v1alpha1.Usage{SignIns: true}}}
			obj.Status.Credentials = []v1alpha1.Credential{{KeyID: "k", Source: v1alpha1.SourceApplication, LastSignIn: &known}}
			obj.Status.NextCheckTime = &metav1.Time{Time: policytest.Now.Add(time.Hour)}
			if tc.readAgo > 0 {
				at := metav1.NewTime(policytest.Now.Add(-tc.readAgo))
				obj.Status.SignInsReadTime = &at
			}
			k.Record(context.Background(), obj, Found{AppID: "a", Snap: snap, Grant: grant(tc.ops...), ID: azure.Identity{TenantID: "t"}}, policytest.Now)
			if asked != tc.wantAsked {
				t.Errorf("Graph asked: %v, want %v", asked, tc.wantAsked)
			}
			if got := obj.Status.Credentials[0].LastSignIn; !got.Equal(tc.wantLast) {
				t.Errorf("lastSignIn %v, want %v", got, tc.wantLast)
			}
			c := target.Condition(obj, v1alpha1.ConditionSignInsRead)
			if tc.wantReason != "" && c.Reason != tc.wantReason {
				t.Errorf("SignInsRead %s %q, want reason %s", c.Reason, c.Message, tc.wantReason)
			}
			if tc.wantReason == v1alpha1.ReasonSignInsUnavailable && tc.answer != nil && !strings.Contains(c.Message, "P1 or P2") {
				t.Errorf("SignInsRead says %q, want the licence named", c.Message)
			}
		})
	}

	// A watch moved to another application reads its sign-ins at once: what was read of the
	// first says nothing of the second's credentials.
	moved := &v1alpha1.CredentialWatch{Spec: v1alpha1.CredentialWatchSpec{Usage: &v1alpha1.Usage{SignIns: true}}}
	recently := metav1.NewTime(policytest.Now.Add(-10 * time.Minute))
	moved.Status.SignInsReadTime = &recently
	moved.Status.ServicePrincipal = &v1alpha1.ServicePrincipalStatus{AppID: "before"}
	moved.Status.Credentials = []v1alpha1.Credential{{KeyID: "k", Source: v1alpha1.SourceApplication, LastSignIn: &known}}
	moved.Status.NextCheckTime = &metav1.Time{Time: policytest.Now.Add(time.Hour)}
	asked := false
	k := Kind{Events: &targettest.Events{}, MailsOwners: func(*v1alpha1.CredentialWatch, access.Identity) bool { return false },
		Azure: fakeAzure{app{SignInsFunc: func() ([]graph.KeyUse, error) { asked = true; return nil, nil }}}}
	k.Record(context.Background(), moved, Found{AppID: "a", Snap: snap, Grant: grant(v1alpha1.OperationReadSignIns), ID: azure.Identity{TenantID: "t"}}, policytest.Now)
	if !asked || moved.Status.Credentials[0].LastSignIn != nil {
		t.Errorf("moved to another application: asked %v, lastSignIn %v; want read at once, nothing carried over", asked, moved.Status.Credentials[0].LastSignIn)
	}

	// Without spec.usage.signIns nothing is read, and what was is gone.
	obj := &v1alpha1.CredentialWatch{}
	obj.Status.Credentials = []v1alpha1.Credential{{KeyID: "k", LastSignIn: &known}}
	obj.Status.NextCheckTime = &metav1.Time{Time: policytest.Now.Add(time.Hour)}
	Kind{Events: &targettest.Events{}, MailsOwners: func(*v1alpha1.CredentialWatch, access.Identity) bool { return false }}.Record(context.Background(), obj, Found{AppID: "a", Snap: snap, Grant: grant(v1alpha1.OperationReadSignIns)}, policytest.Now)
	if obj.Status.Credentials[0].LastSignIn != nil || target.Condition(obj, v1alpha1.ConditionSignInsRead).Type != "" {
		t.Errorf("without usage: %+v", obj.Status)
	}
}
