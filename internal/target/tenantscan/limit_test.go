package tenantscan

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/target"
)

// listed is a namespace's watches, or a listing that fails.
type listed struct {
	items []v1alpha1.CredentialWatch
	err   error
}

func (l listed) List(context.Context, string, map[string]string) ([]v1alpha1.CredentialWatch, error) {
	return l.items, l.err
}

// A namespace runs at most three tenant scans, the oldest: a fourth is refused naming them, and
// never stops one of them; other kinds, and scans being deleted, do not count.
func TestAtMostThreeScansANamespace(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	watch := func(name string, age time.Duration, scan bool) v1alpha1.CredentialWatch {
		w := v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		if scan {
			w.Spec.Target.TenantScan = &v1alpha1.TenantScanTarget{TenantID: "t"}
		} else {
			w.Spec.Target.ServicePrincipal = &v1alpha1.ServicePrincipalTarget{TenantID: "t", ClientID: "c"}
		}
		return w
	}
	going := watch("going", 9*time.Hour, true)
	going.DeletionTimestamp = &metav1.Time{Time: now}
	ns := listed{items: []v1alpha1.CredentialWatch{watch("a", 3*time.Hour, true), watch("b", 2*time.Hour, true), watch("c", time.Hour, true),
		watch("sp", 5*time.Hour, false), going}}

	err := Allowed(context.Background(), ns, ptr(watch("d", 0, true)))
	if target.ReasonFor(err) != v1alpha1.ReasonTooManyScans || !strings.Contains(err.Error(), "runs 3 tenantScan watches already (a, b, c)") {
		t.Errorf("the fourth scan: %v, want it refused naming the three older ones", err)
	}
	if err := Allowed(context.Background(), ns, &ns.items[2]); err != nil {
		t.Errorf("the third scan: %v, want it allowed", err)
	}
	if err := Allowed(context.Background(), listed{err: errors.New("no API server")}, ptr(watch("d", 0, true))); err == nil || target.ReasonFor(err) == v1alpha1.ReasonTooManyScans {
		t.Errorf("a failed listing: %v, want it said as such", err)
	}
}

func ptr(w v1alpha1.CredentialWatch) *v1alpha1.CredentialWatch { return &w }
