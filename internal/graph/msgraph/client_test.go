package msgraph

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/graph/budget"
	"github.com/credwatch/credwatch/test/clockstep"
	"github.com/credwatch/credwatch/test/fakegraph"
)

const (
	tenant = "1b2c3d4e-5f60-4172-8394-a5b6c7d8e9f0"
	client = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"
	secret = "cLiEnT~secret-0123456789-abcdefghijkl"
	appID  = "2c3d4e5f-6071-4283-9405-b6c7d8e9f0a1"
)

var (
	end1 = time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	end2 = time.Date(2027, 9, 1, 0, 0, 0, 0, time.UTC)
	end3 = time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC)
)

func setup(t *testing.T) (*fakegraph.Server, *Client, azcore.TokenCredential) {
	t.Helper()
	fake := fakegraph.New()
	t.Cleanup(fake.Close)
	fake.AddClient(tenant, client, secret)
	c, err := New(fake.URL(), fake.Client().Transport)
	if err != nil {
		t.Fatal(err)
	}
	return fake, c, credential(t, fake, secret)
}

func credential(t *testing.T, fake *fakegraph.Server, secret string) azcore.TokenCredential {
	t.Helper()
	cred, err := azidentity.NewClientSecretCredential(tenant, client, secret, &azidentity.ClientSecretCredentialOptions{
		ClientOptions:            azcore.ClientOptions{Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: fake.URL() + "/"}, Transport: fake.Client()},
		DisableInstanceDiscovery: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

func seed(fake *fakegraph.Server, app, sp bool) {
	if app {
		fake.PutApplication(tenant, fakegraph.Object{
			ID: "a0000000-0000-4000-8000-000000000001", AppID: appID, DisplayName: "payments-sp",
			Passwords: []fakegraph.PasswordCredential{{KeyID: "a1111111-1111-4111-8111-111111111111", DisplayName: "ci", SecretText: "Xyz~app-secret-text-000000000000000", Start: end1.AddDate(-1, 0, 0), End: end1}},
			Keys:      []fakegraph.KeyCredential{{KeyID: "a2222222-2222-4222-8222-222222222222", DisplayName: "CN=payments", Type: "AsymmetricX509Cert", Usage: "Verify", Start: end3.AddDate(-1, 0, 0), End: end3}},
		})
	}
	if sp {
		fake.PutServicePrincipal(tenant, fakegraph.Object{
			ID: "b0000000-0000-4000-8000-000000000002", AppID: appID, DisplayName: "payments-sp",
			Passwords: []fakegraph.PasswordCredential{{KeyID: "b1111111-1111-4111-8111-111111111111", SecretText: "Qrs~sp-secret-text-0000000000000000", Start: end2.AddDate(-1, 0, 0), End: end2}},
		})
	}
}

func TestReadCredentialsOfBothObjects(t *testing.T) {
	fake, c, cred := setup(t)
	seed(fake, true, true)

	snap, err := c.ReadCredentials(context.Background(), cred, appID)
	if err != nil {
		t.Fatal(err)
	}
	if snap.DisplayName != "payments-sp" || snap.ApplicationObjectID != "a0000000-0000-4000-8000-000000000001" || snap.ServicePrincipalObjectID != "b0000000-0000-4000-8000-000000000002" {
		t.Errorf("snapshot = %+v", snap)
	}
	want := []graph.Credential{
		{KeyID: "a1111111-1111-4111-8111-111111111111", Type: graph.Password, Source: graph.Application, DisplayName: "ci", Hint: "Xyz", Start: end1.AddDate(-1, 0, 0), End: end1},
		{KeyID: "a2222222-2222-4222-8222-222222222222", Type: graph.Certificate, Source: graph.Application, DisplayName: "CN=payments", Start: end3.AddDate(-1, 0, 0), End: end3},
		{KeyID: "b1111111-1111-4111-8111-111111111111", Type: graph.Password, Source: graph.ServicePrincipal, Hint: "Qrs", Start: end2.AddDate(-1, 0, 0), End: end2},
	}
	if len(snap.Credentials) != len(want) {
		t.Fatalf("credentials = %+v, want %+v", snap.Credentials, want)
	}
	for i := range want {
		if snap.Credentials[i] != want[i] {
			t.Errorf("credential %d = %+v, want %+v", i, snap.Credentials[i], want[i])
		}
	}
	for _, r := range fake.Requests() {
		if !strings.Contains(r.RawQuery, "select=id,appId,displayName,passwordCredentials,keyCredentials") {
			t.Errorf("request %s?%s does not select only the credential fields", r.Path, r.RawQuery)
		}
	}
}

func TestReadOwnerEmails(t *testing.T) {
	fake, c, cred := setup(t)
	seed(fake, true, true)
	app, _ := fake.Application(tenant, appID)
	app.Owners = []fakegraph.Owner{
		{ID: "u1", DisplayName: "Ada", Mail: "ada@example.com", UserPrincipalName: "ada@contoso.onmicrosoft.com"},
		{ID: "u2", DisplayName: "Bob", UserPrincipalName: "bob@contoso.onmicrosoft.com"},
		{ID: "s1", DisplayName: "deploy-bot", ServicePrincipal: true},
		{ID: "g1", DisplayName: "Mallory", Mail: "ada@example.com.evil.example", UserPrincipalName: "mallory_evil.example#EXT#@contoso.onmicrosoft.com", Guest: true},
	}
	fake.PutApplication(tenant, app)

	got, err := c.ReadOwnerEmails(context.Background(), cred, app.ID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "ada@example.com,bob@contoso.onmicrosoft.com" {
		t.Errorf("owners = %v, want Ada's mail and Bob's UPN, and neither the service principal nor the guest", got)
	}
	if _, err := c.ReadOwnerEmails(context.Background(), cred, "a0000000-0000-4000-8000-00000000dead"); azerr.KindOf(err) != azerr.KindNotFound {
		t.Errorf("owners of a missing application: %v, want not found", err)
	}
}

// The tenant's verified domains, which owners' mail is kept to; a refusal names the permission.
func TestVerifiedDomains(t *testing.T) {
	fake, c, cred := setup(t)
	got, err := c.VerifiedDomains(context.Background(), cred)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.ToLower(tenant[:8]) + ".onmicrosoft.com"; strings.Join(got, ",") != want {
		t.Errorf("domains of a new tenant = %v, want its initial domain %s", got, want)
	}
	fake.SetVerifiedDomains(tenant, "contoso.onmicrosoft.com", "contoso.com")
	if got, _ := c.VerifiedDomains(context.Background(), cred); strings.Join(got, ",") != "contoso.onmicrosoft.com,contoso.com" {
		t.Errorf("domains = %v", got)
	}
	fake.Deny(client, true)
	if _, err := c.VerifiedDomains(context.Background(), cred); azerr.KindOf(err) != azerr.KindForbidden || !strings.Contains(err.Error(), "Organization.Read.All") {
		t.Errorf("refused: %v; want forbidden, naming Organization.Read.All", err)
	}
}

func TestAddAndRemovePassword(t *testing.T) {
	fake, c, cred := setup(t)
	seed(fake, true, true)
	app, _ := fake.Application(tenant, appID)
	fake.SetPropagationDelay(time.Hour)
	end := time.Now().Add(365 * 24 * time.Hour).Truncate(time.Second).UTC()

	secret, err := c.AddPassword(context.Background(), cred, app.ID, "credwatch-rotation-1", end)
	if err != nil {
		t.Fatal(err)
	}
	if secret.Text == "" || secret.KeyID == "" || !secret.End.Equal(end) || secret.Hint != secret.Text[:3] {
		t.Errorf("new secret %v: want a keyId, a text, hint its first three characters, and end %v", secret, end)
	}
	if s := fmt.Sprintf("%v %s %+v %#v", secret, secret, secret, secret); strings.Contains(s, secret.Text) {
		t.Errorf("printing a NewSecret shows its text: %s", s)
	}
	snap, err := c.ReadCredentials(context.Background(), cred, appID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, cr := range snap.Credentials {
		found = found || (cr.KeyID == secret.KeyID && cr.DisplayName == "credwatch-rotation-1" && cr.Source == graph.Application)
	}
	if !found {
		t.Errorf("the new secret is not among the application's credentials: %+v", snap.Credentials)
	}
	// Graph's request body was gzip-compressed by Kiota, and the fake read it: the name arrived.

	if err := c.RemovePassword(context.Background(), cred, app.ID, secret.KeyID); err != nil {
		t.Fatal(err)
	}
	snap, _ = c.ReadCredentials(context.Background(), cred, appID)
	for _, cr := range snap.Credentials {
		if cr.KeyID == secret.KeyID {
			t.Error("the secret is still there after removePassword")
		}
	}
	if err := c.RemovePassword(context.Background(), cred, app.ID, secret.KeyID); azerr.KindOf(err) != azerr.KindOther {
		t.Errorf("removing it again: %v, want Graph's 400", err)
	}
	fake.Deny(client, true)
	if _, err := c.AddPassword(context.Background(), cred, app.ID, "x", end); azerr.KindOf(err) != azerr.KindForbidden {
		t.Errorf("adding without permission: %v, want access denied", err)
	}
}

func TestReadCredentialsWhenOneObjectIsMissing(t *testing.T) {
	tests := map[string]struct {
		app, sp  bool
		wantKeys int
	}{
		"application in another tenant": {app: false, sp: true, wantKeys: 1},
		"no service principal yet":      {app: true, sp: false, wantKeys: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake, c, cred := setup(t)
			seed(fake, tc.app, tc.sp)
			snap, err := c.ReadCredentials(context.Background(), cred, appID)
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Credentials) != tc.wantKeys || (snap.ApplicationObjectID != "") != tc.app || (snap.ServicePrincipalObjectID != "") != tc.sp {
				t.Errorf("snapshot = %+v", snap)
			}
		})
	}
}

func TestReadCredentialsClassifiesFailures(t *testing.T) {
	tests := map[string]struct {
		breakIt        func(*fakegraph.Server)
		secret         string
		wantKind       azerr.Kind
		wantRetryAfter time.Duration
		wantCode       string
		wantText       string
		cred           azcore.TokenCredential
		timeout        time.Duration
		maxRequests    int
	}{
		"neither object exists": {breakIt: func(f *fakegraph.Server) {}, wantKind: azerr.KindNotFound, wantCode: "Request_ResourceNotFound", maxRequests: 2},
		"permission denied": {
			breakIt:  func(f *fakegraph.Server) { seed(f, true, true); f.Deny(client, true) },
			wantKind: azerr.KindForbidden, wantCode: "Authorization_RequestDenied", maxRequests: 1,
		},
		// One request only: the SDK's retry handler would have slept and retried inside the call.
		"throttled": {
			breakIt:  func(f *fakegraph.Server) { seed(f, true, true); f.Throttle(5, 42*time.Second) },
			wantKind: azerr.KindThrottled, wantCode: "TooManyRequests", wantRetryAfter: 42 * time.Second, maxRequests: 1,
		},
		// Two at most: net/http itself resends a GET once when a reused connection closes unanswered.
		"unreachable": {
			breakIt:  func(f *fakegraph.Server) { seed(f, true, true); f.SetUnreachable(true) },
			wantKind: azerr.KindUnavailable, maxRequests: 2,
		},
		"wrong client secret": {
			breakIt: func(f *fakegraph.Server) { seed(f, true, true) }, secret: "wrong",
			wantKind: azerr.KindUnauthenticated, wantCode: "invalid_client AADSTS7000215", maxRequests: 0,
		},
		"no identity set up": {
			breakIt: func(f *fakegraph.Server) { seed(f, true, true) },
			cred: tokenFunc(func() error {
				return errors.New("DefaultAzureCredential: failed to acquire a token.\nAttempted credentials:\n\tWorkloadIdentityCredential: no token file")
			}),
			wantKind: azerr.KindUnauthenticated, wantText: "Attempted credentials: WorkloadIdentityCredential: no token file", maxRequests: 0,
		},
		// Kiota's default client would wait 100 s; the caller's deadline must end it.
		"stalled": {
			breakIt:  func(f *fakegraph.Server) { seed(f, true, true); f.SetStalled(true) },
			timeout:  300 * time.Millisecond,
			wantKind: azerr.KindUnavailable, maxRequests: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake, c, cred := setup(t)
			if tc.secret != "" {
				cred = credential(t, fake, tc.secret)
			}
			if tc.cred != nil {
				cred = tc.cred
			}
			tc.breakIt(fake)
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			_, err := c.ReadCredentials(ctx, cred, appID)
			if err == nil {
				t.Fatal("no error")
			}
			if got := azerr.KindOf(err); got != tc.wantKind {
				t.Errorf("kind = %v, want %v (%v)", got, tc.wantKind, err)
			}
			var ge *azerr.Error
			if errors.As(err, &ge) && ge.Code != tc.wantCode {
				t.Errorf("code = %q, want %q", ge.Code, tc.wantCode)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q does not say %q", err, tc.wantText)
			}
			if got := azerr.RetryAfterOf(err); got != tc.wantRetryAfter {
				t.Errorf("retry after = %v, want %v", got, tc.wantRetryAfter)
			}
			if got := len(fake.Requests()); got > tc.maxRequests {
				t.Errorf("Graph requests = %d, want at most %d", got, tc.maxRequests)
			}
			if tc.wantKind == azerr.KindUnavailable && !strings.Contains(err.Error(), "no answer from "+fake.Host()) {
				t.Errorf("error %q does not say which host did not answer", err)
			}
			for _, s := range fake.SecretTexts() {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q contains a secret", err)
				}
			}
		})
	}
}

// tokenFunc is a credential that always fails with the error it returns.
type tokenFunc func() error

func (f tokenFunc) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{}, f()
}

// TestThrottlingPausesTheScope: through the budget's round tripper, a 429's Retry-After holds
// back the next request of the same application and tenant, which then succeeds.
func TestThrottlingPausesTheScope(t *testing.T) {
	fake, c, cred := budgeted(t, budget.New(clock.RealClock{}, budget.SmallTenant))
	fake.Throttle(1, time.Second)
	if _, err := c.ReadCredentials(context.Background(), cred, appID); azerr.KindOf(err) != azerr.KindThrottled {
		t.Fatalf("first read: %v, want throttled", err)
	}
	start := time.Now()
	if _, err := c.ReadCredentials(context.Background(), cred, appID); err != nil {
		t.Fatalf("second read: %v", err)
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Errorf("the read after a 429 with Retry-After: 1 went after %v", waited)
	}
	if n := len(fake.Requests()); n != 3 {
		t.Errorf("%d Graph requests, want the throttled one and two after the pause", n)
	}
}

// budgeted is a client whose requests spend limiter's budget, with an identity that names its scope
// as the operator's do.
func budgeted(t *testing.T, limiter *budget.Limiter) (*fakegraph.Server, *Client, azcore.TokenCredential) {
	t.Helper()
	fake := fakegraph.New()
	t.Cleanup(fake.Close)
	fake.AddClient(tenant, client, secret)
	seed(fake, true, true)
	c, err := New(fake.URL(), limiter.RoundTripper(fake.Client().Transport))
	if err != nil {
		t.Fatal(err)
	}
	ids := azure.NewIdentities(azure.Cloud{AuthorityHost: fake.URL() + "/", GraphEndpoint: fake.URL()}, fake.Client(), nil)
	cred, err := ids.Credential(azure.ClientSecret(tenant, client, secret))
	if err != nil {
		t.Fatal(err)
	}
	return fake, c, cred
}

// TestBudgetKeepsReadsUnderGraphsLimit: against a Graph enforcing the same budget on the same
// clock, reads worth two windows of budget wait for the refill instead of being refused. Graph
// and the limiter share no code, so a cost the limiter undercharges shows here as a 429.
func TestBudgetKeepsReadsUnderGraphsLimit(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	const units = 10
	fake, c, cred := budgeted(t, budget.New(clk, units))
	fake.SetBudget(units, clk)

	began := clk.Now()
	stepping(t, clk, func() error {
		for range units { // two requests of one unit each
			if _, err := c.ReadCredentials(context.Background(), cred, appID); err != nil {
				return err
			}
		}
		return nil
	})
	if got := fake.Throttled(); got != 0 {
		t.Errorf("Graph refused %d requests", got)
	}
	// The first 8 units go at once; Graph then reports 80% spent and the limiter keeps to the
	// refill rate, one unit a second, for the other 12, leaving Graph's last 2 as headroom.
	if waited := clk.Since(began); waited < 11500*time.Millisecond || waited > 12500*time.Millisecond {
		t.Errorf("%d units on a budget of %d per 10 s took %v, want 12 s", 2*units, units, waited)
	}
}

// stepping runs fn, advancing clk in small steps whenever something waits on it.
func stepping(t *testing.T, clk *clocktesting.FakeClock, fn func() error) {
	t.Helper()
	var err error
	clockstep.Run(clk, 10*time.Millisecond, func() { err = fn() })
	if err != nil {
		t.Fatal(err)
	}
}

func TestNewRejectsEndpointsThatAreNotHTTPS(t *testing.T) {
	for _, endpoint := range []string{"", "graph.microsoft.com", "http://graph.microsoft.com", "https://"} {
		if _, err := New(endpoint, nil); err == nil {
			t.Errorf("New(%q) accepted it", endpoint)
		}
	}
	if _, err := New("https://graph.microsoft.us/", nil); err != nil {
		t.Errorf("New(US Government endpoint) = %v", err)
	}
}

// TestPauseLongerThanTheCallerWaitsIsThrottling: after a 429 with a long Retry-After, a read
// with less time left fails at once as throttled, not minutes later as Graph not answering.
func TestPauseLongerThanTheCallerWaitsIsThrottling(t *testing.T) {
	fake, c, cred := budgeted(t, budget.New(clock.RealClock{}, budget.SmallTenant))
	fake.Throttle(1, time.Minute)
	if _, err := c.ReadCredentials(context.Background(), cred, appID); azerr.KindOf(err) != azerr.KindThrottled {
		t.Fatalf("first read: %v, want throttled", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	began := time.Now()
	_, err := c.ReadCredentials(ctx, cred, appID)
	if azerr.KindOf(err) != azerr.KindThrottled || azerr.RetryAfterOf(err) < 50*time.Second {
		t.Errorf("read during the pause: %v, want throttled with about a minute to wait", err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("the read took %v to give up", took)
	}
}
