package azure

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/secret"
	"github.com/credwatch/credwatch/test/fakegraph"
)

func TestCloudNamed(t *testing.T) {
	for _, name := range []string{"AzurePublic", "AzureChina", "AzureUSGovernment"} {
		c, err := CloudNamed(name)
		if err != nil {
			t.Errorf("CloudNamed(%q): %v", name, err)
			continue
		}
		if err := c.Validate(); err != nil || !c.Known() {
			t.Errorf("%s: Validate() = %v, Known() = %v; want valid and known", name, err, c.Known())
		}
	}
	if _, err := CloudNamed("AzureGermany"); err == nil {
		t.Error("CloudNamed accepted a retired cloud")
	}
}

func TestCustomCloud(t *testing.T) {
	c := Cloud{AuthorityHost: "https://127.0.0.1:8443/", GraphEndpoint: "https://127.0.0.1:8443", ARMEndpoint: "https://127.0.0.1:8443", ARMAudience: "https://127.0.0.1:8443/"}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
	// MSAL must be told to skip instance discovery for this host, or it asks the public cloud.
	if c.Known() {
		t.Error("a local authority host counts as one of Azure's")
	}
	c.GraphEndpoint = "http://127.0.0.1:8443"
	if err := c.Validate(); err == nil {
		t.Error("Validate() accepted a plain-HTTP Graph endpoint")
	}
}

func TestIdentitiesAreCachedUntilTheSecretChanges(t *testing.T) {
	builds := 0
	ids := NewIdentities(Cloud{AuthorityHost: "https://127.0.0.1/"}, nil, func(string) (azcore.TokenCredential, error) {
		builds++
		return nil, nil
	})
	if _, err := ids.Credential(Operator("tenant-a")); err != nil {
		t.Fatal(err)
	}
	_, _ = ids.Credential(Operator("tenant-a"))
	_, _ = ids.Credential(Operator("tenant-b"))
	if builds != 2 {
		t.Errorf("operator identity built %d times for two tenants, want 2", builds)
	}

	first, err := ids.Credential(ClientSecret("tenant-a", "client", "secret-1"))
	if err != nil {
		t.Fatal(err)
	}
	second, _ := ids.Credential(ClientSecret("tenant-a", "client", "secret-2"))
	if first == second {
		t.Fatal("a second secret gave the first one's credential")
	}
	// Two watches mid-rotation, one on each secret: neither evicts the other.
	if again, _ := ids.Credential(ClientSecret("tenant-a", "client", "secret-1")); again != first {
		t.Error("the first secret's credential was rebuilt: its token cache is lost")
	}
	for _, s := range []string{"secret-3", "secret-4", "secret-5"} {
		_, _ = ids.Credential(ClientSecret("tenant-a", "client", s))
	}
	if n := len(ids.cache["secret/tenant-a/client"]); n != secretsPerClient {
		t.Errorf("%d secrets of one client cached, want at most %d", n, secretsPerClient)
	}
	if again, _ := ids.Credential(ClientSecret("tenant-a", "client", "secret-1")); again == first {
		t.Error("the oldest secret's credential outlived four newer ones")
	}
}

func TestSignIn(t *testing.T) {
	fake := fakegraph.New()
	t.Cleanup(fake.Close)
	const tenant, operator = "1b2c3d4e-5f60-4172-8394-a5b6c7d8e9f0", "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"
	fake.AddClient(tenant, operator, "op-secret")
	fake.PutApplication(tenant, fakegraph.Object{ID: "a0000000-0000-4000-8000-000000000001", AppID: "2c3d4e5f-6071-4283-9405-b6c7d8e9f0a1"})
	ids := NewIdentities(Cloud{AuthorityHost: fake.URL() + "/", GraphEndpoint: fake.URL()}, fake.Client(), nil)

	if err := ids.SignIn(context.Background(), ClientSecret(tenant, operator, "op-secret")); err != nil {
		t.Errorf("a registered secret: %v", err)
	}
	wrong := ClientSecret(tenant, operator, "wrong")
	err := ids.SignIn(context.Background(), wrong)
	var ae *azerr.Error
	if !errors.As(err, &ae) || ae.Kind != azerr.KindUnauthenticated || ae.Code != "invalid_client AADSTS7000215" {
		t.Errorf("a wrong secret: %v, want invalid_client AADSTS7000215", err)
	}
	if strings.Contains(fmt.Sprint(err), "wrong") {
		t.Errorf("the error %q quotes the secret", err)
	}
}

// An identity says whose it is, never its secret, however it is printed.
func TestIdentityHidesItsSecret(t *testing.T) {
	id := ClientSecret("t", "c", "s3cr3t~value")
	wrapped := struct {
		who Identity
		Who Identity
	}{id, id}
	printed := []string{fmt.Sprint(&id), fmt.Sprintf("%v %+v %#v", wrapped, wrapped, wrapped)}
	// Every verb, %d and %x of a struct included, which vet would refuse in a constant format.
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x"} {
		printed = append(printed, fmt.Sprintf(verb, id))
	}
	for _, printed := range printed {
		if strings.Contains(printed, id.Secret.Reveal()) {
			t.Errorf("printed %q holds the secret", printed)
		}
	}
	if got := Operator("t").String(); got != "the operator's identity in tenant t" {
		t.Errorf("Operator(t) = %q", got)
	}
}

// Half an identity, a client without its secret or a secret without its client, is refused: it
// must never be read as the operator's own.
func TestHalfAnIdentityIsRefused(t *testing.T) {
	ids := NewIdentities(Cloud{AuthorityHost: "https://login.example/", GraphEndpoint: "https://graph.example"}, nil,
		func(string) (azcore.TokenCredential, error) {
			t.Error("the operator's identity was used")
			return nil, errors.New("not here")
		})
	for name, id := range map[string]Identity{
		"a client without its secret":         {TenantID: "t", ClientID: "c"},
		"a secret without its client":         {TenantID: "t", Secret: secret.New("s")},
		"a ServiceAccount without its client": {TenantID: "t", ServiceAccount: &ServiceAccount{Namespace: "n", Name: "sa"}},
		"a secret and a certificate":          {TenantID: "t", ClientID: "c", Secret: secret.New("s"), Certificate: secret.New("pem")},
	} {
		if _, err := ids.Credential(id); !errors.Is(err, errHalfAnIdentity) {
			t.Errorf("%s: Credential = %v, want errHalfAnIdentity", name, err)
		}
	}
}
