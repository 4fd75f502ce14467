package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// Someone asks for a check of every watch of a namespace, again and again: each watch is read at
// most once a minute, and the namespace at most target.EarlyChecksPerNamespace times a minute; the
// checks held back are made when the allowance refills.
func TestAskedChecksArePaced(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 200*day, 400*day, 300*day)
	ns := newNamespace(t)
	const watches = 12
	var keys []types.NamespacedName
	for i := range watches {
		w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w%02d", i), Namespace: ns},
			Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{TenantID: tenantID, ClientID: s.appID}}}}
		if err := k8s.Create(context.Background(), w); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, types.NamespacedName{Namespace: ns, Name: w.Name})
	}
	reconcileAll := func() (checked int, back time.Duration) {
		t.Helper()
		for _, key := range keys {
			before := &v1alpha1.CredentialWatch{}
			if err := k8s.Get(context.Background(), key, before); err != nil {
				t.Fatal(err)
			}
			res, err := reconcileFully(ctrl.LoggerInto(context.Background(), h.logs.logger()), t, h.r, key)
			if err != nil {
				t.Fatal(err)
			}
			after := &v1alpha1.CredentialWatch{}
			if err := k8s.Get(context.Background(), key, after); err != nil {
				t.Fatal(err)
			}
			if after.Status.LastCheckTime != nil && (before.Status.LastCheckTime == nil || after.Status.LastCheckTime.After(before.Status.LastCheckTime.Time)) {
				checked++
			} else if back == 0 || res.RequeueAfter < back {
				back = res.RequeueAfter
			}
		}
		return checked, back
	}
	ask := func(value string) {
		t.Helper()
		for _, key := range keys {
			w := &v1alpha1.CredentialWatch{}
			if err := k8s.Get(context.Background(), key, w); err != nil {
				t.Fatal(err)
			}
			w.Annotations = map[string]string{v1alpha1.CheckAnnotation: value}
			if err := k8s.Update(context.Background(), w); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, _ := reconcileAll(); n != watches {
		t.Fatalf("%d of %d new watches checked: first checks are the schedule's", n, watches)
	}
	ask("1")
	if n, _ := reconcileAll(); n != 0 {
		t.Fatalf("%d watches read again at once, a second after their check; want none before a minute", n)
	}
	h.step(policy.EarlyCheckGap)
	n, back := reconcileAll()
	if n != target.EarlyChecksPerNamespace || back <= 0 || back > time.Minute/target.EarlyChecksPerNamespace {
		t.Fatalf("%d watches checked, the others back in %v; want %d, the others within %v", n, back, target.EarlyChecksPerNamespace, time.Minute/target.EarlyChecksPerNamespace)
	}
	h.step(time.Minute / target.EarlyChecksPerNamespace * (watches - target.EarlyChecksPerNamespace))
	if n, _ := reconcileAll(); n != watches-target.EarlyChecksPerNamespace {
		t.Fatalf("%d more checked once the allowance refilled; want %d", n, watches-target.EarlyChecksPerNamespace)
	}
}
