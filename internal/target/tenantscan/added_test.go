package tenantscan

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

// ownByName is the rotation pacing records as a func: a secret named own-… is credwatch's.
type ownByName func(name string) (bool, error)

func (f ownByName) OwnSecret(_ context.Context, _, _, name string) (bool, error) { return f(name) }

func TestUnitAScanCountsWhatWasAdded(t *testing.T) {
	events := &targettest.Events{}
	var counted []string
	calls := 0
	s := Scan{Events: events, Store: NewStore(), Added: func(tenant string, n int) {
		calls++
		for range n {
			counted = append(counted, tenant)
		}
	},
		Own: ownByName(func(name string) (bool, error) {
			if name == "unknowable" {
				return false, errors.New("the API server is away")
			}
			return strings.HasPrefix(name, "own-"), nil
		})}
	obj := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "scan"},
		Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "tenant-1"}}}}
	cred := func(key, name string, typ v1alpha1.CredentialType) v1alpha1.Credential {
		return v1alpha1.Credential{KeyID: key, DisplayName: name, Type: typ, Source: v1alpha1.SourceApplication, AppID: "app-" + key, AppDisplayName: "payments",
			EndTime: metav1.NewTime(now.AddDate(1, 0, 0))}
	}
	scan := func(creds ...v1alpha1.Credential) {
		t.Helper()
		s.Record(context.Background(), obj, Found{Credentials: creds}, target.TenantSignIns{}, now)
	}
	scan(cred("k1", "ci", v1alpha1.CredentialTypePassword))
	if got := events.Take(); len(got) != 0 || obj.Status.TenantScan.Added != 0 || calls != 1 || len(counted) != 0 {
		t.Fatalf("the first scan told %v, counted %d (metric %d in %d calls); want the tenant's count started at zero", got, obj.Status.TenantScan.Added, len(counted), calls)
	}
	scan(cred("k1", "ci", v1alpha1.CredentialTypePassword), cred("k2", "keep-access", v1alpha1.CredentialTypePassword),
		cred("k3", "own-20261207T090000Z", v1alpha1.CredentialTypePassword), cred("k4", "own-cert", v1alpha1.CredentialTypeCertificate),
		cred("k5", "unknowable", v1alpha1.CredentialTypePassword))
	st := obj.Status.TenantScan
	if st.Added != 3 || len(st.RecentlyAdded) != 3 || st.RecentlyAdded[0].KeyID != "k2" || st.RecentlyAdded[0].AddedTime == nil || len(counted) != 3 {
		t.Fatalf("counted %d, listed %+v, metric %v: want k2, the certificate k4 and the unknowable k5, not credwatch's own k3", st.Added, st.RecentlyAdded, counted)
	}
	got := events.Take()
	if len(got) != 3 || !strings.Contains(got[0], `Warning CredentialAdded Secret "keep-access" (keyId k2, on the Application object) appeared on "payments" (appId app-k2)`) ||
		!strings.Contains(got[0], "az ad app credential delete --id app-k2 --key-id k2") {
		t.Errorf("events %q", got)
	}

	// Many more: the count goes on, the list keeps the last 50, the events stop at five.
	var many []v1alpha1.Credential
	for i := range 60 {
		many = append(many, cred(fmt.Sprintf("m%02d", i), "bulk", v1alpha1.CredentialTypePassword))
	}
	scan(many...)
	st = obj.Status.TenantScan
	if st.Added != 63 || len(st.RecentlyAdded) != 50 || st.RecentlyAdded[49].KeyID != "m59" {
		t.Errorf("counted %d, listed %d ending %s", st.Added, len(st.RecentlyAdded), st.RecentlyAdded[len(st.RecentlyAdded)-1].KeyID)
	}
	if got := events.Take(); len(got) != target.MaxStateEvents+1 || !strings.Contains(got[len(got)-1], "55 more credentials were added") {
		t.Errorf("%d events, last %q", len(got), got[len(got)-1])
	}
}
