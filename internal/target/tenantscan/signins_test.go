package tenantscan

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/azure/azurefake"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

// A scan that asks for sign-ins reads the tenant's whole report with each scan, as the identity
// allows: what it finds marks the credentials, and old ones nothing used are findings; a refusal,
// a tenant without the licence or a failure says so on SignInsRead, keeps what the last scan knew,
// and calls nothing unused.
func TestUnitScanSignIns(t *testing.T) {
	signedIn := now.Add(-2 * time.Hour)
	known := metav1.NewTime(now.Add(-48 * time.Hour))
	creds := func() []v1alpha1.Credential {
		start := metav1.NewTime(now.Add(-300 * day))
		c := func(key string, src v1alpha1.CredentialSource) v1alpha1.Credential {
			return v1alpha1.Credential{AppID: "a", KeyID: key, Source: src, Type: v1alpha1.CredentialTypePassword, StartTime: &start, EndTime: metav1.NewTime(now.Add(60 * day))}
		}
		return []v1alpha1.Credential{c("used", v1alpha1.SourceApplication), c("idle", v1alpha1.SourceApplication), c("used", v1alpha1.SourceServicePrincipal)}
	}
	grant := func(apps []string, ops ...v1alpha1.Operation) access.Grant {
		if apps == nil {
			apps = []string{v1alpha1.AllApplications}
		}
		return access.Grant{Namespace: access.Namespace{Name: "team"}, Identity: access.Identity{Kind: v1alpha1.KindAzureIdentity, Namespace: "team", Name: "id",
			Spec: v1alpha1.IdentitySpec{Allow: v1alpha1.IdentityAllow{Tenants: []string{"t"}, Applications: apps, Operations: ops}}}}
	}
	for _, tc := range []struct {
		name        string
		apps        []string // allow.applications; nil for all
		readBefore  time.Duration
		notHeld     bool // this process holds no earlier scan, as after a restart
		ops         []v1alpha1.Operation
		unavailable string
		readErr     error
		wantReason  string
		wantSays    string
		wantUsed    bool // the application's "used" secret shows a sign-in
		wantUnused  int32
		wantRead    bool
	}{
		{name: "read", ops: []v1alpha1.Operation{v1alpha1.OperationReadSignIns}, wantReason: v1alpha1.ReasonSignInsRead,
			wantSays: "Read the tenant's sign-in report", wantUsed: true, wantUnused: 2, wantRead: true},
		{name: "the identity refuses", wantReason: v1alpha1.ReasonIdentityNotAllowed, wantSays: "ReadSignIns", wantUsed: true},
		{name: "an identity of some applications only", apps: []string{"a"}, ops: []v1alpha1.Operation{v1alpha1.OperationReadSignIns},
			wantReason: v1alpha1.ReasonIdentityNotAllowed, wantSays: `allow.applications is ["*"]`, wantUsed: true},
		{name: "read within the hour: what was known stands", readBefore: 30 * time.Minute, ops: []v1alpha1.Operation{v1alpha1.OperationReadSignIns},
			wantReason: v1alpha1.ReasonSignInsRead, wantSays: "Read the tenant's sign-in report", wantUsed: true, wantUnused: 2, wantRead: true},
		{name: "read within the hour by a process before a restart: read again", readBefore: 30 * time.Minute, notHeld: true,
			ops: []v1alpha1.Operation{v1alpha1.OperationReadSignIns}, wantReason: v1alpha1.ReasonSignInsRead, wantSays: "Read the tenant's sign-in report",
			wantUsed: true, wantUnused: 2, wantRead: true},
		{name: "no report in this cloud", ops: []v1alpha1.Operation{v1alpha1.OperationReadSignIns}, unavailable: "not available in this cloud",
			wantReason: v1alpha1.ReasonSignInsUnavailable, wantSays: "not available in this cloud", wantUsed: true},
		{name: "no licence", ops: []v1alpha1.Operation{v1alpha1.OperationReadSignIns}, readErr: fmt.Errorf("reading: %w", graph.ErrSignInsUnlicensed),
			wantReason: v1alpha1.ReasonSignInsUnavailable, wantSays: "Sign-ins are not read", wantUsed: true, wantRead: true},
		{name: "a failure", ops: []v1alpha1.Operation{v1alpha1.OperationReadSignIns}, readErr: errors.New("connection reset"),
			wantReason: v1alpha1.ReasonGraphError, wantSays: "tried again with the next check", wantUsed: true, wantRead: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tenant := &azurefake.Tenant{ReadSignInsFunc: func(_ context.Context, visit func(graph.KeyUse)) error {
				visit(graph.KeyUse{AppID: "a", KeyID: "USED", Source: graph.Application, LastSignIn: signedIn})
				visit(graph.KeyUse{AppID: "a", KeyID: "idle", Source: graph.Application})
				// Another application's credential of the same keyId says nothing of this one.
				visit(graph.KeyUse{AppID: "b", KeyID: "idle", Source: graph.Application, LastSignIn: signedIn})
				return tc.readErr
			}}
			obj := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "scan"},
				Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "t"}}, Usage: &v1alpha1.Usage{SignIns: true}}}
			events := &targettest.Events{}
			s := Scan{Events: events, Store: NewStore()}
			before := creds()
			before[0].LastSignIn = &known
			s.Store.Put(target.KeyOf(obj), Found{Credentials: before})

			if tc.readBefore > 0 {
				read := metav1.NewTime(now.Add(-tc.readBefore))
				obj.Status.SignInsReadTime = &read
				target.SetCondition(obj, v1alpha1.ConditionSignInsRead, metav1.ConditionTrue, v1alpha1.ReasonSignInsRead, "Read the tenant's sign-in report", read.Time)
				if !tc.notHeld {
					tenant.ReadSignInsFunc = func(context.Context, func(graph.KeyUse)) error { return errors.New("asked again within the hour") }
				}
			}
			if tc.notHeld {
				s.Store.Forget(target.KeyOf(obj))
			}
			in := target.ReadTenantSignIns(context.Background(), tenant, obj, grant(tc.apps, tc.ops...), tc.unavailable, !tc.notHeld, now)
			s.Record(context.Background(), obj, Found{Applications: 1, ServicePrincipals: 1, Credentials: creds()}, in, now)
			c := target.Condition(obj, v1alpha1.ConditionSignInsRead)
			if c.Reason != tc.wantReason || !strings.Contains(c.Message, tc.wantSays) {
				t.Fatalf("SignInsRead %s %q; want %s saying %q", c.Reason, c.Message, tc.wantReason, tc.wantSays)
			}
			if (obj.Status.SignInsReadTime != nil) != tc.wantRead {
				t.Errorf("signInsReadTime %v; want one only when the report was asked", obj.Status.SignInsReadTime)
			}
			found, _ := s.Store.Get(target.KeyOf(obj))
			if got := found.Credentials[0].LastSignIn; (got != nil) != tc.wantUsed || found.Credentials[2].LastSignIn != nil {
				t.Errorf("last sign-ins %v, %v; want the application's secret's only", got, found.Credentials[2].LastSignIn)
			}
			obj.Status.LastCheckTime = &metav1.Time{Time: now}
			s.Evaluate(obj, obj.DeepCopy(), policy.Thresholds{Warning: 30 * day, Critical: 7 * day}, policy.Hygiene{MaxLifetime: 730 * day, MaxLiveSecrets: 5, UnusedAfter: 90 * day}, now)
			var unused int32
			if f := obj.Status.Findings; f != nil {
				unused = f.NeverUsed + f.Unused
			}
			if unused != tc.wantUnused {
				t.Errorf("findings %+v; want %d credentials nothing uses", obj.Status.Findings, tc.wantUnused)
			}
		})
	}
}
