package fakegraph

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

func TestOpenIDConfiguration(t *testing.T) {
	s := newFixture(t)
	r := do(t, s, "GET", "/"+tenantA+"/v2.0/.well-known/openid-configuration", "", nil)
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
	for _, k := range []string{"authorization_endpoint", "token_endpoint", "issuer", "jwks_uri", "tenant_region_scope"} {
		if v, _ := r.body[k].(string); v == "" {
			t.Errorf("%s missing", k)
		}
	}
	if r.body["token_endpoint"] != s.URL()+"/"+tenantA+"/oauth2/v2.0/token" {
		t.Errorf("token_endpoint %v", r.body["token_endpoint"])
	}
	iss, err := url.Parse(r.body["issuer"].(string))
	if err != nil || "https://"+iss.Host != s.URL() {
		t.Errorf("issuer %v must be on the authority host %s", r.body["issuer"], s.URL())
	}
	r = do(t, s, "GET", "/99999999-9999-9999-9999-999999999999/v2.0/.well-known/openid-configuration", "", nil)
	if r.status != 400 || r.body["error"] != "invalid_tenant" {
		t.Errorf("unknown tenant: %d %s", r.status, r.raw)
	}
}

func TestTokenEndpoint(t *testing.T) {
	s := newFixture(t)
	expiredSecret := "expired~secret"
	s.PutApplication(tenantA, Object{AppID: "ffffffff-0000-0000-0000-000000000006", Passwords: []PasswordCredential{
		{SecretText: expiredSecret, Start: start, End: time.Now().Add(-time.Hour)},
		{SecretText: "future~secret", Start: time.Now().Add(time.Hour), End: end},
	}})
	graph := "https://graph.microsoft.com/.default"
	tests := []struct {
		name, tenant string
		form         url.Values
		gzip         bool
		status       int
		oauthErr     string
		aadsts       float64
	}{
		{"registered client", tenantA, clientCredentials(reader, readerKey, graph), false, 200, "", 0},
		{"gzip body", tenantA, clientCredentials(reader, readerKey, graph), true, 200, "", 0},
		{"tenant id is case-insensitive", strings.ToUpper(tenantA), clientCredentials(reader, readerKey, graph), false, 200, "", 0},
		{"graph app id as resource", tenantA, clientCredentials(reader, readerKey, "00000003-0000-0000-c000-000000000000/.default"), false, 200, "", 0},
		{"secret on the application object", tenantA, clientCredentials(appID, appSecret, graph), false, 200, "", 0},
		{"secret on the service principal", tenantA, clientCredentials(appID, spSecret, graph), false, 200, "", 0},
		{"wrong secret", tenantA, clientCredentials(reader, "wrong", graph), false, 401, "invalid_client", 7000215},
		{"secret of another tenant", tenantB, clientCredentials(appID, appSecret, graph), false, 401, "invalid_client", 7000215},
		{"expired secret", tenantA, clientCredentials("ffffffff-0000-0000-0000-000000000006", expiredSecret, graph), false, 401, "invalid_client", 7000222},
		{"not yet valid secret", tenantA, clientCredentials("ffffffff-0000-0000-0000-000000000006", "future~secret", graph), false, 401, "invalid_client", 7000215},
		{"missing secret", tenantA, clientCredentials(reader, "", graph), false, 401, "invalid_client", 7000218},
		{"unknown client", tenantA, clientCredentials("99999999-0000-0000-0000-000000000000", "x", graph), false, 400, "unauthorized_client", 700016},
		{"unknown tenant", "99999999-9999-9999-9999-999999999999", clientCredentials(reader, readerKey, graph), false, 400, "invalid_tenant", 90002},
		{"scope without /.default", tenantA, clientCredentials(reader, readerKey, "https://graph.microsoft.com/Application.Read.All"), false, 400, "invalid_scope", 1002012},
		{"missing scope", tenantA, clientCredentials(reader, readerKey, ""), false, 400, "invalid_request", 900144},
		{"other grant", tenantA, url.Values{"grant_type": {"password"}, "client_id": {reader}}, false, 400, "unsupported_grant_type", 70003},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tokenRequest(t, s, tt.tenant, tt.form, tt.gzip)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.raw)
			}
			if tt.status == 200 {
				if r.body["token_type"] != "Bearer" || r.body["expires_in"] != float64(3599) || r.body["ext_expires_in"] != float64(3599) || r.body["access_token"] == "" {
					t.Errorf("token response %s", r.raw)
				}
				return
			}
			if r.body["error"] != tt.oauthErr {
				t.Errorf("error %v, want %s", r.body["error"], tt.oauthErr)
			}
			codes, _ := r.body["error_codes"].([]any)
			if len(codes) != 1 || codes[0] != tt.aadsts {
				t.Errorf("error_codes %v, want [%v]", r.body["error_codes"], tt.aadsts)
			}
			desc, _ := r.body["error_description"].(string)
			for _, part := range []string{"AADSTS", "Trace ID: ", "Correlation ID: ", "Timestamp: "} {
				if !strings.Contains(desc, part) {
					t.Errorf("error_description %q lacks %q", desc, part)
				}
			}
			for _, k := range []string{"timestamp", "trace_id", "correlation_id", "error_uri"} {
				if r.body[k] == nil {
					t.Errorf("%s missing", k)
				}
			}
			if bytes.Contains(r.raw, []byte(readerKey)) {
				t.Error("error echoes the secret")
			}
		})
	}

	t.Run("GET is refused", func(t *testing.T) {
		r := do(t, s, "GET", "/"+tenantA+"/oauth2/v2.0/token", "", nil)
		if r.status != 400 || !strings.Contains(r.body["error_description"].(string), "AADSTS900561") {
			t.Errorf("%d %s", r.status, r.raw)
		}
	})
	t.Run("tokens are bound to their tenant", func(t *testing.T) {
		tok := mustToken(t, s, tenantA, appID, appSecret)
		s.ResetRequests()
		do(t, s, "GET", "/v1.0/applications/"+appObjID, tok, nil)
		if r := s.Requests(); len(r) != 1 || r[0].TenantID != tenantA || r[0].ClientID != appID || r[0].Status != 200 {
			t.Errorf("Requests() = %+v", r)
		}
	})
}

func TestAzidentity(t *testing.T) {
	s := newFixture(t)
	newCred := func(tenant, client, secret string) *azidentity.ClientSecretCredential {
		t.Helper()
		cred, err := azidentity.NewClientSecretCredential(tenant, client, secret, &azidentity.ClientSecretCredentialOptions{
			ClientOptions: azcore.ClientOptions{
				Cloud:     cloud.Configuration{ActiveDirectoryAuthorityHost: s.URL() + "/"},
				Transport: s.Client(),
			},
			DisableInstanceDiscovery: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		return cred
	}
	opts := policy.TokenRequestOptions{Scopes: []string{"https://graph.microsoft.com/.default"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	tests := []struct {
		name, tenant, client, secret string
		wantErr                      string // "" for success
	}{
		{"registered secret", tenantA, reader, readerKey, ""},
		{"secret on the app object", tenantA, appID, appSecret, ""},
		{"wrong secret", tenantA, reader, "wrong", "AADSTS7000215"},
		{"unknown tenant", "99999999-9999-9999-9999-999999999999", reader, readerKey, "AADSTS90002"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := newCred(tt.tenant, tt.client, tt.secret).GetToken(ctx, opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one mentioning %s", err, tt.wantErr)
				}
				var afe *azidentity.AuthenticationFailedError
				if !errors.As(err, &afe) {
					t.Errorf("err is %T, want *azidentity.AuthenticationFailedError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tok.Token == "" || time.Until(tok.ExpiresOn) < 50*time.Minute {
				t.Fatalf("token %q expiring %v", tok.Token, tok.ExpiresOn)
			}
			// The SDK's token is a real one: Graph accepts it, in its tenant.
			if r := do(t, s, "GET", "/v1.0/applications(appId='"+appID+"')", tok.Token, nil); r.status != 200 {
				t.Errorf("Graph refused the azidentity token: %d %s", r.status, r.raw)
			}
		})
	}
}
