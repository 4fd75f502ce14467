package docs

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// example is one object of a YAML block of a page.
type example struct {
	where string // page:line of the block
	obj   *unstructured.Unstructured
}

// examples returns every object of every yaml block of the site and the README. A block that is
// not whole objects fails: a fragment cannot be checked, so it is the example that drifts.
func examples(t *testing.T) []example {
	t.Helper()
	var out []example
	for _, src := range readerPages(t) {
		pg, err := readPage(src)
		if err != nil {
			t.Fatal(err)
		}
		code, _ := pg.blocks()
		for _, b := range code {
			if b.lang != "yaml" && b.lang != "yml" {
				continue
			}
			where := src + ":" + strconv.Itoa(b.line)
			objs, err := decode(b.text)
			if err != nil {
				t.Errorf("%s: a YAML example that is not Kubernetes objects (apiVersion, kind, metadata.name): %v", where, err)
				continue
			}
			for _, o := range objs {
				out = append(out, example{where: where, obj: o})
			}
		}
	}
	return out
}

func decode(text string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		if m == nil {
			continue
		}
		o := &unstructured.Unstructured{Object: m}
		if o.GetAPIVersion() == "" || o.GetKind() == "" || o.GetName() == "" {
			return nil, errors.New("an object without apiVersion, kind or metadata.name")
		}
		out = append(out, o)
	}
	if len(out) == 0 {
		return nil, errors.New("no object")
	}
	return out, nil
}

// Every YAML example of the site goes to a real kube-apiserver with the CRDs installed, as a
// server-side dry run: the OpenAPI schema, its CEL rules and the defaults judge it, as they would
// a reader's `kubectl apply`, and nothing is stored.
func TestEveryYAMLExampleIsAcceptedByTheAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the envtest API server: skipped under -short")
	}
	exs := examples(t)
	if len(exs) < 15 {
		t.Fatalf("only %d examples found: the pages' code blocks are no longer read", len(exs))
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, which builds kube-apiserver and etcd into bin/k8s")
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	// Stop is registered first: a Start that fails part way has already started etcd.
	t.Cleanup(func() { _ = env.Stop() })
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	namespaces := map[string]bool{}
	for _, ex := range exs {
		mapping, err := c.RESTMapper().RESTMapping(ex.obj.GroupVersionKind().GroupKind(), ex.obj.GroupVersionKind().Version)
		if err != nil {
			t.Errorf("%s: %s %s: the API server has no such kind: %v", ex.where, ex.obj.GetKind(), ex.obj.GetName(), err)
			continue
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := ex.obj.GetNamespace()
			if ns == "" {
				ns = "default"
				ex.obj.SetNamespace(ns)
			}
			if !namespaces[ns] {
				err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatal(err)
				}
				namespaces[ns] = true
			}
		}
		if err := c.Create(ctx, ex.obj, client.DryRunAll); err != nil {
			t.Errorf("%s: %s %s is refused: %v", ex.where, ex.obj.GetKind(), ex.obj.GetName(), err)
		}
	}
	t.Logf("%d objects of the pages' YAML examples accepted", len(exs))
}
