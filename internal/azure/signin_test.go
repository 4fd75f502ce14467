package azure

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/test/fakegraph"
)

const (
	signInTenant = "1b2c3d4e-5f60-4172-8394-a5b6c7d8e9f0"
	signInClient = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"
)

func newFake(t *testing.T) (*fakegraph.Server, *Identities) {
	t.Helper()
	fake := fakegraph.New()
	t.Cleanup(fake.Close)
	fake.PutApplication(signInTenant, fakegraph.Object{ID: "a0000000-0000-4000-8000-000000000001", AppID: "2c3d4e5f-6071-4283-9405-b6c7d8e9f0a1"})
	return fake, NewIdentities(Cloud{AuthorityHost: fake.URL() + "/", GraphEndpoint: fake.URL()}, fake.Client(), nil)
}

// selfSigned is a certificate and its key, PEM, as a kubernetes.io/tls Secret holds them.
func selfSigned(t *testing.T) (*x509.Certificate, []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "credwatch"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pemData := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	pemData = append(pemData, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})...)
	return cert, pemData
}

func TestSignInWithACertificate(t *testing.T) {
	fake, ids := newFake(t)
	cert, pemData := selfSigned(t)
	fake.AddClientCertificate(signInTenant, signInClient, cert)
	if err := ids.SignIn(context.Background(), ClientCertificate(signInTenant, signInClient, pemData)); err != nil {
		t.Errorf("a registered certificate: %v", err)
	}
	_, other := selfSigned(t)
	err := ids.SignIn(context.Background(), ClientCertificate(signInTenant, signInClient, other))
	var ae *azerr.Error
	if !errors.As(err, &ae) || ae.Code != "invalid_client AADSTS700027" {
		t.Errorf("a certificate the application does not hold: %v, want invalid_client AADSTS700027", err)
	}
	if err := ids.SignIn(context.Background(), ClientCertificate(signInTenant, signInClient, []byte("not a PEM"))); err == nil || strings.Contains(err.Error(), "not a PEM") {
		t.Errorf("a malformed certificate: %v, want an error that does not quote it", err)
	}
}

// issuer signs ServiceAccount-shaped tokens as an API server would, and serves its JWKS.
type issuer struct {
	key     *rsa.PrivateKey
	url     string
	minted  []string // namespace/name of each token
	refused error
}

func (i *issuer) Token(_ context.Context, namespace, name, audience string) (string, error) {
	if i.refused != nil {
		return "", i.refused
	}
	i.minted = append(i.minted, namespace+"/"+name)
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"iss": i.url, "sub": "system:serviceaccount:" + namespace + ":" + name, "aud": []string{audience},
		"exp": time.Now().Add(10 * time.Minute).Unix(), "iat": time.Now().Unix(),
	})
	tok.Header["kid"] = "k1"
	return tok.SignedString(i.key)
}

func (i *issuer) jwks() ([]byte, error) {
	return json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
		"n": base64.RawURLEncoding.EncodeToString(i.key.N.Bytes()), "e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(i.key.E)).Bytes())}}})
}

// TestSignInWithWorkloadIdentity: the ServiceAccount's token is exchanged, and Entra accepts it
// only for the subject the application federates with.
func TestSignInWithWorkloadIdentity(t *testing.T) {
	fake, ids := newFake(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	iss := &issuer{key: key, url: "https://kubernetes.default.svc.cluster.local"}
	ids.Tokens = iss
	fake.AddFederatedCredential(signInTenant, signInClient, fakegraph.FederatedCredential{Issuer: iss.url,
		Subject: "system:serviceaccount:team-a:graph", Audiences: []string{TokenExchangeAudience}, Keys: iss.jwks})

	if err := ids.SignIn(context.Background(), WorkloadIdentity(signInTenant, signInClient, "team-a", "graph")); err != nil {
		t.Errorf("the federated ServiceAccount: %v", err)
	}
	err = ids.SignIn(context.Background(), WorkloadIdentity(signInTenant, signInClient, "team-b", "graph"))
	var ae *azerr.Error
	if !errors.As(err, &ae) || ae.Code != "invalid_client AADSTS700213" {
		t.Errorf("another namespace's ServiceAccount: %v, want invalid_client AADSTS700213", err)
	}
	iss.refused = errors.New(`serviceaccounts "graph" is forbidden`)
	err = ids.SignIn(context.Background(), WorkloadIdentity(signInTenant, signInClient, "team-a", "graph"))
	var te *TokenError
	if !errors.As(err, &te) || te.ServiceAccount != (ServiceAccount{Namespace: "team-a", Name: "graph"}) {
		t.Errorf("a token the API server refuses: %v, want a TokenError naming team-a/graph", err)
	}
	if strings.Join(iss.minted, ",") != "team-a/graph,team-b/graph" {
		t.Errorf("tokens minted for %v", iss.minted)
	}
}
