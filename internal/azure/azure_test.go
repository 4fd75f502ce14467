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
	c := Cloud{AuthorityHost: "https://127.0.0.1:8443/", GraphEndpoint: "https://127.0.0.1:8443", ARMEndpoint: "https://127.0.0.1:8443"}
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
	again, _ := ids.ClientSecret("tenant-a", "client", "secret-1")
	rotated, _ := ids.ClientSecret("tenant-a", "client", "secret-2")
	if first != again {
		t.Error("the same secret gave a new credential: its token cache is lost")
	}
	if first == rotated {
		t.Error("a rotated secret gave the old credential")
	}
	if n := len(ids.cache); n != 3 {
		t.Errorf("cache holds %d entries, want 3: a rotated secret replaces its entry", n)
	}
}
