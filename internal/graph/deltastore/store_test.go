package deltastore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

type events []string

func (e *events) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	o := obj.(client.Object)
	*e = append(*e, fmt.Sprintf("%s/%s %s %s %s", o.GetNamespace(), o.GetName(), eventtype, reason, fmt.Sprintf(format, args...)))
}

type counts struct{ resyncs, missed int }

func (c *counts) Resynced() { c.resyncs++ }
func (c *counts) Missed()   { c.missed++ }

func TestStoreKeepsEachScopesState(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	ev, n := &events{}, &counts{}
	s := &Store{Reader: c, Writer: c, Namespace: "credwatch", Events: ev, Counters: n, Log: logr.Discard()}

	if got, err := s.Load(ctx, "client/tenant"); err != nil || got != nil {
		t.Fatalf("nothing kept: %q, %v", got, err)
	}
	s.Save(ctx, "client/tenant", []byte(`{"a":1}`))
	s.Save(ctx, "client/tenant", []byte(`{"a":2}`))
	s.Save(ctx, "other/tenant", []byte(`{"b":1}`))
	if got, _ := s.Load(ctx, "client/tenant"); string(got) != `{"a":2}` {
		t.Errorf("kept %q", got)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "credwatch", Name: Name("client/tenant")}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Labels[label] != "true" || cm.Data[scopeKey] != "client/tenant" {
		t.Errorf("the ConfigMap: %+v", cm)
	}

	// A ConfigMap of that name holding another scope's state, as a hash collision would, is
	// not read as this one's.
	cm.Data[scopeKey] = "someone/else"
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Load(ctx, "client/tenant"); got != nil {
		t.Errorf("another scope's state read: %q", got)
	}

	s.Resynced("client/tenant", errors.New("HTTP 410"))
	s.Missed("client/tenant", "app", "a key")
	if n.resyncs != 1 || n.missed != 1 || len(*ev) != 1 || !strings.HasPrefix((*ev)[0], "credwatch/"+Name("client/tenant")+" Warning "+EventResynced) {
		t.Errorf("counted %+v, events %v", n, *ev)
	}
}
