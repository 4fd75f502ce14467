package fakegraph

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
)

func TestFilter(t *testing.T) {
	s := New()
	defer s.Close()
	s.AddClient(tenantA, reader, readerKey)
	ids := map[string]string{}
	for _, o := range []Object{
		{DisplayName: "prod-api", Tags: []string{"aks", "team-a"}},
		{DisplayName: "Prod-Web", Tags: []string{"team-b"}},
		{DisplayName: "dev-api", Tags: []string{"aks"}},
		{DisplayName: "it's", Tags: nil},
	} {
		s.PutApplication(tenantA, o)
	}
	for _, o := range s.appsInOrder(tenantA) {
		ids[o.DisplayName] = o.AppID
	}
	tok := mustToken(t, s, tenantA, reader, readerKey)

	tests := []struct {
		filter string
		want   []string // display names, in creation order
	}{
		{"startswith(displayName,'prod-')", []string{"prod-api", "Prod-Web"}},
		{"displayName eq 'PROD-API'", []string{"prod-api"}},
		{"displayName eq 'it''s'", []string{"it's"}},
		{"tags/any(t:t eq 'aks')", []string{"prod-api", "dev-api"}},
		{"tags/any(x: x eq 'AKS') and startswith(displayName, 'dev')", []string{"dev-api"}},
		{"displayName in ('dev-api', 'it''s') or appId eq '" + ids["Prod-Web"] + "'", []string{"Prod-Web", "dev-api", "it's"}},
		{"(startswith(displayName,'prod') or startswith(displayName,'dev')) and tags/any(t:t eq 'team-a')", []string{"prod-api"}},
		{"displayName eq 'nobody'", nil},
	}
	for _, tt := range tests {
		t.Run(tt.filter, func(t *testing.T) {
			r := do(t, s, "GET", "/v1.0/applications?$select=displayName&$filter="+url.QueryEscape(tt.filter), tok, nil)
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.raw)
			}
			var got []string
			for _, v := range r.body["value"].([]any) {
				got = append(got, v.(map[string]any)["displayName"].(string))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}

	bad := []struct{ filter, code, msg string }{
		{"displayName eq", "Request_BadRequest", "expected a string literal"},
		{"displayName eq 'x", "Request_BadRequest", "unterminated string literal"},
		{"notes eq 'x'", "Request_BadRequest", "Unsupported or invalid query filter clause specified for property 'notes' of resource 'Application'."},
		{"displayName ne 'x'", "Request_UnsupportedQuery", "operator 'ne'"},
		{"endswith(displayName,'x')", "Request_UnsupportedQuery", "advanced query"},
		{"displayName eq 'x' extra", "Request_BadRequest", "syntax error at 'extra'"},
		{"(displayName eq 'x'", "Request_BadRequest", "expected ')'"},
		{"displayName in ('1','2','3','4','5','6','7','8','9','10','11','12','13','14','15','16')", "Request_UnsupportedQuery",
			"Too many child clauses specified in search filter expression containing 'OR' operators: 16. Max allowed: 15."},
	}
	for _, tt := range bad {
		t.Run(tt.filter, func(t *testing.T) {
			r := do(t, s, "GET", "/v1.0/applications?$filter="+url.QueryEscape(tt.filter), tok, nil)
			checkGraphError(t, r, 400, tt.code, tt.msg)
		})
	}

	t.Run("paging keeps the filter", func(t *testing.T) {
		r := do(t, s, "GET", "/v1.0/applications?$top=1&$select=displayName&$filter="+url.QueryEscape("tags/any(t:t eq 'aks')"), tok, nil)
		nl, _ := r.body["@odata.nextLink"].(string)
		r = do(t, s, "GET", strings.TrimPrefix(nl, s.URL()), tok, nil)
		v := r.body["value"].([]any)
		if len(v) != 1 || v[0].(map[string]any)["displayName"] != "dev-api" || r.body["@odata.nextLink"] != nil {
			t.Errorf("second page %s, want only dev-api and no nextLink", r.raw)
		}
	})
}

func TestAppIDsOnly(t *testing.T) {
	for _, tc := range []struct {
		filter string
		want   []string
	}{
		{"appId eq 'a'", []string{"a"}},
		{"appid in ('a', 'b','c')", []string{"a", "b", "c"}},
		{"appId in ('a') or displayName eq 'x'", nil},
		{"appId in ('a' 'b')", nil},
		{"displayName eq 'a'", nil},
		{"appId in ()", nil},
	} {
		got, ok := appIDsOnly(tc.filter)
		if !reflect.DeepEqual(got, tc.want) || ok != (tc.want != nil) {
			t.Errorf("appIDsOnly(%q) = %q, %v; want %q", tc.filter, got, ok, tc.want)
		}
	}
}
