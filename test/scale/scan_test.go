package scale

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/graph/budget"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
	"github.com/credwatch/credwatch/test/fakeazure"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// scanSizes are the tenants the scan benchmarks read: applications, each with its service principal.
var scanSizes = []int{100, 1000, 10000, 100000}

// BenchmarkTenantScan scans a tenant of N applications, each with its service principal, as a
// tenantScan watch does (through the SDK and the limiter, folded into what status and metrics
// keep), from the throttling fake that answers after 30 ms. It also times each list alone, from a
// tenant that holds only that kind of object (the other list is then one empty page): the two
// lists are read side by side, so a scan should take about as long as the longer.
func BenchmarkTenantScan(b *testing.B) {
	for _, n := range scanSizes {
		b.Run(fmt.Sprintf("apps=%d", n), func(b *testing.B) {
			both, apps, sps := fakegraph.New(), fakegraph.New(), fakegraph.New()
			for _, f := range []*fakegraph.Server{both, apps, sps} {
				b.Cleanup(f.Close)
				f.AddClient(tenant, client, secret)
			}
			seedTenant(both, n, true, true)
			seedTenant(apps, n, true, false)
			seedTenant(sps, n, false, true)
			for range b.N {
				found, took, requests, units, throttled := timeScan(b, both)
				if int(found.Applications) != n || int(found.ServicePrincipals) != n || len(found.Credentials) != n+n/10 {
					b.Fatalf("scanned %d applications, %d service principals and %d credentials, want %d, %d and %d",
						found.Applications, found.ServicePrincipals, len(found.Credentials), n, n, n+n/10)
				}
				_, appsAlone, _, _, _ := timeScan(b, apps)
				_, spsAlone, _, _, _ := timeScan(b, sps)
				b.ReportMetric(took.Seconds(), "scan-s")
				b.ReportMetric(appsAlone.Seconds(), "apps-alone-s")
				b.ReportMetric(spsAlone.Seconds(), "sps-alone-s")
				b.ReportMetric(took.Seconds()/max(appsAlone, spsAlone).Seconds(), "scan/longer-list")
				b.ReportMetric(float64(requests), "requests")
				b.ReportMetric(float64(units), "units")
				b.ReportMetric(float64(throttled), "429s")
			}
		})
	}
}

// timeScan scans fake's tenant on a full budget, and returns what it found, how long it took and
// what it cost Graph.
func timeScan(b *testing.B, fake *fakegraph.Server) (found tenantscan.Found, took time.Duration, requests, units, throttled int) {
	b.StopTimer()
	defer b.StartTimer()
	graphClient, cred := operatorGraph(b, fake)
	fake.SetBudget(budget.SmallTenant, clock.RealClock{})
	fake.SetLatency(latency)
	fake.ResetRequests()
	b.StartTimer()
	began := time.Now()
	var fold tenantscan.Fold
	err := graphClient.ScanTenant(context.Background(), cred, "", fold.Add)
	found = fold.Found()
	took = time.Since(began)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range fake.Requests() {
		if strings.HasPrefix(r.Path, "/v1.0/") {
			requests++
		}
	}
	return found, took, requests, fake.Spent(), fake.Throttled()
}

// seedTenant gives the fake n applications, or their service principals, or both, each with a
// secret; one application in ten carries a certificate of 1 KiB too, whose bytes Graph returns in
// a list that selects keyCredentials.
func seedTenant(fake *fakegraph.Server, n int, apps, sps bool) {
	end := time.Now().AddDate(0, 6, 0)
	cert := make([]byte, 1024)
	for i := range n {
		appID := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		app := fakegraph.Object{AppID: appID, DisplayName: fmt.Sprintf("app-%d", i),
			Passwords: []fakegraph.PasswordCredential{{SecretText: "s", Start: end.AddDate(-1, 0, 0), End: end}}}
		if i%10 == 0 {
			app.Keys = []fakegraph.KeyCredential{{Key: cert, Start: end.AddDate(-1, 0, 0), End: end}}
		}
		if apps {
			fake.PutApplication(tenant, app)
		}
		if sps {
			// Alone, the service principals carry the application's credentials, so that both
			// lists alone read as much.
			sp := fakegraph.Object{AppID: appID, DisplayName: app.DisplayName}
			if !apps {
				sp.Passwords, sp.Keys = app.Passwords, app.Keys
			}
			fake.PutServicePrincipal(tenant, sp)
		}
	}
}

// BenchmarkManagerTenantScan runs the operator's binary with one tenantScan watch of a tenant of N
// applications, each with its service principal, and reports how long the watch takes from its
// creation to its status, and the process's peak RSS through the scan and then through a scrape
// of its metrics, which hold a series per credential. A minute on, past the least gap between
// two checks, the watch is asked to check now: that second scan is timed too, from the asking to
// its status, with the peak RSS during it (the kernel's high-water mark reset before it). It runs with delta reads off (every scan lists the tenant) and on (the second scan reads
// Graph's changes to the tenant held in memory).
func BenchmarkManagerTenantScan(b *testing.B) {
	bin := buildOperator(b)
	for _, n := range scanSizes {
		for _, reads := range []string{"lists", "delta"} {
			b.Run(fmt.Sprintf("apps=%d/reads=%s", n, reads), func(b *testing.B) {
				for range b.N {
					managerScan(b, bin, n, fmt.Sprintf("--delta-reads=%v", reads == "delta"))
				}
			})
		}
	}
}

func managerScan(b *testing.B, bin string, n int, flags ...string) {
	b.StopTimer()
	cp := startControlPlane(b)
	azure, err := fakeazure.Start(cp.work, tenant, client, secret, func(string, string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(azure.Close)
	seedTenant(azure.Graph, n, true, true)
	azure.Graph.SetBudget(budget.SmallTenant, clock.RealClock{})
	azure.Graph.SetLatency(latency)

	ctx := context.Background()
	const ns = "bench"
	if err := cp.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	createIdentity(b, cp.k8s, ns)
	metricsAddr := freeAddr(b)
	op := startOperator(b, bin, cp.kubeconfig, metricsAddr, azure, ns, flags...)
	waitServing(b, op, metricsAddr)
	idle := op.memory(b)

	w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns},
		Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: tenant}}}}
	b.StartTimer()
	began := time.Now()
	if err := cp.k8s.Create(ctx, w); err != nil {
		b.Fatal(err)
	}
	awaitScan(b, cp, op, w, time.Time{})
	took := time.Since(began)
	b.StopTimer()
	if got := w.Status.TenantScan; int(got.Applications) != n || int(got.Credentials) != n+n/10 {
		b.Fatalf("the watch scanned %+v, want %d applications and %d credentials", got, n, n+n/10)
	}
	scanned := op.memory(b)
	// Metrics follow the operator's cache, which sees the status write a moment after the harness.
	series := 0
	for range 300 {
		if series = scrapeSeries(b, metricsAddr, "credwatch_credential_expiration_timestamp_seconds"); series == n+n/10 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	scraped := op.memory(b)
	if series != n+n/10 {
		b.Fatalf("the scrapes held %d credential series, want %d", series, n+n/10)
	}
	time.Sleep(time.Until(began.Add(took + policy.EarlyCheckGap + time.Second)))
	// The second scan's peak is its own: the first scan's listing is not what a steady state costs.
	op.resetPeak(b)
	azure.Graph.ResetRequests()
	first := w.Status.LastCheckTime.Time
	w.Annotations = map[string]string{v1alpha1.CheckAnnotation: "again"}
	asked := time.Now()
	if err := cp.k8s.Update(ctx, w); err != nil {
		b.Fatal(err)
	}
	awaitScan(b, cp, op, w, first)
	again := time.Since(asked)
	requests := len(azure.Graph.Requests())
	second := op.memory(b)
	op.stop(b)
	b.ReportMetric(took.Seconds(), "scan-s")
	b.ReportMetric(float64(idle.peak-idle.file)/(1<<20), "idle-rss-MiB")
	b.ReportMetric(float64(scanned.peak-scanned.file)/(1<<20), "peak-rss-MiB")
	b.ReportMetric(float64(scraped.peak-scraped.file)/(1<<20), "peak-rss-scraped-MiB")
	b.ReportMetric(float64(scraped.file)/(1<<20), "rss-file-MiB")
	b.ReportMetric(again.Seconds(), "second-scan-s")
	b.ReportMetric(float64(requests), "second-requests")
	b.ReportMetric(float64(second.peak-second.file)/(1<<20), "peak-rss-second-MiB")
}

// awaitScan waits until w's status holds a scan checked after after, and reads it into w.
func awaitScan(b *testing.B, cp controlPlane, op *operator, w *v1alpha1.CredentialWatch, after time.Time) {
	b.Helper()
	began := time.Now()
	for w.Status.TenantScan == nil || w.Status.LastCheckTime == nil || !w.Status.LastCheckTime.After(after) {
		select {
		case err := <-op.exited:
			b.Fatalf("the operator exited during the scan: %v\n%s", err, lastLines(op.logs.String(), 40))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Since(began) > 10*time.Minute {
			b.Fatalf("the scan did not end within ten minutes:\n%s", lastLines(op.logs.String(), 40))
		}
		if err := cp.k8s.Get(context.Background(), crclient.ObjectKeyFromObject(w), w); err != nil {
			b.Fatal(err)
		}
	}
}

// waitServing waits until the operator answers on its metrics address.
func waitServing(b *testing.B, op *operator, metricsAddr string) {
	for range 300 {
		if resp, err := http.Get("http://" + metricsAddr + "/metrics"); err == nil {
			_ = resp.Body.Close()
			return
		}
		select {
		case err := <-op.exited:
			b.Fatalf("the operator exited: %v\n%s", err, lastLines(op.logs.String(), 40))
		case <-time.After(100 * time.Millisecond):
		}
	}
	b.Fatal("the operator did not serve metrics within 30 s")
}

// scrapeSeries scrapes the operator's metrics once and counts the series of the metric name.
func scrapeSeries(b *testing.B, metricsAddr, name string) int {
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), name+"{") {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return n
}
