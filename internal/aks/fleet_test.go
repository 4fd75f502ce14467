package aks

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"
	subfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions/fake"
	"github.com/google/go-cmp/cmp"

	"github.com/credwatch/credwatch/internal/azerr"
)

const (
	subPaged     = "0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9"
	subForbidden = "1b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9"
	subBroken    = "2b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9"
	subGroups    = "3b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9"
	fleetTenant  = "72f988bf-86f1-41af-91ab-2d7cd011db47"
)

// bySubscription routes a request to the fake of the subscription its URL names, and a listing
// of subscriptions (/subscriptions, and the fake's next pages, /subscriptions/fake_page_N) to
// the fake under "": the SDK's fake list pager is not told which subscription it lists.
type bySubscription map[string]policy.Transporter

func (b bySubscription) Do(r *http.Request) (*http.Response, error) {
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	key := ""
	if len(segs) > 2 {
		key = strings.ToLower(segs[1])
	}
	if t, ok := b[key]; ok && segs[0] == "subscriptions" {
		return t.Do(r)
	}
	return &http.Response{StatusCode: http.StatusNotFound, Request: r, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"error":{"code":"SubscriptionNotFound","message":"The subscription could not be found."}}`))}, nil
}

func managedCluster(sub, rg, name, clientID string, tags map[string]*string) *armcontainerservice.ManagedCluster {
	return &armcontainerservice.ManagedCluster{
		ID:   to.Ptr("/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.ContainerService/managedClusters/" + name),
		Name: to.Ptr(name), Tags: tags,
		Properties: &armcontainerservice.ManagedClusterProperties{
			ServicePrincipalProfile: &armcontainerservice.ManagedClusterServicePrincipalProfile{ClientID: to.Ptr(clientID)},
			ProvisioningState:       to.Ptr("Succeeded"),
			PowerState:              &armcontainerservice.PowerState{Code: to.Ptr(armcontainerservice.CodeRunning)},
		},
	}
}

func listedCluster(sub, rg, name, clientID string, tags map[string]string) ListedCluster {
	return ListedCluster{
		ID:      "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.ContainerService/managedClusters/" + name,
		Ref:     ClusterRef{SubscriptionID: sub, ResourceGroup: rg, Name: name},
		Tags:    tags,
		Cluster: Cluster{ClientID: clientID, ProvisioningState: "Succeeded", PowerState: "Running"},
	}
}

func pages(fill func(*azfake.PagerResponder[armcontainerservice.ManagedClustersClientListResponse])) *fake.ManagedClustersServer {
	return &fake.ManagedClustersServer{
		NewListPager: func(*armcontainerservice.ManagedClustersClientListOptions) (resp azfake.PagerResponder[armcontainerservice.ManagedClustersClientListResponse]) {
			fill(&resp)
			return
		},
	}
}

func listPage(clusters ...*armcontainerservice.ManagedCluster) armcontainerservice.ManagedClustersClientListResponse {
	return armcontainerservice.ManagedClustersClientListResponse{ManagedClusterListResult: armcontainerservice.ManagedClusterListResult{Value: clusters}}
}

func fleet(t *testing.T) *Client {
	t.Helper()
	const spA, spB = "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c", "4f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c"
	routes := bySubscription{
		subPaged: fake.NewManagedClustersServerTransport(pages(func(r *azfake.PagerResponder[armcontainerservice.ManagedClustersClientListResponse]) {
			r.AddPage(http.StatusOK, listPage(
				managedCluster(subPaged, "prod", "old", spA, map[string]*string{"team": to.Ptr("payments"), "legacy": nil}),
				managedCluster(subPaged, "prod", "new", "msi", nil)), nil)
			r.AddPage(http.StatusOK, listPage(managedCluster(subPaged, "dev", "old", spB, nil)), nil)
		})),
		subForbidden: fake.NewManagedClustersServerTransport(pages(func(r *azfake.PagerResponder[armcontainerservice.ManagedClustersClientListResponse]) {
			r.AddResponseError(http.StatusForbidden, "AuthorizationFailed")
		})),
		subBroken: fake.NewManagedClustersServerTransport(pages(func(r *azfake.PagerResponder[armcontainerservice.ManagedClustersClientListResponse]) {
			r.AddPage(http.StatusOK, listPage(managedCluster(subBroken, "rg", "first", spA, nil)), nil)
			r.AddResponseError(http.StatusInternalServerError, "InternalServerError")
		})),
		subGroups: fake.NewManagedClustersServerTransport(&fake.ManagedClustersServer{
			NewListByResourceGroupPager: func(rg string, _ *armcontainerservice.ManagedClustersClientListByResourceGroupOptions) (resp azfake.PagerResponder[armcontainerservice.ManagedClustersClientListByResourceGroupResponse]) {
				switch rg {
				case "missing":
					resp.AddResponseError(http.StatusNotFound, "ResourceGroupNotFound")
					return
				case "moved":
					resp.AddResponseError(http.StatusNotFound, "SubscriptionNotFound")
					return
				}
				resp.AddPage(http.StatusOK, armcontainerservice.ManagedClustersClientListByResourceGroupResponse{ManagedClusterListResult: armcontainerservice.ManagedClusterListResult{
					Value: []*armcontainerservice.ManagedCluster{managedCluster(subGroups, rg, "aks", spB, nil)},
				}}, nil)
				return
			},
		}),
		"": subfake.NewServerTransport(&subfake.Server{
			NewListPager: func(*armsubscriptions.ClientListOptions) (resp azfake.PagerResponder[armsubscriptions.ClientListResponse]) {
				sub := func(id, tenant, name string, state armsubscriptions.SubscriptionState) *armsubscriptions.Subscription {
					return &armsubscriptions.Subscription{SubscriptionID: to.Ptr(id), TenantID: to.Ptr(tenant), DisplayName: to.Ptr(name), State: to.Ptr(state)}
				}
				resp.AddPage(http.StatusOK, armsubscriptions.ClientListResponse{SubscriptionListResult: armsubscriptions.SubscriptionListResult{Value: []*armsubscriptions.Subscription{
					sub(strings.ToUpper(subPaged), fleetTenant, "Production", armsubscriptions.SubscriptionStateEnabled),
					// A tenant the identity is a guest in.
					sub(subForbidden, "11111111-1111-4111-8111-111111111111", "Partner", armsubscriptions.SubscriptionStateEnabled),
				}}}, nil)
				resp.AddPage(http.StatusOK, armsubscriptions.ClientListResponse{SubscriptionListResult: armsubscriptions.SubscriptionListResult{Value: []*armsubscriptions.Subscription{
					sub(subBroken, fleetTenant, "Old lab", armsubscriptions.SubscriptionStateDisabled),
					sub(subGroups, fleetTenant, "Gone", armsubscriptions.SubscriptionStateDeleted),
				}}}, nil)
				return
			},
		}),
	}
	c, err := New("https://management.azure.com", "https://management.core.windows.net/", routes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestListClusters(t *testing.T) {
	const spA, spB = "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c", "4f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c"
	c := fleet(t)
	tests := map[string]struct {
		sub      string
		groups   []string
		want     []ListedCluster
		wantKind azerr.Kind
		wantCode string
	}{
		"every page, both identity types": {sub: subPaged, want: []ListedCluster{
			listedCluster(subPaged, "prod", "old", spA, map[string]string{"team": "payments", "legacy": ""}),
			listedCluster(subPaged, "prod", "new", "", nil),
			listedCluster(subPaged, "dev", "old", spB, nil),
		}},
		"refused": {sub: subForbidden, wantKind: azerr.KindForbidden, wantCode: "AuthorizationFailed"},
		// What came before the failure is kept, and the error says the listing is incomplete.
		"a page fails": {sub: subBroken, want: []ListedCluster{listedCluster(subBroken, "rg", "first", spA, nil)},
			wantKind: azerr.KindUnavailable, wantCode: "InternalServerError"},
		"resource groups": {sub: subGroups, groups: []string{"a", "b"}, want: []ListedCluster{
			listedCluster(subGroups, "a", "aks", spB, nil), listedCluster(subGroups, "b", "aks", spB, nil),
		}},
		// A fleet names resource groups for every subscription: most hold none of them.
		"a resource group that is not there": {sub: subGroups, groups: []string{"a", "missing", "b"}, want: []ListedCluster{
			listedCluster(subGroups, "a", "aks", spB, nil), listedCluster(subGroups, "b", "aks", spB, nil),
		}},
		// Any other 404 is a failure: the subscription, not the group, is missing.
		"a subscription that is not there": {sub: subGroups, groups: []string{"a", "moved", "b"},
			want: []ListedCluster{listedCluster(subGroups, "a", "aks", spB, nil)}, wantKind: azerr.KindNotFound, wantCode: "SubscriptionNotFound"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := c.ListClusters(ctx, &azfake.TokenCredential{}, tc.sub, tc.groups)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("clusters (-want +got):\n%s", diff)
			}
			if tc.wantCode == "" {
				if err != nil {
					t.Fatalf("ListClusters: %v", err)
				}
				return
			}
			var ae *azerr.Error
			if !errors.As(err, &ae) || ae.Kind != tc.wantKind || ae.Code != tc.wantCode {
				t.Fatalf("error = %v, want kind %v, code %q", err, tc.wantKind, tc.wantCode)
			}
			if tc.wantKind == azerr.KindForbidden && ae.Needs != actionRead {
				t.Errorf("a refusal names %q, want %q", ae.Needs, actionRead)
			}
		})
	}
}

func TestListSubscriptions(t *testing.T) {
	c := fleet(t)
	got, err := c.ListSubscriptions(context.Background(), &azfake.TokenCredential{}, strings.ToUpper(fleetTenant))
	if err != nil {
		t.Fatal(err)
	}
	want := []Subscription{{ID: subPaged, DisplayName: "Production", State: "Enabled"}, {ID: subBroken, DisplayName: "Old lab", State: "Disabled"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("subscriptions (-want +got):\n%s", diff)
	}

	refused := subfake.NewServerTransport(&subfake.Server{
		NewListPager: func(*armsubscriptions.ClientListOptions) (resp azfake.PagerResponder[armsubscriptions.ClientListResponse]) {
			resp.AddResponseError(http.StatusForbidden, "AuthorizationFailed")
			return
		},
	})
	c, err = New("https://management.azure.com", "https://management.core.windows.net/", refused)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListSubscriptions(context.Background(), &azfake.TokenCredential{}, fleetTenant)
	var ae *azerr.Error
	if !errors.As(err, &ae) || ae.Kind != azerr.KindForbidden || ae.Needs != actionSubscriptions {
		t.Errorf("error = %v, want a refusal naming %s", err, actionSubscriptions)
	}
}
