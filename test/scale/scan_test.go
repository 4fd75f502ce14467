package scale

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/credwatch/credwatch/internal/graph/budget"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// BenchmarkTenantScan scans a tenant of N applications, each with its service principal, as a
// tenantScan watch does, through the SDK and the limiter, from the throttling fake that answers
// after 30 ms. One application in ten carries a certificate of 1 KiB, whose bytes Graph returns
// in a list that selects keyCredentials.
func BenchmarkTenantScan(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("apps=%d", n), func(b *testing.B) { scan(b, n) })
	}
}

func scan(b *testing.B, n int) {
	fake := fakegraph.New()
	b.Cleanup(fake.Close)
	fake.AddClient(tenant, client, secret)
	end := time.Now().AddDate(0, 6, 0)
	cert := make([]byte, 1024)
	for i := range n {
		appID := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		app := fakegraph.Object{AppID: appID, DisplayName: fmt.Sprintf("app-%d", i),
			Passwords: []fakegraph.PasswordCredential{{SecretText: "s", Start: end.AddDate(-1, 0, 0), End: end}}}
		if i%10 == 0 {
			app.Keys = []fakegraph.KeyCredential{{Key: cert, Start: end.AddDate(-1, 0, 0), End: end}}
		}
		fake.PutApplication(tenant, app)
		fake.PutServicePrincipal(tenant, fakegraph.Object{AppID: appID, DisplayName: app.DisplayName})
	}
	graphClient, cred := operatorGraph(b, fake)

	for range b.N {
		b.StopTimer()
		fake.SetBudget(budget.SmallTenant, clock.RealClock{})
		fake.SetLatency(latency)
		fake.ResetRequests()
		b.StartTimer()
		began := time.Now()
		snaps, err := graphClient.ScanTenant(context.Background(), cred, "")
		took := time.Since(began)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if len(snaps) != n {
			b.Fatalf("scanned %d appIds, want %d", len(snaps), n)
		}
		requests := 0
		for _, r := range fake.Requests() {
			if strings.HasPrefix(r.Path, "/v1.0/") {
				requests++
			}
		}
		b.ReportMetric(took.Seconds(), "scan-s")
		b.ReportMetric(float64(requests), "requests")
		b.ReportMetric(float64(fake.Spent()), "units")
		b.ReportMetric(float64(fake.Throttled()), "429s")
	}
}
