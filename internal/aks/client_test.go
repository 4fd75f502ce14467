package aks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6/fake"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/secret"
)

// clusters answers the SDK's fake ManagedClustersServer from a map, and errors by name.
func clusters(found map[string]*armcontainerservice.ManagedClusterProperties, failures map[string]int) *fake.ManagedClustersServer {
	return &fake.ManagedClustersServer{
		Get: func(_ context.Context, rg, name string, _ *armcontainerservice.ManagedClustersClientGetOptions) (resp azfake.Responder[armcontainerservice.ManagedClustersClientGetResponse], errResp azfake.ErrorResponder) {
			if status, ok := failures[name]; ok {
				errResp.SetResponseError(status, map[int]string{403: "AuthorizationFailed", 500: "InternalServerError"}[status])
				return
			}
			p, ok := found[rg+"/"+name]
			if !ok {
				errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
				return
			}
			resp.SetResponse(http.StatusOK, armcontainerservice.ManagedClustersClientGetResponse{
				ManagedCluster: armcontainerservice.ManagedCluster{Name: to.Ptr(name), Properties: p},
			}, nil)
			return
		},
	}
}

// throttling answers what Resource Manager sends when it throttles: a 429 with Retry-After and its
// error body. The SDK's fake builds error responses of its own, without headers, so this one
// stands in front of it for the cluster named "busy".
type throttling struct{ next policy.Transporter }

func (t throttling) Do(r *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(r.URL.Path, "/managedClusters/busy") {
		return t.next.Do(r)
	}
	body := `{"error":{"code":"TooManyRequests","message":"The request is being throttled."}}`
	return &http.Response{
		StatusCode: http.StatusTooManyRequests, Status: "429 Too Many Requests", Request: r,
		Header: http.Header{"Retry-After": {"17"}, "Content-Type": {"application/json"}},
		Body:   io.NopCloser(strings.NewReader(body)),
	}, nil
}

type failingCredential struct{ err error }

func (f failingCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{}, f.err
}

func TestReadCluster(t *testing.T) {
	srv := clusters(map[string]*armcontainerservice.ManagedClusterProperties{
		"rg/sp": {
			ServicePrincipalProfile: &armcontainerservice.ManagedClusterServicePrincipalProfile{ClientID: to.Ptr("3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c")},
			ProvisioningState:       to.Ptr("Succeeded"),
			PowerState:              &armcontainerservice.PowerState{Code: to.Ptr(armcontainerservice.CodeRunning)},
		},
		"rg/msi": {
			ServicePrincipalProfile: &armcontainerservice.ManagedClusterServicePrincipalProfile{ClientID: to.Ptr("msi")},
			ProvisioningState:       to.Ptr("Succeeded"),
			PowerState:              &armcontainerservice.PowerState{Code: to.Ptr(armcontainerservice.CodeStopped)},
		},
	}, map[string]int{"denied": 403, "broken": 500})
	c, err := New("https://management.azure.com", "https://management.core.windows.net/", throttling{fake.NewManagedClustersServerTransport(srv)})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		name           string
		cred           azcore.TokenCredential
		want           Cluster
		wantKind       azerr.Kind
		wantCode       string
		wantRetryAfter time.Duration
	}{
		"a cluster on a service principal": {name: "sp", want: Cluster{ClientID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c", ProvisioningState: "Succeeded", PowerState: "Running"}},
		"a cluster on a managed identity":  {name: "msi", want: Cluster{ProvisioningState: "Succeeded", PowerState: "Stopped"}},
		"no such cluster":                  {name: "gone", wantKind: azerr.KindNotFound, wantCode: "ResourceNotFound"},
		"no permission":                    {name: "denied", wantKind: azerr.KindForbidden, wantCode: "AuthorizationFailed"},
		"throttled":                        {name: "busy", wantKind: azerr.KindThrottled, wantCode: "TooManyRequests", wantRetryAfter: 17 * time.Second},
		// One request: the SDK's own retries are off, the controller retries with backoff in status.
		"server error": {name: "broken", wantKind: azerr.KindUnavailable, wantCode: "InternalServerError"},
		"sign-in fails": {
			name: "sp", cred: failingCredential{errors.New("DefaultAzureCredential: failed to acquire a token")},
			wantKind: azerr.KindUnauthenticated,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cred := tc.cred
			if cred == nil {
				cred = &azfake.TokenCredential{}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := c.ReadCluster(ctx, cred, ClusterRef{SubscriptionID: "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918", ResourceGroup: "rg", Name: tc.name})
			if tc.wantKind == azerr.KindOther {
				if err != nil || got != tc.want {
					t.Fatalf("ReadCluster = %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			var ae *azerr.Error
			if !errors.As(err, &ae) || ae.Kind != tc.wantKind || ae.Code != tc.wantCode || ae.RetryAfter != tc.wantRetryAfter {
				t.Errorf("error = %#v (%v), want kind %v, code %q, retry after %v", ae, err, tc.wantKind, tc.wantCode, tc.wantRetryAfter)
			}
		})
	}
}

func TestResetFollowsTheOperationByResumeToken(t *testing.T) {
	var got armcontainerservice.ManagedClusterServicePrincipalProfile
	starts := 0
	srv := &fake.ManagedClustersServer{
		BeginResetServicePrincipalProfile: func(_ context.Context, rg, name string, p armcontainerservice.ManagedClusterServicePrincipalProfile, _ *armcontainerservice.ManagedClustersClientBeginResetServicePrincipalProfileOptions) (resp azfake.PollerResponder[armcontainerservice.ManagedClustersClientResetServicePrincipalProfileResponse], errResp azfake.ErrorResponder) {
			starts++
			got = p
			resp.AddNonTerminalResponse(http.StatusAccepted, nil)
			resp.AddNonTerminalResponse(http.StatusAccepted, nil)
			if name == "fails" {
				resp.SetTerminalError(http.StatusInternalServerError, "InternalOperationError")
			} else {
				resp.SetTerminalResponse(http.StatusOK, armcontainerservice.ManagedClustersClientResetServicePrincipalProfileResponse{}, nil)
			}
			return
		},
	}
	transport := fake.NewManagedClustersServerTransport(srv)
	const sub = "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918"
	for _, tc := range []struct {
		name    string
		wantErr azerr.Kind
	}{{"aks-prod", azerr.KindOther}, {"fails", azerr.KindUnavailable}} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := New("https://management.azure.com", "https://management.core.windows.net/", transport)
			token, done, err := c.StartReset(context.Background(), &azfake.TokenCredential{}, ClusterRef{SubscriptionID: sub, ResourceGroup: "rg", Name: tc.name}, ServicePrincipal{ClientID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c", Secret: secret.New("nEw~SECRET")})
			if err != nil || token == "" || done {
				t.Fatalf("StartReset = %q, %v, %v; want a token for an operation under way", token, done, err)
			}
			if got.ClientID == nil || *got.ClientID != "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c" || got.Secret == nil || *got.Secret != "nEw~SECRET" {
				t.Errorf("the reset asked for %+v", got)
			}
			if strings.Contains(token, "nEw~SECRET") {
				t.Error("the resume token holds the secret")
			}
			// A restarted operator: a new client, the same operation. A failed operation ends
			// in an error; what it left behind is for the caller to read from the cluster.
			for i := 0; i < 5 && !done && err == nil; i++ {
				c, _ := New("https://management.azure.com", "https://management.core.windows.net/", transport)
				done, err = c.PollReset(context.Background(), &azfake.TokenCredential{}, ClusterRef{SubscriptionID: sub, ResourceGroup: "rg", Name: tc.name}, token)
			}
			if tc.wantErr == azerr.KindOther {
				if !done || err != nil {
					t.Errorf("the operation ended %v, %v; want done", done, err)
				}
				return
			}
			var ae *azerr.Error
			if !errors.As(err, &ae) || ae.Kind != tc.wantErr || ae.Code != "InternalOperationError" {
				t.Errorf("ended with %v, want %v InternalOperationError", err, tc.wantErr)
			}
		})
	}
	if starts != 2 {
		t.Errorf("%d operations started, want one per cluster: resuming must not start another", starts)
	}

	// An operation Resource Manager finishes at once has no token to follow: it is done.
	instant := fake.NewManagedClustersServerTransport(&fake.ManagedClustersServer{
		BeginResetServicePrincipalProfile: func(context.Context, string, string, armcontainerservice.ManagedClusterServicePrincipalProfile, *armcontainerservice.ManagedClustersClientBeginResetServicePrincipalProfileOptions) (resp azfake.PollerResponder[armcontainerservice.ManagedClustersClientResetServicePrincipalProfileResponse], errResp azfake.ErrorResponder) {
			resp.SetTerminalResponse(http.StatusOK, armcontainerservice.ManagedClustersClientResetServicePrincipalProfileResponse{}, nil)
			return
		},
	})
	c, _ := New("https://management.azure.com", "https://management.core.windows.net/", instant)
	if token, done, err := c.StartReset(context.Background(), &azfake.TokenCredential{}, ClusterRef{SubscriptionID: sub, ResourceGroup: "rg", Name: "quick"}, ServicePrincipal{ClientID: "id", Secret: secret.New("s")}); !done || token != "" || err != nil {
		t.Errorf("an instant reset: %q, %v, %v; want done without a token", token, done, err)
	}
}

// A service principal a reset moves onto is printed without its secret, however it is printed.
func TestServicePrincipalHidesItsSecret(t *testing.T) {
	sp := ServicePrincipal{ClientID: "3f2c8a5e", Secret: secret.New("nEw~SECRET-value")}
	printed := []string{fmt.Sprint(&sp)}
	// Every verb, %d and %x of a struct included, which vet would refuse in a constant format.
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x"} {
		printed = append(printed, fmt.Sprintf(verb, sp))
	}
	for _, printed := range printed {
		if strings.Contains(printed, sp.Secret.Reveal()) {
			t.Errorf("printed %q holds the secret", printed)
		}
	}
}

// armOperations stands for Resource Manager following a reset the way it does, which the SDK's
// fake does not: the POST answers 202 with the location-level URLs of the operation, and the
// cluster named by refuse is refused at the step it names ("start", "operations" or
// "operationresults") with ARM's AuthorizationFailed body.
type armOperations struct{ refuse map[string]string }

const refusalBody = `{"error":{"code":"AuthorizationFailed","message":"The client '5a1e2f3d-0000-4000-8000-00000000c0de' with object id ` +
	`'5a1e2f3d-0000-4000-8000-00000000c0de' does not have authorization to perform action 'X' over scope '/subscriptions/s' or the scope is invalid."}}`

func (a armOperations) Do(r *http.Request) (*http.Response, error) {
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	name, step := segs[len(segs)-1], ""
	switch {
	case r.Method == http.MethodPost:
		name, step = segs[len(segs)-2], "start"
	case len(segs) > 2:
		step = segs[len(segs)-2]
	}
	answer := func(status int, body string, h http.Header) (*http.Response, error) {
		h.Set("Content-Type", "application/json")
		return &http.Response{StatusCode: status, Status: http.StatusText(status), Request: r, Header: h, Body: io.NopCloser(strings.NewReader(body))}, nil
	}
	if a.refuse[name] == step {
		return answer(http.StatusForbidden, refusalBody, http.Header{})
	}
	ops := "https://management.azure.com/subscriptions/" + segs[1] + "/providers/Microsoft.ContainerService/locations/westeurope/"
	switch step {
	case "start":
		return answer(http.StatusAccepted, "", http.Header{
			"Azure-Asyncoperation": {ops + "operations/" + name + "?api-version=2025-02-01"},
			"Location":             {ops + "operationresults/" + name + "?api-version=2025-02-01"},
		})
	case "operations":
		return answer(http.StatusOK, `{"name":"`+name+`","status":"Succeeded"}`, http.Header{})
	default:
		return answer(http.StatusNoContent, "", http.Header{})
	}
}

// TestRefusalsNameTheAction: a 403 from Resource Manager fails with its code and the action the
// refused request needed, so that the condition and the event say what to grant.
func TestRefusalsNameTheAction(t *testing.T) {
	deniedReset := fake.NewManagedClustersServerTransport(&fake.ManagedClustersServer{
		BeginResetServicePrincipalProfile: func(context.Context, string, string, armcontainerservice.ManagedClusterServicePrincipalProfile, *armcontainerservice.ManagedClustersClientBeginResetServicePrincipalProfileOptions) (resp azfake.PollerResponder[armcontainerservice.ManagedClustersClientResetServicePrincipalProfileResponse], errResp azfake.ErrorResponder) {
			errResp.SetResponseError(http.StatusForbidden, "AuthorizationFailed")
			return
		},
	})
	sp := ServicePrincipal{ClientID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c", Secret: secret.New("nEw~SECRET")}
	reset := func(ctx context.Context, c *Client, ref ClusterRef) error {
		token, done, err := c.StartReset(ctx, &azfake.TokenCredential{}, ref, sp)
		for i := 0; i < 3 && !done && err == nil; i++ {
			done, err = c.PollReset(ctx, &azfake.TokenCredential{}, ref, token)
		}
		return err
	}
	tests := map[string]struct {
		transport policy.Transporter
		name      string
		do        func(context.Context, *Client, ClusterRef) error
		wantNeeds string
	}{
		"cluster read": {
			transport: fake.NewManagedClustersServerTransport(clusters(nil, map[string]int{"denied": 403})), name: "denied",
			do: func(ctx context.Context, c *Client, ref ClusterRef) error {
				_, err := c.ReadCluster(ctx, &azfake.TokenCredential{}, ref)
				return err
			},
			wantNeeds: "Microsoft.ContainerService/managedClusters/read",
		},
		"reset": {
			transport: deniedReset, name: "denied", do: reset,
			wantNeeds: "Microsoft.ContainerService/managedClusters/resetServicePrincipalProfile/action",
		},
		"reset, as Resource Manager answers it": {
			transport: armOperations{refuse: map[string]string{"denied": "start"}}, name: "denied", do: reset,
			wantNeeds: "Microsoft.ContainerService/managedClusters/resetServicePrincipalProfile/action",
		},
		"following the reset": {
			transport: armOperations{refuse: map[string]string{"denied": "operations"}}, name: "denied", do: reset,
			wantNeeds: "Microsoft.ContainerService/locations/operations/read",
		},
		"reading the reset's result": {
			transport: armOperations{refuse: map[string]string{"denied": "operationresults"}}, name: "denied", do: reset,
			wantNeeds: "Microsoft.ContainerService/locations/operationresults/read",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := New("https://management.azure.com", "https://management.core.windows.net/", tc.transport)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = tc.do(ctx, c, ClusterRef{SubscriptionID: "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918", ResourceGroup: "rg", Name: tc.name})
			var ae *azerr.Error
			if !errors.As(err, &ae) || ae.Kind != azerr.KindForbidden || ae.Code != "AuthorizationFailed" {
				t.Fatalf("error %v, want access denied with Resource Manager's code AuthorizationFailed", err)
			}
			want := "access denied (HTTP 403, AuthorizationFailed); the identity needs " + tc.wantNeeds
			if !strings.HasSuffix(err.Error(), want) {
				t.Errorf("error %q\ndoes not end %q", err, want)
			}
			if strings.Contains(err.Error(), "nEw~SECRET") || strings.Contains(err.Error(), "5a1e2f3d") {
				t.Errorf("error %q holds the secret or Resource Manager's message", err)
			}
		})
	}
}

func TestOperationAction(t *testing.T) {
	const fallback = "Microsoft.ContainerService/managedClusters/resetServicePrincipalProfile/action"
	tests := map[string]string{
		"/subscriptions/s/providers/Microsoft.ContainerService/locations/westeurope/operations/op1":                              "Microsoft.ContainerService/locations/operations/read",
		"/subscriptions/s/providers/Microsoft.ContainerService/locations/westeurope/operationresults/op1":                        "Microsoft.ContainerService/locations/operationresults/read",
		"/subscriptions/s/providers/Microsoft.ContainerService/Locations/westeurope/OperationResults/op1":                        "Microsoft.ContainerService/locations/operationresults/read",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c/resetServicePrincipalProfile": fallback,
		// A resource group or cluster may be named "locations" or "operations".
		"/subscriptions/s/resourceGroups/locations/providers/Microsoft.ContainerService/managedClusters/operations":                                   fallback,
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/locations/x/operations/resetServicePrincipalProfile": fallback,
	}
	for path, want := range tests {
		if got := operationAction(path, fallback); got != want {
			t.Errorf("operationAction(%s) = %s, want %s", path, got, want)
		}
	}
}

// A resume token is kept in status: one changed to lead elsewhere is refused before the poller
// sends Resource Manager's bearer token there.
func TestPollResetRefusesATokenLeadingElsewhere(t *testing.T) {
	srv := &fake.ManagedClustersServer{
		BeginResetServicePrincipalProfile: func(context.Context, string, string, armcontainerservice.ManagedClusterServicePrincipalProfile, *armcontainerservice.ManagedClustersClientBeginResetServicePrincipalProfileOptions) (resp azfake.PollerResponder[armcontainerservice.ManagedClustersClientResetServicePrincipalProfileResponse], errResp azfake.ErrorResponder) {
			resp.AddNonTerminalResponse(http.StatusAccepted, nil)
			resp.SetTerminalResponse(http.StatusOK, armcontainerservice.ManagedClustersClientResetServicePrincipalProfileResponse{}, nil)
			return
		},
	}
	c, _ := New("https://management.azure.com", "https://management.core.windows.net/", fake.NewManagedClustersServerTransport(srv))
	ref := ClusterRef{SubscriptionID: "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918", ResourceGroup: "rg", Name: "aks-prod"}
	token, _, err := c.StartReset(context.Background(), &azfake.TokenCredential{}, ref, ServicePrincipal{ClientID: "c", Secret: secret.New("s")})
	if err != nil || !strings.Contains(token, "management.azure.com") {
		t.Fatalf("StartReset = %q, %v; want a token naming Resource Manager's host", token, err)
	}
	for name, forged := range map[string]string{
		"another host":         strings.ReplaceAll(token, "management.azure.com", "169.254.169.254"),
		"plain http":           strings.ReplaceAll(token, "https://management.azure.com", "http://management.azure.com"),
		"another subscription": strings.ReplaceAll(token, "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918", "00000000-0000-0000-0000-000000000000"),
		"not a token":          "eyJhbGciOi",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := c.PollReset(context.Background(), &azfake.TokenCredential{}, ref, forged); err == nil {
				t.Error("a forged token was followed")
			}
		})
	}
}

// A held rotation is confirmed with the operation's ID, read from the resume token's URLs.
func TestOperationID(t *testing.T) {
	for _, tc := range []struct{ token, want string }{
		{`{"type":"R","token":{"asyncURL":"https://management.azure.com/subscriptions/s/providers/Microsoft.ContainerService/locations/westeurope/operations/0c4a2d8e-1f3b-4c5d-9e6f-7a8b9c0d1e2f?api-version=2025-02-01","locURL":"https://management.azure.com/x/operationresults/other"}}`,
			"0c4a2d8e-1f3b-4c5d-9e6f-7a8b9c0d1e2f"},
		{`{"type":"R","token":{"locURL":"https://management.azure.com/subscriptions/s/providers/Microsoft.ContainerService/locations/westeurope/operationresults/9d8c7b6a"}}`, "9d8c7b6a"},
		{`{"type":"R","token":{"fakeURL":"https://management.azure.com/x"}}`, ""},
		{`not json`, ""},
	} {
		if got := OperationID(tc.token); got != tc.want {
			t.Errorf("OperationID(%s) = %q, want %q", tc.token, got, tc.want)
		}
	}
}
