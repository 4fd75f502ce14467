package msgraph

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// The report says when each credential of the application and its service principal last signed
// in, across pages; a tenant without the licence and an identity without the permission are told
// apart.
func TestReadSignIns(t *testing.T) {
	fake, c, cred := setup(t)
	seed(fake, true, true)
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	fake.SignIn(tenant, "b1111111-1111-4111-8111-111111111111", at)
	uses, err := c.ReadSignIns(context.Background(), cred, appID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, u := range uses {
		got[u.KeyID] = fmt.Sprintf("%s %v", u.Source, u.LastSignIn)
	}
	want := map[string]string{
		"a1111111-1111-4111-8111-111111111111": "Application 0001-01-01 00:00:00 +0000 UTC",
		"a2222222-2222-4222-8222-222222222222": "Application 0001-01-01 00:00:00 +0000 UTC",
		"b1111111-1111-4111-8111-111111111111": "ServicePrincipal " + at.String(),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sign-ins %v, want %v", got, want)
	}

	// An application of 150 secrets is read over two pages.
	var many []fakegraph.PasswordCredential
	for i := range 150 {
		many = append(many, fakegraph.PasswordCredential{KeyID: fmt.Sprintf("c0000000-0000-4000-8000-%012d", i), Start: end1.AddDate(-1, 0, 0), End: end1})
	}
	fake.PutApplication(tenant, fakegraph.Object{ID: "a0000000-0000-4000-8000-000000000001", AppID: appID, Passwords: many})
	fake.ResetRequests()
	if uses, err := c.ReadSignIns(context.Background(), cred, appID); err != nil || len(uses) != 151 || len(fake.Requests()) != 2 {
		t.Errorf("%d sign-ins in %d requests, %v; want 151 in two pages", len(uses), len(fake.Requests()), err)
	}

	fake.SetUnlicensed(tenant, true)
	if _, err := c.ReadSignIns(context.Background(), cred, appID); !errors.Is(err, graph.ErrSignInsUnlicensed) || strings.Contains(err.Error(), "AuditLog") {
		t.Errorf("unlicensed: %v; want ErrSignInsUnlicensed, not a permission", err)
	}
	fake.SetUnlicensed(tenant, false)
	fake.DenyReports(client)
	if _, err := c.ReadSignIns(context.Background(), cred, appID); azerr.KindOf(err) != azerr.KindForbidden || !strings.Contains(err.Error(), "AuditLog.Read.All") {
		t.Errorf("no permission: %v; want a refusal naming AuditLog.Read.All", err)
	}
}

func TestReportTime(t *testing.T) {
	for in, want := range map[string]time.Time{
		"2026-12-01T08:00:00Z":      time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC),
		"2021-03-18T00:00:00-8:00":  time.Date(2021, 3, 18, 8, 0, 0, 0, time.UTC),
		"2021-03-18T00:00:00-08:00": time.Date(2021, 3, 18, 8, 0, 0, 0, time.UTC),
		"":                          {},
		"yesterday":                 {},
	} {
		if got := reportTime(in); !got.Equal(want) {
			t.Errorf("reportTime(%q) = %v, want %v", in, got, want)
		}
	}
}
