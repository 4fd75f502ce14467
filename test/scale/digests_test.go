package scale

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/graph/budget"
	"github.com/credwatch/credwatch/test/fakeazure"
	"github.com/credwatch/credwatch/test/fakegraph"
	"github.com/credwatch/credwatch/test/mailpit"
)

// BenchmarkOwnerDigests runs the operator's binary with one tenantScan watch whose owner digests
// go to a tenant of N applications (100,000 unless CREDWATCH_BENCH_DIGEST_APPS says otherwise),
// each with its service principal, owned five to an owner (N/5 owners). Two applications in five
// have a secret within the digests' 30 days, so every owner gets a digest of two. Graph enforces
// a small tenant's budget 30 ms away; the relay is mailpit; the pace is off, as a relay that
// takes what it is given (at the default 30 a minute, N/5 digests take N/150 minutes, however
// fast the rest). It reports the time from the period's start until every digest went, what it
// cost Graph, and the ledger's size.
func BenchmarkOwnerDigests(b *testing.B) {
	n := 100000
	if v := os.Getenv("CREDWATCH_BENCH_DIGEST_APPS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	bin := buildOperator(b)
	b.Run(fmt.Sprintf("apps=%d,owners=%d", n, n/5), func(b *testing.B) {
		for range b.N {
			ownerDigests(b, bin, n)
		}
	})
}

func ownerDigests(b *testing.B, bin string, n int) {
	b.StopTimer()
	cp := startControlPlane(b)
	relay, err := mailpit.Run(b.TempDir(), "--max", "100")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(relay.Stop)
	azure, err := fakeazure.Start(cp.work, tenant, client, secret, func(string, string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(azure.Close)
	seedOwnedTenant(azure.Graph, n)
	azure.Graph.SetBudget(budget.SmallTenant, clock.RealClock{})
	azure.Graph.SetLatency(latency)

	ctx := context.Background()
	const ns = "bench"
	if err := cp.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	createIdentity(b, cp.k8s, ns)
	metricsAddr := freeAddr(b)
	op := startOperator(b, bin, cp.kubeconfig, metricsAddr, azure, ns, "--digest-messages-per-minute=0", "--alert-destinations-allow=127.0.0.0/8")
	waitServing(b, op, metricsAddr)

	// Daily, two minutes from now: the scan ends well before, and the first period begins then.
	at := time.Now().UTC().Add(2 * time.Minute).Truncate(time.Minute)
	w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns},
		Spec: v1alpha1.CredentialWatchSpec{CheckInterval: "7d", Target: v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: tenant,
			OwnerDigests: &v1alpha1.OwnerDigests{
				Email:    v1alpha1.DigestEmail{SMTP: v1alpha1.SMTPServer{Host: "127.0.0.1", Port: int32(relay.SMTPPort), TLS: v1alpha1.SMTPNoTLS, From: "credwatch@contoso.example"}},
				Schedule: v1alpha1.DigestSchedule{Every: v1alpha1.EveryDay, Time: at.Format("15:04")},
			}}}}}
	if err := cp.k8s.Create(ctx, w); err != nil {
		b.Fatal(err)
	}
	waitDigests(b, cp, op, w, func(st *v1alpha1.DigestsStatus) bool { return st != nil && st.NextPeriod.Time.Equal(at) }, time.Until(at)+10*time.Minute)
	azure.Graph.ResetRequests()
	spent := azure.Graph.Spent()
	time.Sleep(time.Until(at))
	b.StartTimer()
	waitDigests(b, cp, op, w, func(st *v1alpha1.DigestsStatus) bool {
		return st != nil && st.Period.Time.Equal(at) && st.Recipients > 0 && st.Sent == st.Recipients
	}, 3*time.Hour)
	took := time.Since(at)
	b.StopTimer()
	peak := op.memory(b)
	op.stop(b)

	st := w.Status.OwnerDigests
	if int(st.Recipients) != n/5 {
		b.Fatalf("%d recipients, want %d", st.Recipients, n/5)
	}
	var batches, ownerReads int
	for _, r := range azure.Graph.Requests() {
		switch {
		case r.Batched && strings.HasSuffix(r.Path, "/owners"):
			ownerReads++
		case !r.Batched:
			batches++
		}
	}
	shards, bytes, largest := ledgerSize(b, cp.k8s, ns)
	b.ReportMetric(took.Seconds(), "digests-s")
	b.ReportMetric(float64(st.Recipients), "digests")
	b.ReportMetric(float64(batches), "requests")
	b.ReportMetric(float64(ownerReads), "owner-reads")
	b.ReportMetric(float64(azure.Graph.Spent()-spent), "units")
	b.ReportMetric(float64(azure.Graph.Throttled()), "429s")
	b.ReportMetric(float64(shards), "ledger-shards")
	b.ReportMetric(float64(bytes), "ledger-bytes")
	b.ReportMetric(float64(largest), "ledger-largest-shard-bytes")
	b.ReportMetric(float64(peak.peak-peak.file)/(1<<20), "peak-rss-MiB")
}

// seedOwnedTenant gives the fake n applications, each with its service principal, owned five to
// an owner; two in five have a secret that ends within 30 days.
func seedOwnedTenant(fake *fakegraph.Server, n int) {
	now := time.Now()
	for i := range n {
		appID := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		end := now.Add(200 * 24 * time.Hour)
		if i%5 < 2 {
			end = now.Add(time.Duration(5+i%20) * 24 * time.Hour)
		}
		j := i / 5
		fake.PutApplication(tenant, fakegraph.Object{ID: fmt.Sprintf("%08x-0000-4000-8000-%012x", i, 1<<40+i), AppID: appID, DisplayName: fmt.Sprintf("app-%d", i),
			Passwords: []fakegraph.PasswordCredential{{SecretText: "s", Start: end.AddDate(-1, 0, 0), End: end}},
			Owners: []fakegraph.Owner{{ID: fmt.Sprintf("%08x-0000-4000-8000-%012x", j, 2<<40+j), DisplayName: fmt.Sprintf("owner %d", j),
				Mail: fmt.Sprintf("owner-%d@contoso.example", j)}}})
		fake.PutServicePrincipal(tenant, fakegraph.Object{AppID: appID, DisplayName: fmt.Sprintf("app-%d", i)})
	}
}

// waitDigests polls the watch until done says its digests' status is there, or fails after within.
func waitDigests(b *testing.B, cp controlPlane, op *operator, w *v1alpha1.CredentialWatch, done func(*v1alpha1.DigestsStatus) bool, within time.Duration) {
	began := time.Now()
	for {
		if err := cp.k8s.Get(context.Background(), crclient.ObjectKeyFromObject(w), w); err != nil {
			b.Fatal(err)
		}
		if done(w.Status.OwnerDigests) {
			return
		}
		if time.Since(began) > within {
			b.Fatalf("the digests' status is %+v after %v:\n%s", w.Status.OwnerDigests, within, lastLines(op.logs.String(), 40))
		}
		select {
		case err := <-op.exited:
			b.Fatalf("the operator exited: %v\n%s", err, lastLines(op.logs.String(), 40))
		case <-time.After(time.Second):
		}
	}
}

// ledgerSize is the number of the ledger's ConfigMaps in ns, the bytes of their keys and values,
// and the largest's.
func ledgerSize(b *testing.B, k8s crclient.Client, ns string) (shards, bytes, largest int) {
	var cms corev1.ConfigMapList
	if err := k8s.List(context.Background(), &cms, crclient.InNamespace(ns), crclient.HasLabels{"credwatch.dev/ledger-of"}); err != nil {
		b.Fatal(err)
	}
	for _, cm := range cms.Items {
		size := 0
		for k, v := range cm.Data {
			size += len(k) + len(v)
		}
		shards++
		bytes += size
		largest = max(largest, size)
	}
	return shards, bytes, largest
}
