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

// A tenant's whole report is read in pages of 999, paced, and a page the reports service throttled
// is asked again after its Retry-After; an application's own read is not retried (its check
// reads again later).
func TestReadTenantSignIns(t *testing.T) {
	fake, c, cred := setup(t)
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for i := range 1200 {
		id := fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)
		key := fmt.Sprintf("%08d-1111-4111-8111-111111111111", i)
		fake.PutApplication(tenant, fakegraph.Object{AppID: id, Passwords: []fakegraph.PasswordCredential{{KeyID: key, Start: end1.AddDate(-1, 0, 0), End: end1}}})
		fake.PutServicePrincipal(tenant, fakegraph.Object{AppID: id})
		if i%100 == 0 {
			fake.SignIn(tenant, key, at)
		}
	}
	fake.Throttle(1, time.Second)
	fake.ResetRequests()
	began := time.Now()
	var entries, used int
	err := c.ReadTenantSignIns(context.Background(), cred, func(u graph.KeyUse) {
		entries++
		if u.LastSignIn.Equal(at) {
			used++
		}
	})
	if err != nil || entries != 1200 || used != 12 {
		t.Fatalf("%d entries, %d signed in, %v; want 1200 and 12", entries, used, err)
	}
	if n := len(fake.Requests()); n != 3 || time.Since(began) < time.Second {
		t.Errorf("%d requests in %v; want the throttled first page asked again after a second, then the second page", n, time.Since(began))
	}
	fake.Throttle(1, time.Second)
	if _, err := c.ReadSignIns(context.Background(), cred, "00000001-0000-4000-8000-000000000000"); azerr.KindOf(err) != azerr.KindThrottled {
		t.Errorf("an application's read when throttled: %v; want the throttling returned", err)
	}
}
