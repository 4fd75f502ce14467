package keyvault

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/credwatch/credwatch/internal/secret"
	"github.com/credwatch/credwatch/test/fakekeyvault"
)

// noToken is a credential the fake transport never asks for a token: Key Vault's challenge comes
// only from a real vault.
type noToken struct{}

func (noToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{}, nil
}

func TestSetFindDisable(t *testing.T) {
	vault := fakekeyvault.New()
	v := New(noToken{}, vault.Transport())
	ctx := context.Background()
	end := time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC)

	if got, err := v.List(ctx, fakekeyvault.URL, "payments-sp"); err != nil || len(got) != 0 {
		t.Fatalf("List in an empty vault: %v, %v", got, err)
	}
	first, err := v.Set(ctx, fakekeyvault.URL, "payments-sp", secret.New("old~secret"), "app", "k0", end.AddDate(-1, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	second, err := v.Set(ctx, fakekeyvault.URL, "payments-sp", secret.New("new~secret"), "app", "k1", end)
	if err != nil || second == first || second == "" {
		t.Fatalf("Set: %q after %q, %v", second, first, err)
	}
	versions := vault.Versions("payments-sp")
	if len(versions) != 2 || versions[1].Value != "new~secret" || versions[1].ContentType != ContentType || !versions[1].Expires.Equal(end) ||
		versions[1].Tags[TagKeyID] != "k1" || versions[1].Tags[TagAppID] != "app" || !versions[0].Enabled {
		t.Fatalf("the vault holds %+v", versions)
	}
	listed, err := v.List(ctx, fakekeyvault.URL, "payments-sp")
	if err != nil || len(listed) != 2 {
		t.Fatalf("List: %+v, %v", listed, err)
	}
	for _, l := range listed {
		if l.Version == second && (l.KeyID != "k1" || l.AppID != "app" || !l.Enabled || l.Created.IsZero()) {
			t.Errorf("the second version listed as %+v", l)
		}
	}
	if err := v.Disable(ctx, fakekeyvault.URL, "payments-sp", first); err != nil {
		t.Fatal(err)
	}
	if versions := vault.Versions("payments-sp"); versions[0].Enabled || !versions[1].Enabled {
		t.Errorf("after disabling the first version: %+v", versions)
	}
	if err := v.Disable(ctx, fakekeyvault.URL, "payments-sp", "gone"); err != nil {
		t.Errorf("disabling a version no longer there: %v", err)
	}

	vault.Refuse(true)
	_, err = v.Set(ctx, fakekeyvault.URL, "payments-sp", secret.New("x"), "app", "k2", end)
	if err == nil || !strings.Contains(err.Error(), needsSet) || strings.Contains(err.Error(), "new~secret") {
		t.Errorf("a refused set: %v, want the data action it needs named", err)
	}
	if _, err := v.List(ctx, fakekeyvault.URL, "payments-sp"); err == nil || !strings.Contains(err.Error(), needsList) {
		t.Errorf("a refused list: %v", err)
	}
}

func TestOnlyKeyVaultURLsAreReached(t *testing.T) {
	for _, u := range []string{"https://payments-kv.vault.azure.net/", "https://payments-kv.vault.azure.net", "https://KV.vault.usgovcloudapi.net/"} {
		if err := CheckURL(u); err != nil {
			t.Errorf("CheckURL(%q) = %v", u, err)
		}
	}
	for _, u := range []string{"http://payments-kv.vault.azure.net/", "https://169.254.169.254/", "https://evil.example/", "https://vault.azure.net/",
		"https://a.vault.azure.net@evil.example/", "https://a.vault.azure.net:8443/", "https://a.vault.azure.net/secrets", "https://a.vault.azure.net.evil.example/"} {
		if err := CheckURL(u); !errors.Is(err, ErrNotAVault) {
			t.Errorf("CheckURL(%q) = %v, want it refused", u, err)
		}
	}
}
