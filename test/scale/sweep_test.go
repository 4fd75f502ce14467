// Package scale measures what reading many service principals costs in Graph's throttling budget.
package scale

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"k8s.io/utils/clock"

	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/graph/budget"
	"github.com/credwatch/credwatch/internal/graph/msgraph"
	"github.com/credwatch/credwatch/internal/graph/planner"
	"github.com/credwatch/credwatch/test/fakegraph"
)

const (
	tenant = "11111111-1111-4111-8111-111111111111"
	client = "22222222-2222-4222-8222-222222222222"
	secret = "operator~secret"
	// workers is the manager's reconcile concurrency; latency a distant Graph region's round trip.
	workers = 20
	latency = 30 * time.Millisecond
	// window is how long the manager's planned reads wait for others.
	window = 100 * time.Millisecond
)

// BenchmarkGraphSweep reads the credentials of N service principals as the manager does (20
// workers whose checks are planned into lists and woken by their answers, the budget spent by
// the limiter) from a Graph that enforces a small tenant's budget and answers after 30 ms, and
// reports what one sweep cost against the least time that budget allows. Run with
// -benchtime=1x: each sweep starts on a full budget only once.
func BenchmarkGraphSweep(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("sps=%d", n), func(b *testing.B) { sweep(b, n, budget.SmallTenant) })
	}
}

// BenchmarkGraphSweepThrottled is the same sweep against a Graph that allows 40 units in 10 s,
// a hundredth of what the limiter is configured for (another replica spends the rest, say): the
// limiter must learn the budget from the first 429s, and the 429s after the first ten seconds,
// once it has, are counted apart.
func BenchmarkGraphSweepThrottled(b *testing.B) {
	const n = 1000
	b.Run(fmt.Sprintf("sps=%d", n), func(b *testing.B) { sweep(b, n, 40) })
}

// firstWave is how long the limiter has to learn a budget smaller than it was told.
const firstWave = 10 * time.Second

func sweep(b *testing.B, n, graphBudget int) {
	fake := fakegraph.New()
	b.Cleanup(fake.Close)
	fake.AddClient(tenant, client, secret)
	appIDs := seedApps(fake, n)
	graphClient, cred := operatorGraph(b, fake)
	reader := planner.New(graphClient, clock.RealClock{}, window)

	for range b.N {
		b.StopTimer()
		fake.SetBudget(graphBudget, clock.RealClock{}) // a full bucket for each sweep
		fake.SetLatency(latency)
		fake.ResetRequests()
		// The workqueue: every appId once, then again when its answer wakes it.
		queue := make(chan string, 2*n)
		for _, id := range appIDs {
			queue <- id
		}
		var failures sync.Map
		var wg sync.WaitGroup
		var answered sync.WaitGroup
		answered.Add(n)
		b.StartTimer()
		began := time.Now()
		var wave atomic.Int64
		wave.Store(-1)
		learned := time.AfterFunc(firstWave, func() { wave.Store(int64(fake.Throttled())) })
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range queue {
					_, err := reader.Check(context.Background(), cred, id, graph.Ask{Asker: id, Wake: func() { queue <- id }})
					if errors.Is(err, graph.ErrPending) {
						continue
					}
					if err != nil {
						failures.Store(id, err)
					}
					answered.Done()
				}
			}()
		}
		answered.Wait()
		close(queue)
		wg.Wait()
		took := time.Since(began)
		b.StopTimer()
		learned.Stop()
		later := 0
		if w := wave.Load(); w >= 0 {
			later = fake.Throttled() - int(w)
		}

		failures.Range(func(k, v any) bool { b.Errorf("%s: %v", k, v); return false })
		requests := 0
		for _, r := range fake.Requests() {
			if !r.Batched && strings.HasPrefix(r.Path, "/v1.0/") {
				requests++
			}
		}
		units := fake.Spent()
		rate := float64(graphBudget) / budget.Window.Seconds()
		bound := max(0, float64(units-graphBudget)) / rate
		b.ReportMetric(took.Seconds(), "sweep-s")
		b.ReportMetric(bound, "budget-bound-s")
		b.ReportMetric(float64(requests)/float64(n), "requests/sp")
		b.ReportMetric(float64(units)/float64(n), "units/sp")
		b.ReportMetric(float64(fake.Throttled()), "429s")
		b.ReportMetric(float64(later), "429s-after-first-10s")
	}
}

// seedApps gives the fake n applications, each with its service principal and a secret ending in
// six months, and returns their appIds.
func seedApps(fake *fakegraph.Server, n int) []string {
	appIDs := make([]string, n)
	end := time.Now().AddDate(0, 6, 0)
	for i := range appIDs {
		appIDs[i] = fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		pw := []fakegraph.PasswordCredential{{KeyID: fmt.Sprintf("%08x-0000-4000-8000-000000000001", i), SecretText: "s", Start: end.AddDate(-1, 0, 0), End: end}}
		// Entra requires a display name, and the operator's status and messages carry it.
		name := fmt.Sprintf("app-%06d", i)
		fake.PutApplication(tenant, fakegraph.Object{ID: fmt.Sprintf("%08x-0000-4000-8000-00000000000a", i), AppID: appIDs[i], DisplayName: name, Passwords: pw})
		fake.PutServicePrincipal(tenant, fakegraph.Object{ID: fmt.Sprintf("%08x-0000-4000-8000-00000000000b", i), AppID: appIDs[i], DisplayName: name})
	}
	return appIDs
}

// operatorGraph is the operator's Graph client, spending a small tenant's budget, and the
// identity it signs in to the fake with.
func operatorGraph(b *testing.B, fake *fakegraph.Server) (*msgraph.Client, azcore.TokenCredential) {
	graphClient, err := msgraph.New(fake.URL(), budget.New(clock.RealClock{}, budget.SmallTenant).RoundTripper(fake.Client().Transport))
	if err != nil {
		b.Fatal(err)
	}
	cred, err := azure.NewIdentities(azure.Cloud{AuthorityHost: fake.URL() + "/", GraphEndpoint: fake.URL()}, fake.Client(), nil).Credential(azure.ClientSecret(tenant, client, secret))
	if err != nil {
		b.Fatal(err)
	}
	return graphClient, cred
}
