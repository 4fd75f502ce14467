package aksfleet

import (
	"context"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
)

// watches is a namespace's CredentialWatches in memory, with func fields to fail a write.
type watches struct {
	items map[string]*v1alpha1.CredentialWatch
	// CreateFunc, when set, answers a create before it is stored; a nil error stores it.
	CreateFunc func(w *v1alpha1.CredentialWatch) error
}

var watchResource = schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "credentialwatches"}

func (f *watches) List(_ context.Context, namespace string, labels map[string]string) ([]v1alpha1.CredentialWatch, error) {
	var out []v1alpha1.CredentialWatch
	for _, w := range f.items {
		match := w.Namespace == namespace
		for k, v := range labels {
			match = match && w.Labels[k] == v
		}
		if match {
			out = append(out, *w.DeepCopy())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *watches) Get(_ context.Context, namespace, name string, into *v1alpha1.CredentialWatch) error {
	w, ok := f.items[namespace+"/"+name]
	if !ok {
		return apierrors.NewNotFound(watchResource, name)
	}
	w.DeepCopyInto(into)
	return nil
}

func (f *watches) Create(_ context.Context, w *v1alpha1.CredentialWatch) error {
	if _, ok := f.items[w.Namespace+"/"+w.Name]; ok {
		return apierrors.NewAlreadyExists(watchResource, w.Name)
	}
	if f.CreateFunc != nil {
		if err := f.CreateFunc(w); err != nil {
			return err
		}
	}
	f.items[w.Namespace+"/"+w.Name] = w.DeepCopy()
	return nil
}

func (f *watches) Update(_ context.Context, w *v1alpha1.CredentialWatch) error {
	if _, ok := f.items[w.Namespace+"/"+w.Name]; !ok {
		return apierrors.NewNotFound(watchResource, w.Name)
	}
	f.items[w.Namespace+"/"+w.Name] = w.DeepCopy()
	return nil
}

func (f *watches) Delete(_ context.Context, w *v1alpha1.CredentialWatch) error {
	have, ok := f.items[w.Namespace+"/"+w.Name]
	if !ok || have.UID != w.UID {
		return apierrors.NewNotFound(watchResource, w.Name)
	}
	delete(f.items, w.Namespace+"/"+w.Name)
	return nil
}

// grantOf is an AzureIdentity of namespace team that allows tenant t, every application, and the
// subscriptions given, whole, or "sub/rg" for one resource group of it.
func grantOf(subs ...string) access.Grant {
	spec := v1alpha1.IdentitySpec{Allow: v1alpha1.IdentityAllow{Tenants: []string{"t"}, Applications: []string{v1alpha1.AllApplications}}}
	for _, s := range subs {
		sub, rg, _ := strings.Cut(s, "/")
		scope := v1alpha1.SubscriptionScope{SubscriptionID: sub}
		if rg != "" {
			scope.ResourceGroups = []string{rg}
		}
		spec.Allow.Subscriptions = append(spec.Allow.Subscriptions, scope)
	}
	return access.Grant{Identity: access.Identity{Kind: v1alpha1.KindAzureIdentity, Namespace: "team", Name: "id", Spec: spec},
		Namespace: access.Namespace{Name: "team"}}
}

// clusterID is the resource ID of cluster name in resource group rg of subscription sub.
func clusterID(sub, rg, name string) string {
	return "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.ContainerService/managedClusters/" + name
}
