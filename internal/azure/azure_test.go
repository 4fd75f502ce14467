package azure

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
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
	if _, err := ids.Operator("tenant-a"); err != nil {
		t.Fatal(err)
	}
	_, _ = ids.Operator("tenant-a")
	_, _ = ids.Operator("tenant-b")
	if builds != 2 {
		t.Errorf("operator identity built %d times for two tenants, want 2", builds)
	}

	first, err := ids.ClientSecret("tenant-a", "client", "secret-1")
	if err != nil {
		t.Fatal(err)
	}
	second, _ := ids.ClientSecret("tenant-a", "client", "secret-2")
	if first == second {
		t.Fatal("a second secret gave the first one's credential")
	}
	// Two watches mid-rotation, one on each secret: neither evicts the other.
	if again, _ := ids.ClientSecret("tenant-a", "client", "secret-1"); again != first {
		t.Error("the first secret's credential was rebuilt: its token cache is lost")
	}
	for _, s := range []string{"secret-3", "secret-4", "secret-5"} {
		_, _ = ids.ClientSecret("tenant-a", "client", s)
	}
	if n := len(ids.cache["secret/tenant-a/client"]); n != secretsPerClient {
		t.Errorf("%d secrets of one client cached, want at most %d", n, secretsPerClient)
	}
	if again, _ := ids.ClientSecret("tenant-a", "client", "secret-1"); again == first {
		t.Error("the oldest secret's credential outlived four newer ones")
	}
}
