package aks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/secret"
)

// managedIdentityClientID is what servicePrincipalProfile.clientId holds on a cluster that signs
// in with a managed identity instead of a service principal.
const managedIdentityClientID = "msi"

// The Resource Manager actions the requests of a watch need, named in a refusal's error: ARM
// authorizes each request against the caller's roles by action (Reader holds the reads,
// Contributor the reset).
const (
	actionRead  = "Microsoft.ContainerService/managedClusters/read"
	actionReset = "Microsoft.ContainerService/managedClusters/resetServicePrincipalProfile/action"
	// A long-running operation is followed at the location-level URLs Resource Manager returns
	// in Azure-AsyncOperation and Location.
	actionOperations       = "Microsoft.ContainerService/locations/operations/read"
	actionOperationResults = "Microsoft.ContainerService/locations/operationresults/read"
)

// Cluster is what a watch needs to know of a managed cluster.
type Cluster struct {
	// ClientID is the appId of the service principal the cluster signs in with, empty when it
	// uses a managed identity.
	ClientID string
	// ProvisioningState is Resource Manager's: Succeeded, Updating, Failed, ...
	ProvisioningState string
	// PowerState is Running or Stopped.
	PowerState string
}

// ClusterRef names a managed cluster: a struct, so that its three names cannot be swapped.
type ClusterRef struct {
	SubscriptionID, ResourceGroup, Name string
}

func (r ClusterRef) String() string { return r.ResourceGroup + "/" + r.Name }

// ServicePrincipal is what a reset moves a cluster onto: a client and its secret, which never
// prints (see package secret).
type ServicePrincipal struct {
	ClientID string
	Secret   secret.Text
}

// ClusterClient is one managed cluster, as one identity sees it.
type ClusterClient interface {
	Read(ctx context.Context) (Cluster, error)
	// StartReset begins moving the cluster onto sp; see Client.StartReset.
	StartReset(ctx context.Context, sp ServicePrincipal) (token string, done bool, err error)
	// PollReset asks once how the reset behind token is doing; see Client.PollReset.
	PollReset(ctx context.Context, token string) (done bool, err error)
}

// FleetClient is the managed clusters of one tenant's subscriptions, as one identity sees them.
type FleetClient interface {
	// Subscriptions lists the tenant's subscriptions the identity can see.
	Subscriptions(ctx context.Context) ([]Subscription, error)
	// Clusters lists the clusters of a subscription, or of some of its resource groups; see
	// Client.ListClusters, whose partial answers it keeps.
	Clusters(ctx context.Context, subscriptionID string, resourceGroups []string) ([]ListedCluster, error)
}

// Client reads managed clusters from one Resource Manager endpoint.
type Client struct {
	options arm.ClientOptions
	host    string
}

// New returns a Client for the Resource Manager endpoint and its token audience (for the public
// cloud https://management.azure.com and https://management.core.windows.net/). transport carries
// the requests: nil for the network, the SDK's fake server in tests.
func New(endpoint, audience string, transport policy.Transporter) (*Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("ARM endpoint %q: want an https URL such as https://management.azure.com", endpoint)
	}
	return &Client{host: u.Host, options: arm.ClientOptions{ClientOptions: azcore.ClientOptions{
		Cloud: cloud.Configuration{Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Endpoint: endpoint, Audience: audience},
		}},
		Transport: transport,
		// The controller schedules its own retries, visible in status; the SDK's would sleep in a worker.
		Retry: policy.RetryOptions{MaxRetries: -1},
	}}}, nil
}

// ReadCluster reads the managed cluster ref.
func (c *Client) ReadCluster(ctx context.Context, cred azcore.TokenCredential, ref ClusterRef) (Cluster, error) {
	client, err := armcontainerservice.NewManagedClustersClient(ref.SubscriptionID, azerr.Credential{TokenCredential: cred}, &c.options)
	if err != nil {
		return Cluster{}, err
	}
	resp, err := client.Get(ctx, ref.ResourceGroup, ref.Name, nil)
	if err != nil {
		return Cluster{}, fmt.Errorf("reading AKS cluster %s: %w", ref, classify(err, actionRead))
	}
	return clusterOf(resp.Properties), nil
}

func clusterOf(p *armcontainerservice.ManagedClusterProperties) Cluster {
	var out Cluster
	if p == nil {
		return out
	}
	if sp := p.ServicePrincipalProfile; sp != nil && sp.ClientID != nil && !strings.EqualFold(*sp.ClientID, managedIdentityClientID) {
		out.ClientID = *sp.ClientID
	}
	if p.ProvisioningState != nil {
		out.ProvisioningState = *p.ProvisioningState
	}
	if p.PowerState != nil && p.PowerState.Code != nil {
		out.PowerState = string(*p.PowerState.Code)
	}
	return out
}

// StartReset begins resetting the cluster's service principal profile to sp (the
// way `az aks update-credentials --reset-service-principal` does; a profile cannot be patched).
// It returns the operation's resume token, or done when Resource Manager finished it at once. The
// token names the operation, not the secret: it is safe to keep in status, and PollReset follows
// the same operation after a restart instead of starting another one.
func (c *Client) StartReset(ctx context.Context, cred azcore.TokenCredential, ref ClusterRef, sp ServicePrincipal) (token string, done bool, err error) {
	client, err := armcontainerservice.NewManagedClustersClient(ref.SubscriptionID, azerr.Credential{TokenCredential: cred}, &c.options)
	if err != nil {
		return "", false, err
	}
	text := sp.Secret.Reveal()
	poller, err := client.BeginResetServicePrincipalProfile(ctx, ref.ResourceGroup, ref.Name,
		armcontainerservice.ManagedClusterServicePrincipalProfile{ClientID: &sp.ClientID, Secret: &text}, nil)
	if err != nil {
		return "", false, classifyReset(ref, err, actionReset)
	}
	if poller.Done() {
		if _, err := poller.Result(ctx); err != nil {
			return "", false, classifyReset(ref, err, actionReset)
		}
		return "", true, nil
	}
	token, err = poller.ResumeToken()
	return token, false, err
}

// PollReset asks once how the reset operation behind token is doing. done is true when it has
// ended well. An error may mean the operation failed or only that this poll did: either way the
// cluster, read back, says what was applied (resets have failed after applying the change). It
// does not wait: the controller comes back later.
func (c *Client) PollReset(ctx context.Context, cred azcore.TokenCredential, ref ClusterRef, token string) (done bool, err error) {
	client, err := armcontainerservice.NewManagedClustersClient(ref.SubscriptionID, azerr.Credential{TokenCredential: cred}, &c.options)
	if err != nil {
		return false, err
	}
	if err := c.checkResumeToken(token, ref.SubscriptionID); err != nil {
		return false, err
	}
	poller, err := client.BeginResetServicePrincipalProfile(ctx, ref.ResourceGroup, ref.Name, armcontainerservice.ManagedClusterServicePrincipalProfile{},
		&armcontainerservice.ManagedClustersClientBeginResetServicePrincipalProfileOptions{ResumeToken: token})
	if err != nil {
		return false, fmt.Errorf("resuming the reset of AKS cluster %s: %w", ref, classify(err, actionOperations))
	}
	resp, err := poller.Poll(ctx)
	if resp != nil {
		_ = resp.Body.Close() // the poller has read what it needs of it
	}
	if err != nil {
		return false, classifyReset(ref, err, actionOperations)
	}
	if !poller.Done() {
		return false, nil
	}
	if _, err := poller.Result(ctx); err != nil {
		return false, classifyReset(ref, err, actionOperations)
	}
	return true, nil
}

// checkResumeToken refuses a resume token whose URLs lead anywhere but the cluster's subscription
// on this Resource Manager: the
// poller sends its bearer token to them, and the token is kept in the watch's status, which
// whoever may write status can change.
func (c *Client) checkResumeToken(token, subscriptionID string) error {
	var doc any
	if err := json.Unmarshal([]byte(token), &doc); err != nil {
		return fmt.Errorf("the reset's resume token is not one credwatch kept: %w", err)
	}
	var bad error
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case string:
			u, err := url.Parse(v)
			if err != nil || u.Scheme == "" {
				return
			}
			if u.Scheme != "https" || !strings.EqualFold(u.Host, c.host) ||
				!strings.HasPrefix(strings.ToLower(u.Path), "/subscriptions/"+strings.ToLower(subscriptionID)+"/") {
				bad = fmt.Errorf("the reset's resume token leads to %s%s, not to the cluster's subscription on Resource Manager at %s: it is not followed", u.Host, u.Path, c.host)
			}
		}
	}
	walk(doc)
	return bad
}

// classifyReset classifies a failure of the reset; see classify for the action a refusal names.
func classifyReset(ref ClusterRef, err error, action string) error {
	return fmt.Errorf("resetting the service principal of AKS cluster %s: %w", ref, classify(err, action))
}

// classify sorts a Resource Manager failure into an azerr.Error; a refusal names action, or what
// its URL shows it needed when the refused request followed an operation. Sign-in failures
// arrive sorted already, from azerr.Credential.
func classify(err error, action string) error {
	var ae *azerr.Error
	if errors.As(err, &ae) {
		return ae.Needing(action)
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		var after time.Duration
		if re.RawResponse != nil {
			after = azerr.RetryAfterSeconds(re.RawResponse.Header.Get("Retry-After"))
			if re.RawResponse.Request != nil {
				action = operationAction(re.RawResponse.Request.URL.Path, action)
			}
		}
		ae := &azerr.Error{Kind: azerr.KindOfStatus(re.StatusCode), Status: re.StatusCode, Code: re.ErrorCode, RetryAfter: after, Err: err}
		return ae.Needing(action)
	}
	if ue := azerr.Unanswered(err); ue != nil {
		return ue
	}
	return &azerr.Error{Kind: azerr.KindOther, Err: err}
}

// operationAction is the action a request to path needs when path is one of the location-level
// URLs a long-running operation is followed at,
// /subscriptions/{id}/providers/Microsoft.ContainerService/locations/{location}/operations/{id}
// or .../operationresults/{id}; otherwise it is action, what the caller asked for.
func operationAction(path, action string) string {
	segs := strings.Split(strings.Trim(strings.ToLower(path), "/"), "/")
	for i := 1; i+2 < len(segs); i++ {
		if segs[i-1] != "microsoft.containerservice" || segs[i] != "locations" {
			continue
		}
		switch segs[i+2] {
		case "operations":
			return actionOperations
		case "operationresults":
			return actionOperationResults
		}
	}
	return action
}

// OperationID names the operation a resume token follows, as the last segment of the
// Azure-AsyncOperation or Location URL it holds; empty when the token holds neither.
func OperationID(token string) string {
	var doc struct {
		Token struct {
			AsyncURL string `json:"asyncURL"`
			LocURL   string `json:"locURL"`
		} `json:"token"`
	}
	if json.Unmarshal([]byte(token), &doc) != nil {
		return ""
	}
	for _, raw := range []string{doc.Token.AsyncURL, doc.Token.LocURL} {
		if u, err := url.Parse(raw); err == nil && raw != "" {
			return path.Base(u.Path)
		}
	}
	return ""
}
