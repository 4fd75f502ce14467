package scale

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/graph/budget"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// Graph's reports service takes five requests in ten seconds per application and tenant (Graph's
// throttling limits, "Identity and access reports"): the fake does not throttle them, so what the
// limit adds is computed from the pages read.
const (
	reportsPerWindow = 5
	reportsWindow    = 10 * time.Second
)

// BenchmarkTenantSignIns reads the whole credential sign-in report of a tenant of N applications,
// each with its service principal (one credential in ten a certificate, as seedTenant makes them),
// a third of whose secrets signed in, as a tenantScan watch with spec.usage.signIns does with each
// scan: through the SDK and the limiter, in pages of 999, from the fake that answers after 30 ms.
// It reports the time, the requests and resource units, and the time the reports' own limit would
// make it take at least.
func BenchmarkTenantSignIns(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("apps=%d", n), func(b *testing.B) {
			fake := fakegraph.New()
			b.Cleanup(fake.Close)
			fake.AddClient(tenant, client, secret)
			seedTenant(fake, n, true, true)
			signedIn := time.Now().Add(-time.Hour)
			for i := 0; i < n; i += 3 {
				app, _ := fake.Application(tenant, fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i))
				fake.SignIn(tenant, app.Passwords[0].KeyID, signedIn)
			}
			for range b.N {
				b.StopTimer()
				graphClient, cred := operatorGraph(b, fake)
				fake.SetBudget(budget.SmallTenant, clock.RealClock{})
				fake.SetLatency(latency)
				fake.ResetRequests()
				b.StartTimer()
				began := time.Now()
				var entries, used int
				err := graphClient.ReadTenantSignIns(context.Background(), cred, func(u graph.KeyUse) {
					entries++
					if !u.LastSignIn.IsZero() {
						used++
					}
				})
				took := time.Since(began)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if want := n + n/10; entries != want || used != (n+2)/3 {
					b.Fatalf("read %d entries, %d signed in; want %d and %d", entries, used, want, (n+2)/3)
				}
				var requests int
				for _, r := range fake.Requests() {
					if strings.HasPrefix(r.Path, "/beta/") {
						requests++
					}
				}
				b.ReportMetric(took.Seconds(), "read-s")
				b.ReportMetric(float64(requests), "requests")
				b.ReportMetric(float64(fake.Spent()), "units")
				b.ReportMetric(float64(fake.Throttled()), "429s")
				// The first five go at once; each five after them wait a window.
				b.ReportMetric(max(0, math.Ceil(float64(requests)/reportsPerWindow)-1)*reportsWindow.Seconds(), "limit-floor-s")
				b.StartTimer()
			}
		})
	}
}
