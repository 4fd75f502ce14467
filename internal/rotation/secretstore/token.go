package secretstore

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/secret"
)

// Tokens reads the tokens a watch's publish sinks name from Secrets of its namespace, one at a
// time, not from a cache, which would hold every Secret in the cluster.
type Tokens struct {
	Reader    client.Reader
	Namespace string
}

// Read is the value of ref's key in ref's Secret of the namespace.
func (t Tokens) Read(ctx context.Context, ref v1alpha1.SecretKeyRef) (secret.Text, error) {
	var s corev1.Secret
	if err := t.Reader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: ref.Name}, &s); err != nil {
		return secret.Text{}, fmt.Errorf("reading the token of Secret %s/%s: %w", t.Namespace, ref.Name, err)
	}
	v, ok := s.Data[ref.Key]
	if !ok || len(v) == 0 {
		return secret.Text{}, fmt.Errorf("the Secret %s/%s has no key %s holding a token", t.Namespace, ref.Name, ref.Key)
	}
	return secret.New(string(v)), nil
}
