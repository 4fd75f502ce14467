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

	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/graph/budget"
	"github.com/credwatch/credwatch/internal/graph/planner"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// memoryKeeper keeps delta state in memory, as the operator's ConfigMaps would.
type memoryKeeper struct {
	mu   sync.Mutex
	kept map[string][]byte
}

func (k *memoryKeeper) Load(_ context.Context, scope string) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.kept[scope], nil
}

func (k *memoryKeeper) Save(_ context.Context, scope string, state []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kept[scope] = state
}

func (*memoryKeeper) Resynced(string, error)        {}
func (*memoryKeeper) Missed(string, string, string) {}

// hoursLater is the real clock, an hour later for each call of later: its timers run in real time.
type hoursLater struct {
	clock.RealClock
	ahead atomic.Int64
}

func (c *hoursLater) later()                          { c.ahead.Add(int64(time.Hour)) }
func (c *hoursLater) Now() time.Time                  { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *hoursLater) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// BenchmarkGraphSweepDelta sweeps 10,000 watches of one tenant as BenchmarkGraphSweep does, with
// delta reads on: the first sweeps read the watches and start the log; then a sweep of a tenant
// where nothing changed, and one where 1% of the applications gained a secret, are measured:
// their Graph requests (a $batch counts once), resource units and time, and how many of the
// changed applications' answers show the new secret.
func BenchmarkGraphSweepDelta(b *testing.B) {
	const n, changed = 10000, 100
	fake := fakegraph.New()
	b.Cleanup(fake.Close)
	fake.AddClient(tenant, client, secret)
	appIDs := seedApps(fake, n)
	graphClient, cred := operatorGraph(b, fake)
	// Sweeps are an hour apart for the planner, as a check interval at least, and seconds apart
	// for the benchmark: a change reported within a second of a watch's last read is read again.
	clk := &hoursLater{}
	reader := planner.New(graphClient, clk, window)
	if err := reader.UseDelta(planner.DeltaOptions{Keeper: &memoryKeeper{kept: map[string][]byte{}}}); err != nil {
		b.Fatal(err)
	}
	known := map[string]graph.Snapshot{}
	fake.SetLatency(latency)
	for range b.N {
		b.StopTimer()
		deltaSweep(b, reader, cred, appIDs, known) // reads every watch, and starts the log
		time.Sleep(2 * window)                     // the log's first round
		clk.later()
		deltaSweep(b, reader, cred, appIDs, known) // reads the checks read before the log started
		clk.later()

		fake.SetBudget(budget.SmallTenant, clock.RealClock{})
		fake.ResetRequests()
		b.StartTimer()
		took := deltaSweep(b, reader, cred, appIDs, known)
		b.StopTimer()
		requests, units := graphCost(fake)
		b.ReportMetric(took.Seconds(), "quiet-sweep-s")
		b.ReportMetric(float64(requests), "quiet-requests")
		b.ReportMetric(float64(units), "quiet-units")

		clk.later()
		for i := range changed {
			app, _ := fake.Application(tenant, appIDs[i*(n/changed)])
			app.Passwords = append(app.Passwords, fakegraph.PasswordCredential{KeyID: fmt.Sprintf("%08x-0000-4000-8000-0000000000ff", i), SecretText: "added",
				Start: app.Passwords[0].Start, End: app.Passwords[0].End})
			fake.PutApplication(tenant, app)
		}
		fake.SetBudget(budget.SmallTenant, clock.RealClock{})
		fake.ResetRequests()
		b.StartTimer()
		took = deltaSweep(b, reader, cred, appIDs, known)
		b.StopTimer()
		requests, units = graphCost(fake)
		seen := 0
		for i := range changed {
			if len(known[appIDs[i*(n/changed)]].Credentials) == 2 {
				seen++
			}
		}
		b.ReportMetric(took.Seconds(), "changed-sweep-s")
		b.ReportMetric(float64(requests), "changed-requests")
		b.ReportMetric(float64(units), "changed-units")
		b.ReportMetric(float64(seen), "changes-seen")
	}
}

// deltaSweep checks every appId as a watch that knows what it last took, with 20 workers, and
// keeps the answers; it returns how long the sweep took.
func deltaSweep(b *testing.B, reader *planner.Planner, cred azcore.TokenCredential, appIDs []string, known map[string]graph.Snapshot) time.Duration {
	queue := make(chan string, 2*len(appIDs))
	for _, id := range appIDs {
		queue <- id
	}
	var mu sync.Mutex
	ask := func(id string) graph.Ask {
		a := graph.Ask{Asker: id, Wake: func() { queue <- id }, MayList: true}
		mu.Lock()
		defer mu.Unlock()
		if k, ok := known[id]; ok {
			a.Known, a.KnownAt = &k, k.ReadAt.Truncate(time.Second)
		}
		return a
	}
	var answered, wg sync.WaitGroup
	answered.Add(len(appIDs))
	began := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range queue {
				s, err := reader.Check(context.Background(), cred, id, ask(id))
				if errors.Is(err, graph.ErrPending) {
					continue
				}
				if err != nil {
					b.Errorf("%s: %v", id, err)
				}
				mu.Lock()
				known[id] = s
				mu.Unlock()
				answered.Done()
			}
		}()
	}
	answered.Wait()
	took := time.Since(began)
	close(queue)
	wg.Wait()
	return took
}

// graphCost is the Graph requests the fake saw, a $batch once, and the units they spent.
func graphCost(fake *fakegraph.Server) (requests, units int) {
	for _, r := range fake.Requests() {
		if !r.Batched && strings.HasPrefix(r.Path, "/v1.0/") {
			requests++
		}
	}
	return requests, fake.Spent()
}

// BenchmarkTenantScanDelta scans a tenant of N applications, each with its service principal, as
// a tenantScan watch does with delta reads on: the first scan lists the tenant; then a scan of a
// tenant where nothing changed, and one where 1% of the applications gained a secret, are
// measured: their time to the last object folded, their Graph requests and units, and whether the
// fold holds every credential.
func BenchmarkTenantScanDelta(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("apps=%d", n), func(b *testing.B) {
			fake := fakegraph.New()
			b.Cleanup(fake.Close)
			fake.AddClient(tenant, client, secret)
			seedTenant(fake, n, true, true)
			graphClient, cred := operatorGraph(b, fake)
			clk := &hoursLater{}
			reader := planner.New(graphClient, clk, window)
			if err := reader.UseDelta(planner.DeltaOptions{Keeper: &memoryKeeper{kept: map[string][]byte{}}}); err != nil {
				b.Fatal(err)
			}
			fake.SetLatency(latency)
			scan := func(wantCreds int) (took time.Duration, requests, units int) {
				b.Helper()
				fake.SetBudget(budget.SmallTenant, clock.RealClock{})
				fake.ResetRequests()
				clk.later()
				b.StartTimer()
				began := time.Now()
				var fold tenantscan.Fold
				err := reader.Scan(context.Background(), cred, fold.Add)
				found := fold.Found()
				took = time.Since(began)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if int(found.Applications) != n || len(found.Credentials) != wantCreds {
					b.Fatalf("scanned %d applications and %d credentials, want %d and %d", found.Applications, len(found.Credentials), n, wantCreds)
				}
				requests, units = graphCost(fake)
				return took, requests, units
			}
			for range b.N {
				b.StopTimer()
				took, requests, units := scan(n + n/10)
				b.ReportMetric(took.Seconds(), "first-s")
				b.ReportMetric(float64(requests), "first-requests")
				b.ReportMetric(float64(units), "first-units")
				took, requests, units = scan(n + n/10)
				b.ReportMetric(took.Seconds(), "quiet-s")
				b.ReportMetric(float64(requests), "quiet-requests")
				b.ReportMetric(float64(units), "quiet-units")
				changed := n / 100
				for i := range changed {
					app, _ := fake.Application(tenant, fmt.Sprintf("%08x-0000-4000-8000-%012x", i*100, i*100))
					app.Passwords = append(app.Passwords, fakegraph.PasswordCredential{SecretText: "added", Start: app.Passwords[0].Start, End: app.Passwords[0].End})
					fake.PutApplication(tenant, app)
				}
				took, requests, units = scan(n + n/10 + changed)
				b.ReportMetric(took.Seconds(), "changed-s")
				b.ReportMetric(float64(requests), "changed-requests")
				b.ReportMetric(float64(units), "changed-units")
			}
		})
	}
}
