package controllers

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	armfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/internal/target"
)

// armClusters are the AKS clusters Resource Manager knows, served through the SDK's own fake.
type armClusters struct {
	mu       sync.Mutex
	clientID map[string]string // resourceGroup/name: servicePrincipalProfile.clientId
	state    map[string]string // resourceGroup/name: provisioningState, Succeeded when absent
	// secret is the secret each cluster was last reset to, for tests to check it still exists.
	secret map[string]string
	// resets counts reset operations started; resetOutcome says how the next one ends:
	// "" succeeds, "fails-after-applying" reports a failure with the change applied,
	// "leaves-failed" reports a failure and leaves the cluster Failed.
	resets       int
	resetOutcome string
	transport    *armfake.ManagedClustersServerTransport
}

// Do gives every new reset operation a fresh fake server: the SDK's fake keeps an operation that
// ended in an error in its tracker for good, and would answer the next reset on the same cluster
// with it. Polls go to the server of the latest operation, as they would to Resource Manager.
func (c *armClusters) Do(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/resetServicePrincipalProfile") && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"clientId"`)) {
			c.mu.Lock()
			c.transport = armfake.NewManagedClustersServerTransport(c.server())
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	t := c.transport
	c.mu.Unlock()
	return t.Do(req)
}

func (c *armClusters) put(rg, name, clientID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clientID[rg+"/"+name] = clientID
}

func (c *armClusters) remove(rg, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.clientID, rg+"/"+name)
}

func (c *armClusters) reader() *aks.Client {
	if c.transport == nil {
		c.transport = armfake.NewManagedClustersServerTransport(c.server())
	}
	r, err := aks.New("https://management.azure.com", "https://management.core.windows.net/", c)
	if err != nil {
		panic(err)
	}
	return r
}

func (c *armClusters) server() *armfake.ManagedClustersServer {
	return &armfake.ManagedClustersServer{
		BeginResetServicePrincipalProfile: func(_ context.Context, rg, name string, p armcontainerservice.ManagedClusterServicePrincipalProfile, _ *armcontainerservice.ManagedClustersClientBeginResetServicePrincipalProfileOptions) (resp azfake.PollerResponder[armcontainerservice.ManagedClustersClientResetServicePrincipalProfileResponse], errResp azfake.ErrorResponder) {
			c.mu.Lock()
			defer c.mu.Unlock()
			key := rg + "/" + name
			if _, ok := c.clientID[key]; !ok {
				errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
				return
			}
			if p.ClientID == nil {
				// A poll of an operation the SDK's fake has forgotten because it ended: Resource
				// Manager's operation URL goes on answering with the final state.
				resp.SetTerminalResponse(http.StatusOK, armcontainerservice.ManagedClustersClientResetServicePrincipalProfileResponse{}, nil)
				return
			}
			c.resets++
			c.clientID[key], c.secret[key] = *p.ClientID, *p.Secret
			c.state[key] = "Updating"
			resp.AddNonTerminalResponse(http.StatusAccepted, nil)
			resp.AddNonTerminalResponse(http.StatusAccepted, nil)
			switch c.resetOutcome {
			case "stuck":
				for range 1000 {
					resp.AddNonTerminalResponse(http.StatusAccepted, nil)
				}
				resp.SetTerminalResponse(http.StatusOK, armcontainerservice.ManagedClustersClientResetServicePrincipalProfileResponse{}, nil)
			case "fails-after-applying":
				c.state[key] = "Succeeded"
				resp.SetTerminalError(http.StatusInternalServerError, "InternalOperationError")
			case "leaves-failed":
				c.state[key] = "Failed"
				resp.SetTerminalError(http.StatusInternalServerError, "InternalOperationError")
			default:
				c.state[key] = "Succeeded"
				resp.SetTerminalResponse(http.StatusOK, armcontainerservice.ManagedClustersClientResetServicePrincipalProfileResponse{}, nil)
			}
			return
		},
		Get: func(_ context.Context, rg, name string, _ *armcontainerservice.ManagedClustersClientGetOptions) (resp azfake.Responder[armcontainerservice.ManagedClustersClientGetResponse], errResp azfake.ErrorResponder) {
			c.mu.Lock()
			clientID, ok := c.clientID[rg+"/"+name]
			state := c.state[rg+"/"+name]
			c.mu.Unlock()
			if state == "" {
				state = "Succeeded"
			}
			if !ok {
				errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
				return
			}
			resp.SetResponse(http.StatusOK, armcontainerservice.ManagedClustersClientGetResponse{ManagedCluster: armcontainerservice.ManagedCluster{
				Name: to.Ptr(name),
				Properties: &armcontainerservice.ManagedClusterProperties{
					ServicePrincipalProfile: &armcontainerservice.ManagedClusterServicePrincipalProfile{ClientID: to.Ptr(clientID)},
					ProvisioningState:       to.Ptr(state),
					PowerState:              &armcontainerservice.PowerState{Code: to.Ptr(armcontainerservice.CodeRunning)},
				},
			}}, nil)
			return
		},
	}
}

func newARMClusters() *armClusters {
	return &armClusters{clientID: map[string]string{}, state: map[string]string{}, secret: map[string]string{}}
}

func TestAKSClusterTarget(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 20*day, 300*day, 200*day)
	arm := newARMClusters()
	h.r.Azure = clients.New(identities, graphAPI, arm.reader())
	arm.put("rg-prod", "aks-prod", s.appID)
	h.create("", func(spec *v1alpha1.CredentialWatchSpec) {
		spec.Target = v1alpha1.Target{AKSCluster: &v1alpha1.AKSClusterTarget{
			TenantID: tenantID, SubscriptionID: "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918", ResourceGroup: "rg-prod", Name: "aks-prod"}}
	})

	// The cluster's service principal is watched like any other.
	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	assertCondition(t, w, v1alpha1.ConditionExpiring, metav1.ConditionTrue, v1alpha1.ReasonWithinWarning)
	if c := w.Status.AKSCluster; c == nil || c.Identity != v1alpha1.IdentityServicePrincipal || c.ClientID != s.appID || c.ProvisioningState != "Succeeded" || c.PowerState != "Running" {
		t.Errorf("aksCluster = %+v, want the cluster on service principal %s", c, s.appID)
	}
	if w.Status.ServicePrincipal.AppID != s.appID || len(w.Status.Credentials) != 3 {
		t.Errorf("watching appId %q with %d credentials, want %s with 3", w.Status.ServicePrincipal.AppID, len(w.Status.Credentials), s.appID)
	}
	h.takeEvents()

	// Someone moves the cluster to another service principal.
	other := seed(t, h.clock.Now(), 300*day, 300*day, 300*day)
	arm.put("rg-prod", "aks-prod", other.appID)
	h.step(6 * time.Hour)
	w, _ = h.reconcile()
	if w.Status.ServicePrincipal.AppID != other.appID || w.Status.Credentials[0].KeyID == s.appSecretKey {
		t.Errorf("after the switch the watch reads %s, want %s", w.Status.ServicePrincipal.AppID, other.appID)
	}
	assertCondition(t, w, v1alpha1.ConditionExpiring, metav1.ConditionFalse, v1alpha1.ReasonNoneExpiring)
	events := h.takeEvents()
	if n := countPrefix(events, "Normal ServicePrincipalChanged The AKS cluster now signs in with service principal "+other.appID+" (it was service principal "+s.appID+")"); n != 1 {
		t.Errorf("events = %q, want one ServicePrincipalChanged", events)
	}

	// Then to a managed identity: nothing left to expire, and that is not an error.
	arm.put("rg-prod", "aks-prod", "msi")
	h.step(6 * time.Hour)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonManagedIdentity)
	if w.Status.AKSCluster.Identity != v1alpha1.IdentityManagedIdentity || len(w.Status.Credentials) != 0 || w.Status.ServicePrincipal != nil {
		t.Errorf("status = %+v, want a managed identity and no credentials", w.Status)
	}
	if events := h.takeEvents(); countPrefix(events, "Normal ServicePrincipalChanged The AKS cluster now signs in with a managed identity") != 1 {
		t.Errorf("events = %q, want one ServicePrincipalChanged to a managed identity", events)
	}

	// A deleted cluster is ClusterNotFound, not a Graph problem.
	arm.remove("rg-prod", "aks-prod")
	h.step(6 * time.Hour)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonClusterNotFound)
	if msg := target.Condition(w, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "reading AKS cluster rg-prod/aks-prod: not found (HTTP 404, ResourceNotFound)") {
		t.Errorf("message %q does not say which cluster is missing", msg)
	}
	if w.Status.AKSCluster != nil {
		t.Errorf("aksCluster = %+v after the cluster was deleted, want none", w.Status.AKSCluster)
	}
}
