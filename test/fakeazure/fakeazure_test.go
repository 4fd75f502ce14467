package fakeazure

import (
	"context"
	"errors"
	"slices"
	"testing"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"

	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/secret"
)

// A reset of a cluster's service principal as the operator's AKS client sends it, over HTTPS:
// the fake does what the test gave OnReset when the operation starts, and the operation, followed
// by its resume token from a new client as a restarted operator would, ends at the first poll in
// success, or in failure when the reset failed. An unknown cluster is not found, as Resource
// Manager says it on the wire.
func TestResetIsFollowedAcrossRequests(t *testing.T) {
	const (
		tenant = "72f988bf-86f1-41af-91ab-2d7cd011db47"
		sub    = "3f2e1d0c-9b8a-4765-8432-10fedcba9876"
		app    = "5b1f4c2e-9d3a-4e7b-8c6f-2a1d0e9b7c35"
	)
	a, err := Start(t.TempDir(), tenant, "0b4e6f8a-2c1d-4e3f-9a5b-7c6d8e9f0a1b", "operator~secret",
		func(rg, name string) (string, bool) { return app, rg == "rg" && (name == "aks" || name == "broken") })
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var applied []string
	a.OnReset(func(rg, name, clientID, secret string) error {
		applied = append(applied, rg+"/"+name+" "+clientID+" "+secret)
		if name == "broken" {
			return errors.New("the nodes did not take the secret")
		}
		return nil
	})
	client := func() *aks.Client {
		c, err := aks.New(a.ARMURL(), "https://management.core.windows.net/", a.arm.Client())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	sp := aks.ServicePrincipal{ClientID: app, Secret: secret.New("new~secret")}
	ctx, cred := context.Background(), &azfake.TokenCredential{}

	for _, tc := range []struct {
		name  string
		fails bool // the operation ends in Resource Manager's 500, which is worth retrying
	}{{"aks", false}, {"broken", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ref := aks.ClusterRef{SubscriptionID: sub, ResourceGroup: "rg", Name: tc.name}
			token, done, err := client().StartReset(ctx, cred, ref, sp)
			if err != nil || done || token == "" {
				t.Fatalf("StartReset = %q, %v, %v; want an operation under way", token, done, err)
			}
			if want := "rg/" + tc.name + " " + app + " new~secret"; !slices.Contains(applied, want) {
				t.Errorf("the reset applied %q, want %q", applied, want)
			}
			done, err = client().PollReset(ctx, cred, ref, token)
			var ae *azerr.Error
			switch {
			case !tc.fails && (!done || err != nil):
				t.Errorf("the first poll says %v, %v; want done", done, err)
			case tc.fails && (!errors.As(err, &ae) || ae.Kind != azerr.KindUnavailable):
				t.Errorf("the first poll says %v, %v; want Resource Manager unavailable", done, err)
			}
		})
	}

	elsewhere := aks.ClusterRef{SubscriptionID: sub, ResourceGroup: "rg", Name: "elsewhere"}
	_, _, err = client().StartReset(ctx, cred, elsewhere, sp)
	var ae *azerr.Error
	if !errors.As(err, &ae) || ae.Kind != azerr.KindNotFound {
		t.Errorf("a reset of a cluster Resource Manager does not know: %v, want not found", err)
	}
	if _, err := client().ReadCluster(ctx, cred, elsewhere); !errors.As(err, &ae) || ae.Kind != azerr.KindNotFound {
		t.Errorf("a read of a cluster Resource Manager does not know: %v, want not found", err)
	}
}
