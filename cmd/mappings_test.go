package main

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// askedMapper counts the mappings asked of it.
type askedMapper struct {
	meta.RESTMapper
	asked int
}

func (m *askedMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.asked++
	return m.RESTMapper.RESTMapping(gk, versions...)
}

func TestRememberedMappings(t *testing.T) {
	watches := schema.GroupVersion{Group: "credwatch.dev", Version: "v1alpha1"}
	known := meta.NewDefaultRESTMapper([]schema.GroupVersion{watches})
	known.Add(watches.WithKind("CredentialWatch"), meta.RESTScopeNamespace)
	inner := &askedMapper{RESTMapper: known}
	m := &rememberedMappings{RESTMapper: inner}
	ask := func(gk schema.GroupKind, versions ...string) *meta.RESTMapping {
		t.Helper()
		mapping, err := m.RESTMapping(gk, versions...)
		if err != nil {
			return nil
		}
		return mapping
	}

	watch := schema.GroupKind{Group: "credwatch.dev", Kind: "CredentialWatch"}
	first := ask(watch, "v1alpha1")
	if first == nil || first.GroupVersionKind != watches.WithKind("CredentialWatch") {
		t.Fatalf("mapping = %+v, want CredentialWatch's", first)
	}
	if again := ask(watch, "v1alpha1"); again != first || inner.asked != 1 {
		t.Errorf("asked again: %p after %p, the inner mapper asked %d times; want the first, asked once", again, first, inner.asked)
	}
	if ask(watch) == nil || inner.asked != 2 {
		t.Errorf("another set of versions: the inner mapper asked %d times, want 2", inner.asked)
	}

	// A kind not found is not remembered: its CRD may be installed later.
	fleet := schema.GroupKind{Group: "credwatch.dev", Kind: "Later"}
	if ask(fleet, "v1alpha1") != nil {
		t.Fatal("an unknown kind was mapped")
	}
	known.Add(watches.WithKind("Later"), meta.RESTScopeNamespace)
	if ask(fleet, "v1alpha1") == nil || inner.asked != 4 {
		t.Errorf("a kind added after it was not found: asked %d times, want it found on the fourth", inner.asked)
	}
}
