// Package controlplane starts a control plane in the middle of an upgrade, for the tests of
// serviceAccountIssuer watches: one etcd and two kube-apiservers that share it, their serving
// certificate and their client CA, each with its own service-account keys.
package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/credwatch/credwatch/internal/saissuer"
)

// CanaryNamespace holds the canary ServiceAccount the issuer checks have tokens of.
const CanaryNamespace = "credwatch-system"

// ControlPlane is the etcd and the first API server, A, and the second, B, once started. Keys are
// named: "k1" and "k2" exist.
type ControlPlane struct {
	t *testing.T
	// Env is the first API server's environment.
	Env *envtest.Environment
	b   *envtest.APIServer
	// Config reaches the first API server as its admin; the second accepts it too.
	Config *rest.Config
	// Issuer is the issuer both servers put in the tokens they sign.
	Issuer string
	keys   string // directory of the key files
}

// Start starts the etcd and the first API server, which signs and verifies with key k1, and the
// canary ServiceAccount in CanaryNamespace.
func Start(t *testing.T) *ControlPlane {
	t.Helper()
	cp := &ControlPlane{t: t, keys: t.TempDir()}
	for _, k := range []string{"k1", "k2"} {
		cp.writeKey(k)
	}
	cp.Env = &envtest.Environment{}
	// A directory of its own, which a restart keeps: the serving certificate stays the same.
	cp.Env.ControlPlane.GetAPIServer().CertDir = t.TempDir()
	cp.Env.ControlPlane.GetAPIServer().Configure().
		Set("service-account-signing-key-file", cp.key("k1")).
		Set("service-account-key-file", cp.key("k1"))
	var err error
	if cp.Config, err = cp.Env.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cp.b != nil {
			_ = cp.b.Stop()
		}
		_ = cp.Env.Stop()
	})
	a := cp.Env.ControlPlane.APIServer
	cp.Issuer = a.SecureServing.URL("https", "/").String()
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: CanaryNamespace}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: saissuer.CanaryServiceAccount, Namespace: CanaryNamespace}}); err != nil {
		t.Fatal(err)
	}
	return cp
}

func (cp *ControlPlane) key(name string) string { return filepath.Join(cp.keys, name+".key") }

func (cp *ControlPlane) writeKey(name string) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		cp.t.Fatal(err)
	}
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}
	if err := os.WriteFile(cp.key(name), pem.EncodeToMemory(block), 0o600); err != nil {
		cp.t.Fatal(err)
	}
}

// EndpointA is the first API server, as https://host:port.
func (cp *ControlPlane) EndpointA() string {
	return strings.TrimSuffix(cp.Env.ControlPlane.APIServer.SecureServing.URL("https", "/").String(), "/")
}

// EndpointB is the second API server, as https://host:port.
func (cp *ControlPlane) EndpointB() string {
	return strings.TrimSuffix(cp.b.SecureServing.URL("https", "/").String(), "/")
}

// RestartA restarts the first API server signing with sign and verifying with verify.
func (cp *ControlPlane) RestartA(sign string, verify ...string) {
	cp.t.Helper()
	a := cp.Env.ControlPlane.APIServer
	if err := a.Stop(); err != nil {
		cp.t.Fatal(err)
	}
	cp.configure(a, sign, verify)
	if err := a.Start(); err != nil {
		cp.t.Fatal(err)
	}
}

// StartB starts, or restarts on the same port, the second API server, signing with sign and
// verifying with verify, with the first one's issuer, serving certificate and client CA.
func (cp *ControlPlane) StartB(sign string, verify ...string) {
	cp.t.Helper()
	a := cp.Env.ControlPlane.APIServer
	dir := cp.t.TempDir()
	for _, f := range []string{"apiserver.crt", "apiserver.key"} {
		data, err := os.ReadFile(filepath.Join(a.CertDir, f))
		if err != nil {
			cp.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			cp.t.Fatal(err)
		}
	}
	b := &envtest.APIServer{EtcdURL: a.EtcdURL, CertDir: dir, Path: a.Path}
	b.Authn = a.Authn
	b.Address = "127.0.0.1"
	if cp.b != nil {
		if err := cp.b.Stop(); err != nil {
			cp.t.Fatal(err)
		}
		port, _ := portOf(cp.EndpointB())
		b.Port = strconv.Itoa(port)
	}
	cp.configure(b, sign, verify)
	if err := b.Start(); err != nil {
		cp.t.Fatal(err)
	}
	cp.b = b
}

func (cp *ControlPlane) configure(s *envtest.APIServer, sign string, verify []string) {
	var files []string
	for _, v := range verify {
		files = append(files, cp.key(v))
	}
	s.Configure().Set("service-account-signing-key-file", cp.key(sign)).Set("service-account-key-file", files...).
		Set("service-account-issuer", cp.Issuer)
}

func portOf(endpoint string) (int, error) {
	_, port, _ := strings.Cut(strings.TrimPrefix(endpoint, "https://"), ":")
	return strconv.Atoi(port)
}
