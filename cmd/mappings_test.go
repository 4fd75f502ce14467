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
	first.Resource.Resource = "changed by its caller"
	again := ask(watch, "v1alpha1")
	if inner.asked != 1 || again == nil || again.Resource.Resource == first.Resource.Resource {
		t.Errorf("asked again: %+v, the inner mapper asked %d times; want the first mapping as found, asked once", again, inner.asked)
	}
	// The preferred version, or the first of several, may change as versions are added.
	for range 2 {
		ask(watch)
	}
	if inner.asked != 3 {
		t.Errorf("no version given twice: the inner mapper asked %d times, want 3", inner.asked)
	}
	if ask(watch, "v1alpha1", "v1") == nil || inner.asked != 4 {
		t.Errorf("two versions given: the inner mapper asked %d times, want 4", inner.asked)
	}

	// A kind not found is not remembered: its CRD may be installed later.
	later := schema.GroupKind{Group: "credwatch.dev", Kind: "Later"}
	if ask(later, "v1alpha1") != nil {
		t.Fatal("an unknown kind was mapped")
	}
	known.Add(watches.WithKind("Later"), meta.RESTScopeNamespace)
	if ask(later, "v1alpha1") == nil || inner.asked != 6 {
		t.Errorf("a kind added after it was not found: asked %d times, want it found on the sixth", inner.asked)
	}
}
