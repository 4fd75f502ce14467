// Package fakeazure stands up Azure for a credwatch binary running as its own process: Microsoft
// Graph and Entra ID (test/fakegraph), and Resource Manager (the SDK's own fakes of managed
// clusters and subscriptions behind HTTPS), with the flags and environment that point the binary at them and give it
// an identity, the same way a sovereign cloud is configured.
package fakeazure

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	armfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"
	subfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions/fake"

	"github.com/credwatch/credwatch/test/fakegraph"
)

// Cluster answers what servicePrincipalProfile.clientId a cluster has ("msi" for a managed
// identity), and whether it exists.
type Cluster func(resourceGroup, name string) (clientID string, ok bool)

// Reset does what AKS does when a cluster's service principal is reset: it gives the cluster's
// nodes the client ID and secret. The operation succeeds only once it returns nil, as AKS's
// ends once its nodes run on the new secret.
type Reset func(resourceGroup, name, clientID, secret string) error

// Azure is the fakes of one tenant, and the identity the operator signs in to it with.
type Azure struct {
	Graph *fakegraph.Server
	arm   *httptest.Server
	ca    string

	tenantID, clientID, secret string
	clusters                   Cluster

	mu sync.Mutex
	// fleet are the clusters Resource Manager lists, by subscription: "resourceGroup/name".
	fleet map[string][]string
	// onReset is what a reset of a cluster does. resets are the fakes of resets, by
	// subscription, which keep each operation between the requests that poll it.
	onReset Reset
	resets  map[string]policy.Transporter
}

// Start starts the fakes. The operator signs in to tenantID as clientID with secret; dir holds
// the CA bundle that makes the binary trust the fakes' certificates.
func Start(dir, tenantID, clientID, secret string, clusters Cluster) (*Azure, error) {
	return StartOn(dir, tenantID, clientID, secret, clusters, "", nil)
}

// StartOn is Start with both fakes listening on host, an address of this machine, with cert: for
// an operator that reaches them elsewhere than on loopback (from a test cluster's pod) and is
// told cert's CA. An empty host and a nil cert are loopback and httptest's certificates.
func StartOn(dir, tenantID, clientID, secret string, clusters Cluster, host string, cert *tls.Certificate) (*Azure, error) {
	listen := func() (net.Listener, error) {
		if host == "" {
			return nil, nil
		}
		return net.Listen("tcp", net.JoinHostPort(host, "0"))
	}
	graphListener, err := listen()
	if err != nil {
		return nil, err
	}
	armListener, err := listen()
	if err != nil {
		return nil, err
	}
	a := &Azure{Graph: fakegraph.NewOn(graphListener, cert), tenantID: tenantID, clientID: clientID, secret: secret, clusters: clusters, fleet: map[string][]string{}, resets: map[string]policy.Transporter{}}
	a.Graph.AddClient(tenantID, clientID, secret)
	a.arm = a.armServer(armListener, cert)
	a.ca = filepath.Join(dir, "fake-azure-ca.pem")
	bundle := append(a.Graph.CertPEM(), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.arm.Certificate().Raw})...)
	if err := os.WriteFile(a.ca, bundle, 0o600); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// Close stops the fakes.
func (a *Azure) Close() {
	a.arm.Close()
	a.Graph.Close()
}

// Flags point the operator's endpoints at the fakes.
func (a *Azure) Flags() []string {
	return []string{"--azure-authority-host", a.Graph.URL() + "/", "--graph-endpoint", a.Graph.URL(), "--arm-endpoint", a.arm.URL}
}

// Env makes the binary trust the fakes and sign in as the operator's identity, through
// azidentity's environment credential, the first DefaultAzureCredential tries.
func (a *Azure) Env() []string {
	return []string{"SSL_CERT_FILE=" + a.ca, "AZURE_TENANT_ID=" + a.tenantID, "AZURE_CLIENT_ID=" + a.clientID, "AZURE_CLIENT_SECRET=" + a.secret}
}

// AddToFleet makes Resource Manager list the cluster resourceGroup/name in subscriptionID (in
// the tenant), for fleet watches; what it signs in with is what Start's Cluster says.
func (a *Azure) AddToFleet(subscriptionID, resourceGroup, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fleet[subscriptionID] = append(a.fleet[subscriptionID], resourceGroup+"/"+name)
}

// OnReset sets what a reset of a cluster's service principal does; until it is set, Resource
// Manager refuses resets as invalid.
func (a *Azure) OnReset(reset Reset) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.onReset = reset
}

func (a *Azure) managedCluster(sub, rg, name string) (armcontainerservice.ManagedCluster, bool) {
	clientID, ok := a.clusters(rg, name)
	return armcontainerservice.ManagedCluster{
		ID:   to.Ptr("/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.ContainerService/managedClusters/" + name),
		Name: to.Ptr(name), Properties: &armcontainerservice.ManagedClusterProperties{
			ServicePrincipalProfile: &armcontainerservice.ManagedClusterServicePrincipalProfile{ClientID: to.Ptr(clientID)},
			ProvisioningState:       to.Ptr("Succeeded"),
			PowerState:              &armcontainerservice.PowerState{Code: to.Ptr(armcontainerservice.CodeRunning)},
		}}, ok
}

// transport is the SDK's fakes for one request: the subscriptions list, a subscription's list of
// clusters (one page, built afresh, so that no pager outlives its listing), a cluster's read, or
// a reset of its service principal and the polls that follow it.
func (a *Azure) transport(sub, api string) (policy.Transporter, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if api == apiReset {
		return a.resetTransport(sub), api
	}
	subs := slices.Sorted(maps.Keys(a.fleet))
	listed := slices.Clone(a.fleet[sub])
	if sub == "" {
		return subfake.NewServerTransport(&subfake.Server{
			NewListPager: func(*armsubscriptions.ClientListOptions) (resp azfake.PagerResponder[armsubscriptions.ClientListResponse]) {
				var page armsubscriptions.ClientListResponse
				for _, id := range subs {
					page.Value = append(page.Value, &armsubscriptions.Subscription{SubscriptionID: to.Ptr(id), TenantID: to.Ptr(a.tenantID),
						DisplayName: to.Ptr("subscription " + id[:8]), State: to.Ptr(armsubscriptions.SubscriptionStateEnabled)})
				}
				resp.AddPage(http.StatusOK, page, nil)
				return
			},
		}), "Client.NewListPager"
	}
	return armfake.NewManagedClustersServerTransport(&armfake.ManagedClustersServer{
		Get: func(_ context.Context, rg, name string, _ *armcontainerservice.ManagedClustersClientGetOptions) (resp azfake.Responder[armcontainerservice.ManagedClustersClientGetResponse], errResp azfake.ErrorResponder) {
			mc, ok := a.managedCluster(sub, rg, name)
			if !ok {
				errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
				return
			}
			resp.SetResponse(http.StatusOK, armcontainerservice.ManagedClustersClientGetResponse{ManagedCluster: mc}, nil)
			return
		},
		NewListPager: func(*armcontainerservice.ManagedClustersClientListOptions) (resp azfake.PagerResponder[armcontainerservice.ManagedClustersClientListResponse]) {
			var page armcontainerservice.ManagedClustersClientListResponse
			for _, c := range listed {
				rg, name, _ := strings.Cut(c, "/")
				if mc, ok := a.managedCluster(sub, rg, name); ok {
					page.Value = append(page.Value, &mc)
				}
			}
			resp.AddPage(http.StatusOK, page, nil)
			return
		},
	}), ""
}

const apiReset = "ManagedClustersClient.BeginResetServicePrincipalProfile"

// resetTransport is the subscription's fake of resets, which lives as long as the fakes: the
// operation it starts is polled by later requests (at .../resetServicePrincipalProfile/get/fake/status).
// The reset is applied when it starts, and the operation ends at the first poll: one poll is
// what a long operation needs to be followed across requests.
func (a *Azure) resetTransport(sub string) policy.Transporter {
	if t, ok := a.resets[sub]; ok {
		return t
	}
	t := armfake.NewManagedClustersServerTransport(&armfake.ManagedClustersServer{
		BeginResetServicePrincipalProfile: func(_ context.Context, rg, name string, p armcontainerservice.ManagedClusterServicePrincipalProfile, _ *armcontainerservice.ManagedClustersClientBeginResetServicePrincipalProfileOptions) (resp azfake.PollerResponder[armcontainerservice.ManagedClustersClientResetServicePrincipalProfileResponse], errResp azfake.ErrorResponder) {
			a.mu.Lock()
			reset := a.onReset
			a.mu.Unlock()
			if _, ok := a.managedCluster(sub, rg, name); !ok {
				errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
				return
			}
			if reset == nil || p.ClientID == nil || p.Secret == nil {
				errResp.SetResponseError(http.StatusBadRequest, "InvalidParameter")
				return
			}
			resp.AddNonTerminalResponse(http.StatusAccepted, nil)
			if err := reset(rg, name, *p.ClientID, *p.Secret); err != nil {
				resp.SetTerminalError(http.StatusInternalServerError, "InternalOperationError")
				return
			}
			resp.SetTerminalResponse(http.StatusOK, armcontainerservice.ManagedClustersClientResetServicePrincipalProfileResponse{}, nil)
			return
		},
	})
	a.resets[sub] = t
	return t
}

// armServer serves the SDK's fakes over HTTPS.
func (a *Azure) armServer(l net.Listener, cert *tls.Certificate) *httptest.Server {
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The fakes dispatch on the API name the SDK client puts in the request's context, which
		// does not cross the wire: it is told from the path.
		segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		sub, api := "", "ManagedClustersClient.Get"
		switch {
		case len(segs) <= 2: // /subscriptions
		case strings.EqualFold(segs[len(segs)-1], "managedClusters"):
			sub, api = segs[1], "ManagedClustersClient.NewListPager"
		case slices.ContainsFunc(segs, func(s string) bool { return strings.EqualFold(s, "resetServicePrincipalProfile") }):
			sub, api = segs[1], apiReset
		default:
			sub = segs[1]
		}
		transport, subsAPI := a.transport(strings.ToLower(sub), api)
		if subsAPI != "" {
			api = subsAPI
		}
		out := r.Clone(context.WithValue(r.Context(), runtime.CtxAPINameKey{}, api))
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = "https", r.Host
		resp, err := transport.Do(out)
		if err != nil {
			// The fakes answer a refusal they were told to give as an error, not a response: it
			// goes on the wire as Resource Manager's error body, with its status.
			status, code, msg := http.StatusInternalServerError, "FakeError", err.Error()
			var re *azcore.ResponseError
			if errors.As(err, &re) {
				status, code, msg = re.StatusCode, re.ErrorCode, http.StatusText(re.StatusCode)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = fmt.Fprintf(w, `{"error":{"code":%q,"message":%q}}`, code, msg)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	if l != nil {
		_ = ts.Listener.Close()
		ts.Listener = l
	}
	if cert != nil {
		ts.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
	}
	ts.StartTLS()
	return ts
}

// ARMURL is Resource Manager's fake endpoint.
func (a *Azure) ARMURL() string { return a.arm.URL }
