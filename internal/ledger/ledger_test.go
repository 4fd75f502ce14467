package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var owner = Owner{Namespace: "team-a", Name: "fleet", UID: "0b6a3d4e-7c1f-4b8e-9a2d-5e6f7a8b9c0d", APIVersion: "credwatch.dev/v1alpha1", Kind: "CredentialWatch"}

func TestUnitLedgerWritesReadsAndRemoves(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	s := &Store{Reader: c, Writer: c}
	b, err := s.Load(ctx, owner)
	if err != nil || b.Len() != 0 {
		t.Fatalf("empty ledger: %d entries, %v", b.Len(), err)
	}
	changes := map[string]*string{}
	for i := range 100 {
		changes[fmt.Sprintf("slack.%03d", i)] = ptr.To(fmt.Sprintf("Critical %d", i))
	}
	written, err := s.Write(ctx, b, changes)
	if err != nil || len(written) != 100 {
		t.Fatalf("wrote %d of 100: %v", len(written), err)
	}
	again, err := s.Load(ctx, owner)
	if err != nil || again.Len() != 100 {
		t.Fatalf("loaded %d entries, %v; want 100", again.Len(), err)
	}
	if v, ok := again.Get("slack.042"); !ok || v != "Critical 42" {
		t.Errorf("slack.042 = %q, %v", v, ok)
	}
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) > Shards {
		t.Errorf("%d ConfigMaps, want at most %d", len(list.Items), Shards)
	}
	for _, cm := range list.Items {
		if ref := metav1.GetControllerOf(&cm); ref == nil || ref.UID != owner.UID || cm.Namespace != owner.Namespace {
			t.Errorf("shard %s/%s is not controlled by the watch: %+v", cm.Namespace, cm.Name, cm.OwnerReferences)
		}
	}
	if _, err := s.Write(ctx, again, map[string]*string{"slack.042": nil}); err != nil {
		t.Fatal(err)
	}
	if _, ok := again.Get("slack.042"); ok {
		t.Error("slack.042 still in the book after its removal")
	}
	if third, _ := s.Load(ctx, owner); third.Len() != 99 {
		t.Errorf("%d entries after a removal, want 99", third.Len())
	}
}

// Two writers from the same read: the second's write of the same shard fails, and says which
// keys did not land, so that it sends nothing for them.
func TestUnitLedgerRefusesAStaleWriter(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	s := &Store{Reader: c, Writer: c}
	first, _ := s.Load(ctx, owner)
	if _, err := s.Write(ctx, first, map[string]*string{"email.a": ptr.To("Warning 1")}); err != nil {
		t.Fatal(err)
	}
	leader, _ := s.Load(ctx, owner)
	deposed, _ := s.Load(ctx, owner)
	if _, err := s.Write(ctx, leader, map[string]*string{"email.a": ptr.To("Critical 1")}); err != nil {
		t.Fatal(err)
	}
	written, err := s.Write(ctx, deposed, map[string]*string{"email.a": ptr.To("Critical 1")})
	if len(written) != 0 || !apierrors.IsConflict(err) {
		t.Errorf("the stale writer wrote %v (%v), want a conflict and nothing written", written, err)
	}
}

// A ConfigMap of a shard's name that the watch does not control is neither read nor written:
// nobody can silence a watch by creating its ledger ahead of it.
func TestUnitLedgerRefusesAForeignConfigMap(t *testing.T) {
	ctx := context.Background()
	for name, cm := range map[string]*corev1.ConfigMap{
		"unlabelled":               {ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace}},
		"labelled, not controlled": {ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Labels: map[string]string{labelOf: string(owner.UID)}}},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().Build()
			s := &Store{Reader: c, Writer: c}
			key := "slack.x"
			cm.Name = ShardName(owner, shardOf(key))
			cm.Data = map[string]string{key: "Expired 1"}
			if err := c.Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
			b, err := s.Load(ctx, owner)
			var foreign *ForeignError
			if err != nil {
				if !errors.As(err, &foreign) {
					t.Fatalf("load: %v", err)
				}
				return
			}
			if _, ok := b.Get(key); ok {
				t.Fatal("the foreign ConfigMap's entry was read")
			}
			if _, err := s.Write(ctx, b, map[string]*string{key: ptr.To("Warning 1")}); !errors.As(err, &foreign) {
				t.Fatalf("write: %v, want a ForeignError", err)
			}
			var got corev1.ConfigMap
			if err := c.Get(ctx, client.ObjectKeyFromObject(cm), &got); err != nil || got.Data[key] != "Expired 1" {
				t.Errorf("the foreign ConfigMap is now %v (%v)", got.Data, err)
			}
		})
	}
}

// A namespace where the operator may not write ConfigMaps is said so, naming what grants it; a
// 403 that is not the authorizer's, a quota exceeded say, is no matter for the chart: it is a
// failure like any other, retried.
func TestUnitLedgerForbiddenSaysWhatGrantsIt(t *testing.T) {
	for name, tc := range map[string]struct {
		refusal   string
		forbidden bool
		says      []string
	}{
		"RBAC": {refusal: `User "system:serviceaccount:credwatch-system:credwatch" cannot create resource "configmaps" in API group "" in the namespace "team-a"`,
			forbidden: true, says: []string{"namespace team-a", "ledgerNamespaces"}},
		"a quota": {refusal: "exceeded quota: team-a, requested: count/configmaps=1", says: []string{"exceeded quota"}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
					return apierrors.NewForbidden(corev1.Resource("configmaps"), "x", errors.New(tc.refusal))
				},
			}).Build()
			s := &Store{Reader: c, Writer: c}
			b, err := s.Load(ctx, owner)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Write(ctx, b, map[string]*string{"slack.x": ptr.To("Warning 1")})
			var forbidden *ForbiddenError
			if err == nil || errors.As(err, &forbidden) != tc.forbidden {
				t.Fatalf("write: %v, want a ForbiddenError: %v", err, tc.forbidden)
			}
			for _, want := range tc.says {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("write: %v, want it to say %q", err, want)
				}
			}
		})
	}
}
