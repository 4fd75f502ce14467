package fakegraph

import (
	"net/http"
	"net/url"
	"testing"
	"time"
)

// A secret that signs in at the token endpoint shows in the credential report once the lag has
// passed, on its own entry only; the service principal's report shows the same time as a client.
func TestSignInReports(t *testing.T) {
	s := newFixture(t)
	tok := mustToken(t, s, tenantA, reader, readerKey)
	report := func(path string) []any {
		t.Helper()
		r := do(t, s, http.MethodGet, path, tok, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.status, r.raw)
		}
		return r.body["value"].([]any)
	}
	byKey := func(entries []any) map[string]any {
		out := map[string]any{}
		for _, e := range entries {
			m := e.(map[string]any)
			out[m["keyId"].(string)+" "+m["credentialOrigin"].(string)] = m["signInActivity"]
		}
		return out
	}
	credentials := "/beta/reports/appCredentialSignInActivities?$filter=" + url.QueryEscape("appId eq '"+appID+"'")
	got := byKey(report(credentials))
	if len(got) != 3 || got["0000a001-0000-0000-0000-000000000001 application"] != nil || got["0000a002-0000-0000-0000-000000000002 servicePrincipal"] != nil {
		t.Fatalf("before any sign-in: %v; want the three credentials, none signed in", got)
	}

	s.SetSignInLag(time.Hour)
	mustToken(t, s, tenantA, appID, spSecret)
	if got := byKey(report(credentials)); got["0000a002-0000-0000-0000-000000000002 servicePrincipal"] != nil {
		t.Fatalf("a sign-in within the lag shows: %v", got)
	}
	s.SetSignInLag(0)
	got = byKey(report(credentials))
	act, _ := got["0000a002-0000-0000-0000-000000000002 servicePrincipal"].(map[string]any)
	if act == nil || act["lastSignInDateTime"] == nil || got["0000a001-0000-0000-0000-000000000001 application"] != nil {
		t.Fatalf("after the lag: %v; want the service principal's secret signed in, the application's not", got)
	}
	sps := report("/beta/reports/servicePrincipalSignInActivities?$filter=" + url.QueryEscape("appId eq '"+appID+"'"))
	if len(sps) != 1 || sps[0].(map[string]any)["lastSignInActivity"].(map[string]any)["lastSignInDateTime"] != act["lastSignInDateTime"] {
		t.Fatalf("service principal report %v; want one entry with the same last sign-in", sps)
	}

	// Pages follow @odata.nextLink.
	first := do(t, s, http.MethodGet, credentials+"&$top=2", tok, nil)
	next, _ := first.body["@odata.nextLink"].(string)
	if len(first.body["value"].([]any)) != 2 || next == "" {
		t.Fatalf("first page %s; want two entries and a next link", first.raw)
	}
	u, _ := url.Parse(next)
	if rest := report(u.RequestURI()); len(rest) != 1 {
		t.Fatalf("second page %v; want the third entry", rest)
	}
}

// The reports refuse as Graph does: a tenant without the licence, a client without
// AuditLog.Read.All, a filter they do not take.
func TestSignInReportRefusals(t *testing.T) {
	s := newFixture(t)
	tok := mustToken(t, s, tenantA, reader, readerKey)
	path := "/beta/reports/appCredentialSignInActivities"
	checkGraphError(t, do(t, s, http.MethodGet, path+"?$filter="+url.QueryEscape("displayName eq 'x'"), tok, nil), http.StatusBadRequest, "BadRequest", "Invalid filter clause")
	s.SetUnlicensed(tenantA, true)
	checkGraphError(t, do(t, s, http.MethodGet, path, tok, nil), http.StatusForbidden, "Authentication_RequestFromNonPremiumTenantOrB2CTenant", "premium license")
	s.SetUnlicensed(tenantA, false)
	s.DenyReports(reader)
	checkGraphError(t, do(t, s, http.MethodGet, path, tok, nil), http.StatusForbidden, "Authentication_MSGraphPermissionMissing", "AuditLog.Read.All")
}
