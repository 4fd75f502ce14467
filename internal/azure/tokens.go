package azure

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// assertionLifetime is how long the ServiceAccount tokens exchanged with Entra ID live: the
// shortest TokenRequest grants. Each is exchanged at once, and a new one minted for every
// exchange, so nothing is gained by a longer one, and a leaked one is worth less.
const assertionLifetime = 600

// KubeTokens mints ServiceAccount tokens through the API server's TokenRequest.
type KubeTokens struct{ Client client.Client }

// Token mints a token of ServiceAccount namespace/name for audience.
func (k KubeTokens) Token(ctx context.Context, namespace, name, audience string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](assertionLifetime),
	}}
	if err := k.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", err
	}
	return req.Status.Token, nil
}
