package aks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"

	"github.com/credwatch/credwatch/internal/azerr"
)

// actionList is what listing a subscription's or a resource group's clusters needs: the same
// read action as one cluster, at the scope listed.
const actionList = actionRead

// ListedCluster is one managed cluster as a listing shows it.
type ListedCluster struct {
	// ID is the cluster's resource ID as Resource Manager spells it.
	ID  string
	Ref ClusterRef
	// Tags are the cluster's Azure tags; a tag without a value has "".
	Tags map[string]string
	Cluster
}

// ListClusters lists the managed clusters of a subscription, or only those of resourceGroups
// when any are given (an identity whose scope is some resource groups may not list the whole
// subscription). It follows every page. On a failure it returns the clusters listed before it
// with the error: a caller must not take a cluster missing from an incomplete listing for gone.
func (c *Client) ListClusters(ctx context.Context, cred azcore.TokenCredential, subscriptionID string, resourceGroups []string) ([]ListedCluster, error) {
	client, err := armcontainerservice.NewManagedClustersClient(subscriptionID, azerr.Credential{TokenCredential: cred}, &c.options)
	if err != nil {
		return nil, err
	}
	if len(resourceGroups) == 0 {
		return listPages(ctx, client.NewListPager(nil), "subscription "+subscriptionID,
			func(r armcontainerservice.ManagedClustersClientListResponse) armcontainerservice.ManagedClusterListResult {
				return r.ManagedClusterListResult
			})
	}
	var out []ListedCluster
	for _, rg := range resourceGroups {
		listed, err := listPages(ctx, client.NewListByResourceGroupPager(rg, nil), "resource group "+rg+" of subscription "+subscriptionID,
			func(r armcontainerservice.ManagedClustersClientListByResourceGroupResponse) armcontainerservice.ManagedClusterListResult {
				return r.ManagedClusterListResult
			})
		out = append(out, listed...)
		var ae *azerr.Error
		if errors.As(err, &ae) && ae.Code == "ResourceGroupNotFound" && len(listed) == 0 {
			// A fleet names resource groups for every subscription it searches: most hold
			// none of them.
			continue
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// listPages reads every page of pager; where names what is listed, for errors.
func listPages[R any](ctx context.Context, pager *runtime.Pager[R], where string, result func(R) armcontainerservice.ManagedClusterListResult) ([]ListedCluster, error) {
	var out []ListedCluster
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return out, fmt.Errorf("listing the AKS clusters of %s: %w", where, classify(err, actionList))
		}
		for _, mc := range result(page).Value {
			if mc == nil || mc.ID == nil {
				continue
			}
			// What is not a managed cluster's resource ID names nothing a watch could act on.
			if lc, ok := listed(mc); ok {
				out = append(out, lc)
			}
		}
	}
	return out, nil
}

func listed(mc *armcontainerservice.ManagedCluster) (ListedCluster, bool) {
	id, err := arm.ParseResourceID(*mc.ID)
	if err != nil || !strings.EqualFold(id.ResourceType.String(), "Microsoft.ContainerService/managedClusters") {
		return ListedCluster{}, false
	}
	lc := ListedCluster{
		ID:      *mc.ID,
		Ref:     ClusterRef{SubscriptionID: id.SubscriptionID, ResourceGroup: id.ResourceGroupName, Name: id.Name},
		Cluster: clusterOf(mc.Properties),
	}
	if len(mc.Tags) > 0 {
		lc.Tags = make(map[string]string, len(mc.Tags))
		for k, v := range mc.Tags {
			lc.Tags[k] = ""
			if v != nil {
				lc.Tags[k] = *v
			}
		}
	}
	return lc, true
}
