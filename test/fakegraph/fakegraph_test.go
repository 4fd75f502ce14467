package fakegraph

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	tenantA   = "11111111-1111-1111-1111-111111111111"
	tenantB   = "22222222-2222-2222-2222-222222222222"
	reader    = "aaaaaaaa-0000-0000-0000-000000000001" // the operator's own identity
	readerKey = "reader~secret~value"
	appID     = "bbbbbbbb-0000-0000-0000-000000000002" // a watched app
	appObjID  = "cccccccc-0000-0000-0000-000000000003"
	spObjID   = "dddddddd-0000-0000-0000-000000000004"
	appSecret = "app~secret~value~1"
	spSecret  = "sp~secret~value~2"
)

var (
	start = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	end   = time.Date(2099, 1, 2, 3, 4, 5, 0, time.UTC)
)

// newFixture is one tenant with the operator's client, a watched app and its service principal,
// and a second tenant holding an object with the same appId, to catch cross-tenant reads.
func newFixture(t *testing.T) *Server {
	t.Helper()
	s := New()
	t.Cleanup(s.Close)
	s.AddClient(tenantA, reader, readerKey)
	s.AddClient(tenantB, reader, readerKey)
	s.PutApplication(tenantA, Object{
		ID: appObjID, AppID: appID, DisplayName: "watched",
		Passwords: []PasswordCredential{{KeyID: "0000a001-0000-0000-0000-000000000001", DisplayName: "ci", SecretText: appSecret, Start: start, End: end}},
		Keys: []KeyCredential{{KeyID: "0000c001-0000-0000-0000-000000000001", DisplayName: "CN=watched", Type: "AsymmetricX509Cert", Usage: "Verify",
			CustomKeyIdentifier: []byte{0xde, 0xad, 0xbe, 0xef}, Key: []byte("certificate-bytes"), Start: start, End: end}},
	})
	s.PutServicePrincipal(tenantA, Object{
		ID: spObjID, AppID: appID, DisplayName: "watched",
		Passwords: []PasswordCredential{{KeyID: "0000a002-0000-0000-0000-000000000002", SecretText: spSecret, Start: start, End: end}},
	})
	s.PutApplication(tenantB, Object{ID: "eeeeeeee-0000-0000-0000-000000000005", AppID: appID, DisplayName: "other tenant"})
	return s
}

type reply struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

func do(t *testing.T, s *Server, method, path, token string, hdr map[string]string) reply {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			t.Fatalf("%s %s: body is not a JSON object: %v\n%s", method, path, err, raw)
		}
	}
	return r
}

func tokenRequest(t *testing.T, s *Server, tenant string, form url.Values, gz bool) reply {
	t.Helper()
	body := []byte(form.Encode())
	req, err := http.NewRequest(http.MethodPost, s.URL()+"/"+tenant+"/oauth2/v2.0/token", nil)
	if err != nil {
		t.Fatal(err)
	}
	if gz {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = buf.Bytes()
		req.Header.Set("Content-Encoding", "gzip")
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if err := json.Unmarshal(raw, &r.body); err != nil {
		t.Fatalf("token body is not JSON: %v\n%s", err, raw)
	}
	return r
}

func clientCredentials(client, secret, scope string) url.Values {
	return url.Values{"grant_type": {"client_credentials"}, "client_id": {client}, "client_secret": {secret}, "scope": {scope}}
}

func mustToken(t *testing.T, s *Server, tenant, client, secret string) string {
	t.Helper()
	r := tokenRequest(t, s, tenant, clientCredentials(client, secret, "https://graph.microsoft.com/.default"), false)
	tok, _ := r.body["access_token"].(string)
	if r.status != http.StatusOK || tok == "" {
		t.Fatalf("token for %s in %s: %d %s", client, tenant, r.status, r.raw)
	}
	return tok
}

// checkGraphError asserts Graph's OData error shape, whose request IDs must match the headers.
func checkGraphError(t *testing.T, r reply, status int, code, msgPart string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	e, ok := r.body["error"].(map[string]any)
	if !ok || len(r.body) != 1 {
		t.Fatalf("not an OData error body: %s", r.raw)
	}
	if e["code"] != code {
		t.Errorf("code %v, want %s", e["code"], code)
	}
	if msg, _ := e["message"].(string); !strings.Contains(msg, msgPart) {
		t.Errorf("message %q does not contain %q", msg, msgPart)
	}
	inner, ok := e["innerError"].(map[string]any)
	if !ok {
		t.Fatalf("no innerError: %s", r.raw)
	}
	if _, err := time.Parse("2006-01-02T15:04:05", inner["date"].(string)); err != nil {
		t.Errorf("innerError.date: %v", err)
	}
	if inner["request-id"] != r.header.Get("request-id") || inner["request-id"] == "" {
		t.Errorf("innerError request-id %v, header %q", inner["request-id"], r.header.Get("request-id"))
	}
	if inner["client-request-id"] != r.header.Get("client-request-id") || inner["client-request-id"] == "" {
		t.Errorf("innerError client-request-id %v, header %q", inner["client-request-id"], r.header.Get("client-request-id"))
	}
	checkGraphHeaders(t, r)
}

func checkGraphHeaders(t *testing.T, r reply) {
	t.Helper()
	if got := r.header.Get("Content-Type"); got != graphContentType {
		t.Errorf("Content-Type %q", got)
	}
	if r.header.Get("request-id") == "" || r.header.Get("client-request-id") == "" {
		t.Errorf("missing request-id/client-request-id: %v", r.header)
	}
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestGetObject(t *testing.T) {
	s := newFixture(t)
	tok := mustToken(t, s, tenantA, reader, readerKey)
	appCtx := s.URL() + "/v1.0/$metadata#applications/$entity"
	spCtx := s.URL() + "/v1.0/$metadata#servicePrincipals/$entity"
	tests := []struct {
		name, path, wantID, wantCtx, wantRU string
		passwords                           int
	}{
		{"app by appId", "/v1.0/applications(appId='" + appID + "')", appObjID, appCtx, "2", 1},
		{"app by appId with encoded quotes", "/v1.0/applications(appId=%27" + appID + "%27)", appObjID, appCtx, "2", 1},
		{"app by fully encoded key", "/v1.0/applications%28appId%3D%27" + appID + "%27%29", appObjID, appCtx, "2", 1},
		{"app by object id", "/v1.0/applications/" + appObjID, appObjID, appCtx, "2", 1},
		{"entity set name is case-insensitive", "/v1.0/Applications(AppId='" + appID + "')", appObjID, appCtx, "2", 1},
		{"sp by appId", "/v1.0/servicePrincipals(appId='" + appID + "')", spObjID, spCtx, "1", 1},
		{"sp by object id", "/v1.0/servicePrincipals/" + spObjID, spObjID, spCtx, "1", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, s, http.MethodGet, tt.path, tok, map[string]string{"client-request-id": "my-corr-id"})
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.raw)
			}
			checkGraphHeaders(t, r)
			if got := r.header.Get("client-request-id"); got != "my-corr-id" {
				t.Errorf("client-request-id not echoed: %q", got)
			}
			if got := r.header.Get("x-ms-resource-unit"); got != tt.wantRU {
				t.Errorf("x-ms-resource-unit %q, want %s", got, tt.wantRU)
			}
			if r.body["@odata.context"] != tt.wantCtx || r.body["id"] != tt.wantID || r.body["appId"] != appID {
				t.Errorf("context/id/appId wrong: %s", r.raw)
			}
			pcs, _ := r.body["passwordCredentials"].([]any)
			if len(pcs) != tt.passwords {
				t.Fatalf("passwordCredentials %v", r.body["passwordCredentials"])
			}
			pc := pcs[0].(map[string]any)
			wantKeys := []string{"customKeyIdentifier", "displayName", "endDateTime", "hint", "keyId", "secretText", "startDateTime"}
			if !reflect.DeepEqual(keys(pc), wantKeys) {
				t.Errorf("passwordCredential members %v, want %v", keys(pc), wantKeys)
			}
			if v, ok := pc["secretText"]; !ok || v != nil {
				t.Errorf("secretText must be present and null on GET, got %v", v)
			}
			if pc["startDateTime"] != "2024-01-02T03:04:05Z" || pc["endDateTime"] != "2099-01-02T03:04:05Z" {
				t.Errorf("times not RFC3339 UTC: %v %v", pc["startDateTime"], pc["endDateTime"])
			}
			if pc["hint"] == nil || len(pc["hint"].(string)) != 3 {
				t.Errorf("hint %v, want the first 3 characters", pc["hint"])
			}
			if bytes.Contains(r.raw, []byte(appSecret)) || bytes.Contains(r.raw, []byte(spSecret)) {
				t.Errorf("secret leaked in GET: %s", r.raw)
			}
		})
	}

	t.Run("keyCredential shape without select", func(t *testing.T) {
		r := do(t, s, http.MethodGet, "/v1.0/applications(appId='"+appID+"')", tok, nil)
		kc := r.body["keyCredentials"].([]any)[0].(map[string]any)
		want := map[string]any{
			"customKeyIdentifier": "3q2+7w==", "displayName": "CN=watched", "endDateTime": "2099-01-02T03:04:05Z",
			"key": nil, "keyId": "0000c001-0000-0000-0000-000000000001", "startDateTime": "2024-01-02T03:04:05Z", "type": "AsymmetricX509Cert", "usage": "Verify",
		}
		if !reflect.DeepEqual(kc, want) {
			t.Errorf("keyCredential\n got %v\nwant %v", kc, want)
		}
	})
}

func TestSelect(t *testing.T) {
	s := newFixture(t)
	tok := mustToken(t, s, tenantA, reader, readerKey)
	base := "/v1.0/applications(appId='" + appID + "')"
	tests := []struct {
		name, query string
		wantProps   []string // besides @odata.context
		wantCtxSel  string
		wantKey     bool
	}{
		{"plain", "?$select=appId,passwordCredentials", []string{"appId", "passwordCredentials"}, "(appId,passwordCredentials)", false},
		{"percent-encoded dollar", "?%24select=id%2CdisplayName", []string{"displayName", "id"}, "(id,displayName)", false},
		{"case and spaces", "?$select=APPID,%20keyCredentials", []string{"appId", "keyCredentials"}, "(appId,keyCredentials)", true},
		{"unmodelled known property is null", "?$select=id,signInAudience", []string{"id", "signInAudience"}, "(id,signInAudience)", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, s, http.MethodGet, base+tt.query, tok, nil)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.raw)
			}
			got := keys(r.body)
			want := append([]string{"@odata.context"}, tt.wantProps...)
			slices.Sort(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("members %v, want %v", got, want)
			}
			if ctx := s.URL() + "/v1.0/$metadata#applications" + tt.wantCtxSel + "/$entity"; r.body["@odata.context"] != ctx {
				t.Errorf("@odata.context %v, want %s", r.body["@odata.context"], ctx)
			}
			if got := r.header.Get("x-ms-resource-unit"); got != "1" {
				t.Errorf("x-ms-resource-unit %q, want 1 (2 - 1 for $select)", got)
			}
			if kcs, ok := r.body["keyCredentials"].([]any); ok {
				key := kcs[0].(map[string]any)["key"]
				if (key == "Y2VydGlmaWNhdGUtYnl0ZXM=") != tt.wantKey {
					t.Errorf("key = %v, want present=%v", key, tt.wantKey)
				}
			}
		})
	}

	t.Run("unknown property", func(t *testing.T) {
		r := do(t, s, http.MethodGet, base+"?$select=appId,nope", tok, nil)
		checkGraphError(t, r, http.StatusBadRequest, "Request_BadRequest",
			"Could not find a property named 'nope' on type 'microsoft.graph.application'.")
		r = do(t, s, http.MethodGet, "/v1.0/servicePrincipals(appId='"+appID+"')?$select=nope", tok, nil)
		checkGraphError(t, r, http.StatusBadRequest, "Request_BadRequest", "on type 'microsoft.graph.servicePrincipal'.")
	})
	t.Run("key in a collection only when selected", func(t *testing.T) {
		for query, want := range map[string]bool{"$select=keyCredentials": true, "": false} {
			r := do(t, s, http.MethodGet, "/v1.0/applications?"+query, tok, nil)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.raw)
			}
			kc := r.body["value"].([]any)[0].(map[string]any)["keyCredentials"].([]any)[0].(map[string]any)
			if got := kc["key"] != nil; got != want {
				t.Errorf("%q: key returned %v, want %v", query, got, want)
			}
		}
	})
}

func TestGraphErrors(t *testing.T) {
	s := newFixture(t)
	tok := mustToken(t, s, tenantA, reader, readerKey)
	mgmt := tokenRequest(t, s, tenantA, clientCredentials(reader, readerKey, "https://management.azure.com/.default"), false).body["access_token"].(string)
	const denied = "aaaaaaaa-0000-0000-0000-00000000dead"
	s.AddClient(tenantA, denied, "denied-secret")
	deniedTok := mustToken(t, s, tenantA, denied, "denied-secret")
	s.Deny(denied, true)
	app := "/v1.0/applications(appId='" + appID + "')"

	tests := []struct {
		name, method, path, token string
		status                    int
		code, msg                 string
	}{
		{"no token", "GET", app, "", 401, "InvalidAuthenticationToken", "Access token is empty."},
		{"unknown token", "GET", app, "not-a-token", 401, "InvalidAuthenticationToken", "JWT is not well formed"},
		{"token for another resource", "GET", app, mgmt, 401, "InvalidAuthenticationToken", "Invalid audience."},
		{"denied client", "GET", app, deniedTok, 403, "Authorization_RequestDenied", "Insufficient privileges to complete the operation."},
		{"unknown appId", "GET", "/v1.0/applications(appId='00000000-0000-0000-0000-00000000ffff')", tok, 404, "Request_ResourceNotFound",
			"Resource '00000000-0000-0000-0000-00000000ffff' does not exist or one of its queried reference-property objects are not present."},
		{"unknown object id", "GET", "/v1.0/servicePrincipals/" + appObjID, tok, 404, "Request_ResourceNotFound", "Resource '" + appObjID + "' does not exist"},
		{"unknown segment", "GET", "/v1.0/bogus", tok, 400, "BadRequest", "Resource not found for the segment 'bogus'."},
		{"unknown sub-resource", "GET", "/v1.0/applications/" + appObjID + "/frobnicate", tok, 400, "BadRequest", "Resource not found for the segment 'frobnicate'."},
		{"unknown version", "GET", "/v9.9/applications", tok, 400, "BadRequest", "Invalid version: v9.9"},
		{"write method", "DELETE", app, tok, 405, "Request_BadRequest", "Specified HTTP method is not allowed"},
		{"bad $top", "GET", "/v1.0/applications?$top=1000", tok, 400, "Request_BadRequest", "Invalid page size specified: '1000'."},
		{"unimplemented $search", "GET", "/v1.0/applications?$search=%22displayName:x%22", tok, 400, "Request_UnsupportedQuery", "$search"},
		{"$filter on one object", "GET", app + "?$filter=appId%20eq%20'x'", tok, 400, "BadRequest", "Query option 'Filter' is not allowed."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, s, tt.method, tt.path, tt.token, nil)
			checkGraphError(t, r, tt.status, tt.code, tt.msg)
			if tt.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer ") {
				t.Errorf("401 without a Bearer challenge: %v", r.header)
			}
		})
	}

	t.Run("expired token", func(t *testing.T) {
		s.SetTokenLifetime(time.Second)
		short := mustToken(t, s, tenantA, reader, readerKey)
		s.mu.Lock()
		it := s.tokens[short]
		it.expires = time.Now().Add(-time.Minute)
		s.tokens[short] = it
		s.mu.Unlock()
		checkGraphError(t, do(t, s, "GET", app, short, nil), 401, "InvalidAuthenticationToken", "the token is expired")
	})
	t.Run("revoked tokens", func(t *testing.T) {
		s.RevokeTokens()
		checkGraphError(t, do(t, s, "GET", app, tok, nil), 401, "InvalidAuthenticationToken", "")
	})
	t.Run("undeny", func(t *testing.T) {
		s.Deny(denied, false)
		if r := do(t, s, "GET", app, mustToken(t, s, tenantA, denied, "denied-secret"), nil); r.status != 200 {
			t.Errorf("status %d after Deny(false): %s", r.status, r.raw)
		}
	})
}

func TestTenantIsolation(t *testing.T) {
	s := newFixture(t)
	a := mustToken(t, s, tenantA, reader, readerKey)
	b := mustToken(t, s, tenantB, reader, readerKey)
	ra := do(t, s, "GET", "/v1.0/applications(appId='"+appID+"')", a, nil)
	rb := do(t, s, "GET", "/v1.0/applications(appId='"+appID+"')", b, nil)
	if ra.body["displayName"] != "watched" || rb.body["displayName"] != "other tenant" {
		t.Errorf("same appId resolved across tenants: A=%v B=%v", ra.body["displayName"], rb.body["displayName"])
	}
	checkGraphError(t, do(t, s, "GET", "/v1.0/servicePrincipals(appId='"+appID+"')", b, nil), 404, "Request_ResourceNotFound", appID)
	checkGraphError(t, do(t, s, "GET", "/v1.0/applications/"+appObjID, b, nil), 404, "Request_ResourceNotFound", appObjID)

	s.DeleteApplication(tenantA, appID)
	checkGraphError(t, do(t, s, "GET", "/v1.0/applications(appId='"+appID+"')", a, nil), 404, "Request_ResourceNotFound", appID)
	if r := do(t, s, "GET", "/v1.0/applications(appId='"+appID+"')", b, nil); r.status != 200 {
		t.Errorf("delete in tenant A removed tenant B's app: %d", r.status)
	}
	s.DeleteServicePrincipal(tenantA, appID)
	checkGraphError(t, do(t, s, "GET", "/v1.0/servicePrincipals/"+spObjID, a, nil), 404, "Request_ResourceNotFound", spObjID)
}

func TestList(t *testing.T) {
	s := New()
	defer s.Close()
	s.AddClient(tenantA, reader, readerKey)
	var want []string
	for i := 0; i < 5; i++ {
		s.PutApplication(tenantA, Object{DisplayName: "app"})
	}
	for _, o := range s.appsInOrder(tenantA) {
		want = append(want, o.ID)
	}
	tok := mustToken(t, s, tenantA, reader, readerKey)

	var got []string
	next := "/v1.0/applications?$top=2&$select=id"
	for pages := 0; next != ""; pages++ {
		if pages > 5 {
			t.Fatal("nextLink never ends")
		}
		r := do(t, s, "GET", next, tok, nil)
		if r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.raw)
		}
		if ru := r.header.Get("x-ms-resource-unit"); ru != "1" {
			t.Errorf("x-ms-resource-unit %q, want 1", ru)
		}
		for _, v := range r.body["value"].([]any) {
			got = append(got, v.(map[string]any)["id"].(string))
		}
		next = ""
		if nl, ok := r.body["@odata.nextLink"].(string); ok {
			if !strings.HasPrefix(nl, s.URL()) || !strings.Contains(nl, "$select=id") {
				t.Errorf("nextLink %q must be absolute and keep $select", nl)
			}
			next = strings.TrimPrefix(nl, s.URL())
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("paged ids %v, want %v", got, want)
	}
}

func (s *Server) appsInOrder(tenantID string) []Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st []*stored
	for _, v := range s.tenantLocked(tenantID, false).apps {
		st = append(st, v)
	}
	slices.SortFunc(st, func(a, b *stored) int { return a.seq - b.seq })
	var out []Object
	for _, v := range st {
		out = append(out, v.obj)
	}
	return out
}

func TestThrottle(t *testing.T) {
	s := newFixture(t)
	tok := mustToken(t, s, tenantA, reader, readerKey)
	s.Throttle(2, 1500*time.Millisecond)
	path := "/v1.0/servicePrincipals(appId='" + appID + "')"
	for i := 0; i < 2; i++ {
		r := do(t, s, "GET", path, tok, nil)
		checkGraphError(t, r, http.StatusTooManyRequests, "TooManyRequests", "")
		if got := r.header.Get("Retry-After"); got != "2" {
			t.Errorf("Retry-After %q, want 2 (1.5 s rounded up)", got)
		}
		if got := r.header.Get("x-ms-throttle-scope"); !strings.Contains(got, reader) || !strings.Contains(got, tenantA) {
			t.Errorf("x-ms-throttle-scope %q", got)
		}
	}
	if r := do(t, s, "GET", path, tok, nil); r.status != http.StatusOK {
		t.Errorf("request after the throttled ones: %d", r.status)
	}
}

func TestUnreachable(t *testing.T) {
	s := newFixture(t)
	tok := mustToken(t, s, tenantA, reader, readerKey)
	s.ResetRequests()
	s.SetUnreachable(true)
	req, _ := http.NewRequest("GET", s.URL()+"/v1.0/applications(appId='"+appID+"')", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := s.Client().Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got status %d from an unreachable Graph, want a transport error", resp.StatusCode)
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Errorf("error %T %v, want *url.Error", err, err)
	}
	reqs := s.Requests()
	if len(reqs) == 0 || reqs[0].Status != 0 || reqs[0].ClientID != reader {
		t.Errorf("dropped requests not logged with status 0: %+v", reqs)
	}
	// The token endpoint stays up: the failure is Graph's alone.
	mustToken(t, s, tenantA, reader, readerKey)

	s.SetUnreachable(false)
	if r := do(t, s, "GET", "/v1.0/applications(appId='"+appID+"')", tok, nil); r.status != http.StatusOK {
		t.Errorf("after SetUnreachable(false): %d", r.status)
	}
}

func TestRequestLog(t *testing.T) {
	s := newFixture(t)
	tok := mustToken(t, s, tenantA, reader, readerKey)
	do(t, s, "GET", "/v1.0/applications(appId='"+appID+"')?$select=id", tok, nil)
	do(t, s, "GET", "/v1.0/servicePrincipals(appId=%27nope%27)", tok, nil)
	do(t, s, "GET", "/v1.0/applications/"+appObjID, "", nil)
	want := []Request{
		{Method: "GET", Path: "/v1.0/applications(appId='" + appID + "')", RawQuery: "$select=id", Status: 200, ClientID: reader, TenantID: tenantA},
		{Method: "GET", Path: "/v1.0/servicePrincipals(appId='nope')", Status: 404, ClientID: reader, TenantID: tenantA},
		{Method: "GET", Path: "/v1.0/applications/" + appObjID, Status: 401},
	}
	got := s.Requests()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Requests()\n got %+v\nwant %+v", got, want)
	}
	got[0].Status = 999
	if s.Requests()[0].Status != 200 {
		t.Error("Requests() does not return a copy")
	}
	if tr := s.TokenRequests(); len(tr) != 1 || tr[0] != (TokenRequest{TenantID: tenantA, ClientID: reader, Status: 200}) {
		t.Errorf("TokenRequests() = %+v", tr)
	}
	s.ResetRequests()
	if len(s.Requests()) != 0 || len(s.TokenRequests()) != 0 {
		t.Error("ResetRequests left entries")
	}
}

func TestSecretTexts(t *testing.T) {
	s := newFixture(t)
	got := s.SecretTexts()
	want := []string{appSecret, readerKey, spSecret}
	slices.Sort(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SecretTexts() = %v, want %v", got, want)
	}
	s.DeleteServicePrincipal(tenantA, appID)
	if slices.Contains(s.SecretTexts(), spSecret) {
		t.Error("secret of a deleted object still reported")
	}
}

func TestReadBody(t *testing.T) {
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		_, _ = w.Write([]byte(s))
		_ = w.Close()
		return b.Bytes()
	}
	tests := []struct {
		name, encoding string
		body           []byte
		want           string
		wantErr        error
	}{
		{"plain", "", []byte(`{"a":1}`), `{"a":1}`, nil},
		{"gzip", "gzip", gz(`{"keyId":"x"}`), `{"keyId":"x"}`, nil},
		{"gzip, upper case", "GZIP", gz("z"), "z", nil},
		{"brotli", "br", []byte("x"), "", errUnsupportedEncoding},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", "https://x/", bytes.NewReader(tt.body))
			if tt.encoding != "" {
				req.Header.Set("Content-Encoding", tt.encoding)
			}
			got, err := readBody(req)
			if !errors.Is(err, tt.wantErr) || string(got) != tt.want {
				t.Errorf("readBody = %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
	req, _ := http.NewRequest("POST", "https://x/", bytes.NewReader([]byte("not gzip")))
	req.Header.Set("Content-Encoding", "gzip")
	if _, err := readBody(req); err == nil {
		t.Error("corrupt gzip accepted")
	}
}

func TestPutRejectsNonGUIDKeyID(t *testing.T) {
	s := New()
	defer s.Close()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `"k1" is not a GUID`) {
			t.Errorf("recover() = %v, want a panic naming the bad KeyID", r)
		}
	}()
	s.PutApplication(tenantA, Object{Passwords: []PasswordCredential{{KeyID: "k1"}}})
}

func TestConcurrentUse(t *testing.T) {
	s := newFixture(t)
	tok := mustToken(t, s, tenantA, reader, readerKey)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				s.PutApplication(tenantA, Object{AppID: appID, ID: appObjID, DisplayName: "watched"})
				s.Deny("someone-else", j%2 == 0)
				_ = s.SecretTexts()
				_ = s.Requests()
				req, _ := http.NewRequest("GET", s.URL()+"/v1.0/applications(appId='"+appID+"')", nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				if resp, err := s.Client().Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	if n := len(s.Requests()); n != 80 {
		t.Errorf("%d requests logged, want 80", n)
	}
}

// TestOwnersOfAClientThatMayNotReadUsers: Graph lists an application's owners to a client that
// may read applications but not users, with each user's @odata.type and id only and every other
// property null, rather than refusing the list.
func TestOwnersOfAClientThatMayNotReadUsers(t *testing.T) {
	s := newFixture(t)
	app, _ := s.Application(tenantA, appID)
	app.Owners = []Owner{{ID: "u1", DisplayName: "Ada", Mail: "ada@example.com", UserPrincipalName: "ada@contoso.example"},
		{ID: "s1", DisplayName: "deploy-bot", ServicePrincipal: true}}
	s.PutApplication(tenantA, app)
	tok := mustToken(t, s, tenantA, reader, readerKey)
	owners := func() []any {
		r := do(t, s, "GET", "/v1.0/applications/"+appObjID+"/owners", tok, nil)
		if r.status != http.StatusOK {
			t.Fatalf("owners: %d %s", r.status, r.raw)
		}
		v, _ := r.body["value"].([]any)
		if len(v) != 2 {
			t.Fatalf("owners: %s, want two", r.raw)
		}
		return v
	}
	if u := owners()[0].(map[string]any); u["mail"] != "ada@example.com" || u["userPrincipalName"] != "ada@contoso.example" {
		t.Errorf("a user owner, users readable: %v", u)
	}
	s.HideUsers(reader, true)
	v := owners()
	u, sp := v[0].(map[string]any), v[1].(map[string]any)
	if u["@odata.type"] != "#microsoft.graph.user" || u["id"] != "u1" || u["displayName"] != nil || u["mail"] != nil || u["userPrincipalName"] != nil {
		t.Errorf("a user owner, users hidden: %v, want its type and id only", u)
	}
	if sp["displayName"] != "deploy-bot" {
		t.Errorf("a service principal owner, users hidden: %v, want it whole", sp)
	}
}

// TestAnApplicationReadableOnlyThroughItsServicePrincipal: to a client that may read the service
// principal and not the application (Application.ReadWrite.OwnedBy, not an owner), Graph refuses
// the application's point reads, by appId and by object ID, and leaves it out of lists; other
// clients see it. A fault set for the application answers its next point reads, one each.
func TestAnApplicationReadableOnlyThroughItsServicePrincipal(t *testing.T) {
	s := newFixture(t)
	const other, otherKey = "aaaaaaaa-0000-0000-0000-000000000009", "other~secret"
	s.AddClient(tenantA, other, otherKey)
	s.HideApplication(reader, strings.ToUpper(appID), true)
	tok, otherTok := mustToken(t, s, tenantA, reader, readerKey), mustToken(t, s, tenantA, other, otherKey)
	for _, path := range []string{"/v1.0/applications(appId='" + appID + "')", "/v1.0/applications/" + appObjID} {
		if r := do(t, s, "GET", path, tok, nil); r.status != http.StatusForbidden || !strings.Contains(string(r.raw), "Authorization_RequestDenied") {
			t.Errorf("%s: %d %s, want 403 Authorization_RequestDenied", path, r.status, r.raw)
		}
		if r := do(t, s, "GET", path, otherTok, nil); r.status != http.StatusOK {
			t.Errorf("%s, another client: %d %s", path, r.status, r.raw)
		}
	}
	if r := do(t, s, "GET", "/v1.0/servicePrincipals(appId='"+appID+"')", tok, nil); r.status != http.StatusOK {
		t.Errorf("its service principal: %d %s", r.status, r.raw)
	}
	listed := func(path, token string) int {
		r := do(t, s, "GET", path, token, nil)
		v, _ := r.body["value"].([]any)
		return len(v)
	}
	filter := "/v1.0/applications?$filter=" + url.QueryEscape("appId in ('"+appID+"')")
	if n, m := listed(filter, tok), listed("/v1.0/applications", tok); n != 0 || m != 0 {
		t.Errorf("lists: %d by appId, %d of all; want it left out", n, m)
	}
	if n := listed(filter, otherTok); n != 1 {
		t.Errorf("another client's list: %d", n)
	}

	s.HideApplication(reader, appID, false)
	s.FailApplication(appID, http.StatusInternalServerError)
	path := "/v1.0/applications(appId='" + appID + "')"
	if r := do(t, s, "GET", path, tok, nil); r.status != http.StatusInternalServerError || !strings.Contains(string(r.raw), "generalException") {
		t.Errorf("with a fault: %d %s", r.status, r.raw)
	}
	if r := do(t, s, "GET", path, tok, nil); r.status != http.StatusOK {
		t.Errorf("after the fault: %d %s", r.status, r.raw)
	}
}
