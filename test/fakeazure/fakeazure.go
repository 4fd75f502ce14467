// Package fakeazure stands up Azure for a credwatch binary running as its own process: Microsoft
// Graph and Entra ID (test/fakegraph), and Resource Manager (the SDK's own fake ManagedClusters
// server behind HTTPS), with the flags and environment that point the binary at them and give it
// an identity, the same way a sovereign cloud is configured.
package fakeazure

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	armfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6/fake"

	"github.com/credwatch/credwatch/test/fakegraph"
)

// Cluster answers what servicePrincipalProfile.clientId a cluster has ("msi" for a managed
// identity), and whether it exists.
type Cluster func(resourceGroup, name string) (clientID string, ok bool)

// Azure is the fakes of one tenant, and the identity the operator signs in to it with.
type Azure struct {
	Graph *fakegraph.Server
	arm   *httptest.Server
	ca    string

	tenantID, clientID, secret string
}

// Start starts the fakes. The operator signs in to tenantID as clientID with secret; dir holds
// the CA bundle that makes the binary trust the fakes' certificates.
func Start(dir, tenantID, clientID, secret string, clusters Cluster) (*Azure, error) {
	a := &Azure{Graph: fakegraph.New(), tenantID: tenantID, clientID: clientID, secret: secret}
	a.Graph.AddClient(tenantID, clientID, secret)
	a.arm = armServer(clusters)
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

// armServer serves the SDK's fake ManagedClustersServer over HTTPS.
func armServer(clusters Cluster) *httptest.Server {
	transport := armfake.NewManagedClustersServerTransport(&armfake.ManagedClustersServer{
		Get: func(_ context.Context, rg, name string, _ *armcontainerservice.ManagedClustersClientGetOptions) (resp azfake.Responder[armcontainerservice.ManagedClustersClientGetResponse], errResp azfake.ErrorResponder) {
			clientID, ok := clusters(rg, name)
			if !ok {
				errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
				return
			}
			resp.SetResponse(http.StatusOK, armcontainerservice.ManagedClustersClientGetResponse{ManagedCluster: armcontainerservice.ManagedCluster{
				Name: to.Ptr(name), Properties: &armcontainerservice.ManagedClusterProperties{
					ServicePrincipalProfile: &armcontainerservice.ManagedClusterServicePrincipalProfile{ClientID: to.Ptr(clientID)},
					ProvisioningState:       to.Ptr("Succeeded"),
					PowerState:              &armcontainerservice.PowerState{Code: to.Ptr(armcontainerservice.CodeRunning)},
				}}}, nil)
			return
		},
	})
	return httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The fake dispatches on the API name the SDK client puts in the request's context, which
		// does not cross the wire: only reads of a cluster come this way.
		out := r.Clone(context.WithValue(r.Context(), runtime.CtxAPINameKey{}, "ManagedClustersClient.Get"))
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = "https", r.Host
		resp, err := transport.Do(out)
		if err != nil {
			http.Error(w, fmt.Sprintf(`{"error":{"code":"FakeError","message":%q}}`, err.Error()), http.StatusInternalServerError)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
}
