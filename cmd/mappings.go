package main

import (
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// rememberedMappings is controller-runtime's RESTMapper, remembering the mapping of each kind
// and version it found. controller-runtime's metadata client asks the mapper at every request,
// and its mapper builds an error for every API group version that does not hold the kind: about
// 6 KB of garbage for each status write, 6% of what a sweep of 100,000 watches allocated
// (BENCHMARKS.md). Its typed client remembers a kind and version's mapping for the life of the
// process, as this does; a kind not found is asked again, so a CRD installed later is still
// found. A question without one version (the preferred one, or the first of several) is passed
// on: its answer may change as versions are added.
type rememberedMappings struct {
	meta.RESTMapper
	found sync.Map // schema.GroupVersionKind to meta.RESTMapping
}

func newRememberedMappings(c *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(c, hc)
	if err != nil {
		return nil, err
	}
	return &rememberedMappings{RESTMapper: m}, nil
}

func (m *rememberedMappings) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) != 1 || versions[0] == "" {
		return m.RESTMapper.RESTMapping(gk, versions...)
	}
	gvk := gk.WithVersion(versions[0])
	if found, ok := m.found.Load(gvk); ok {
		mapping := found.(meta.RESTMapping) // a copy: a caller may change its own
		return &mapping, nil
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err == nil {
		m.found.Store(gvk, *mapping)
	}
	return mapping, err
}
