package controllers

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/internal/graph/msgraph"
	"github.com/credwatch/credwatch/internal/graph/planner"
	cwmetrics "github.com/credwatch/credwatch/internal/metrics"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/aksfleet"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
)

// TestOperatorWatchesAServicePrincipal runs the controller as the manager does, with the real
// clock, events sent to the API server, and metrics: a person applies a watch and reads it back.
func TestOperatorWatchesAServicePrincipal(t *testing.T) {
	needsAPIServer(t)
	ns := newNamespace(t)
	logs := &logBuffer{}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 logs.logger(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	registry := prometheus.NewRegistry()
	scanStore, fleetStore := tenantscan.NewStore(), aksfleet.NewStore()
	// What the operator serves at /metrics: the registry's series and the watches'.
	cached, err := cwmetrics.CachedWatches(context.Background(), mgr.GetCache())
	if err != nil {
		t.Fatal(err)
	}
	scrapes := cwmetrics.NewWatches(cached, scanStore, fleetStore, clock.RealClock{}).Handler(promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	graphRequests, err := cwmetrics.NewGraphRequests(registry)
	if err != nil {
		t.Fatal(err)
	}
	counted, err := msgraph.New(fake.URL(), graphRequests.RoundTripper(fake.Client().Transport))
	if err != nil {
		t.Fatal(err)
	}
	if err := (&CredentialWatchReconciler{
		Client:          mgr.GetClient(),
		SecretReader:    mgr.GetAPIReader(),
		DefaultIdentity: testIdentity,
		Recorder:        mgr.GetEventRecorderFor("credwatch"),
		Clock:           clock.RealClock{},
		Rand:            rand.Float64,
		Azure:           clients.New(identities, planner.NewGraph(counted, clock.RealClock{}, planWindow), nil),
		Channels:        &channels.Builder{Secrets: mgr.GetAPIReader(), Destinations: localPeers},
		Scans:           scanStore,
		Digests:         tenantscan.NewDigestStore(),
		Fleets:          fleetStore,
		// The wall clock runs here: a spec edited seconds after a check is read again soon.
		EarlyCheckGap: time.Second,
	}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })

	s := seed(t, time.Now(), 20*day, 300*day, 200*day)
	w := &v1alpha1.CredentialWatch{
		ObjectMeta: metav1.ObjectMeta{Name: "aks-prod", Namespace: ns},
		Spec: v1alpha1.CredentialWatchSpec{
			Target: v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{TenantID: tenantID, ClientID: s.appID}},
		},
	}
	if err := k8s.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(w)
	eventually(t, 30*time.Second, "the watch to become Ready", func() bool {
		_ = k8s.Get(ctx, key, w)
		return target.Condition(w, v1alpha1.ConditionReady).Status == metav1.ConditionTrue
	})
	if len(w.Status.Credentials) != 3 || w.Status.State != v1alpha1.StateWarning || w.Status.ExpiresIn != "19d" && w.Status.ExpiresIn != "20d" {
		t.Errorf("status: %d credentials, state %s, expires in %q; want 3, Warning, 20d", len(w.Status.Credentials), w.Status.State, w.Status.ExpiresIn)
	}
	if w.Status.ObservedGeneration != w.Generation || w.Status.NextCheckTime == nil ||
		w.Status.NextCheckTime.Sub(w.Status.LastCheckTime.Time) < 6*time.Hour {
		t.Errorf("observedGeneration %d of %d, next check %v after last %v: want current, 6h or more later",
			w.Status.ObservedGeneration, w.Generation, w.Status.NextCheckTime, w.Status.LastCheckTime)
	}

	var events corev1.EventList
	eventually(t, 30*time.Second, "a CredentialWarning event", func() bool {
		_ = k8s.List(ctx, &events, client.InNamespace(ns))
		for _, e := range events.Items {
			if e.Reason == "CredentialWarning" && e.InvolvedObject.Name == w.Name && e.Type == corev1.EventTypeWarning {
				return true
			}
		}
		return false
	})

	// Metrics: one expiry series per credential, with its end time; Ready; Graph requests.
	wantExpiry := map[string]float64{}
	for _, c := range w.Status.Credentials {
		wantExpiry[c.KeyID] = float64(c.EndTime.Unix())
	}
	families := gather(t, scrapes)
	expiry := families["credwatch_credential_expiration_timestamp_seconds"]
	if len(expiry) != 3 {
		t.Fatalf("expiration series = %d, want 3", len(expiry))
	}
	for _, m := range expiry {
		l := labels(m)
		if l["namespace"] != ns || l["name"] != "aks-prod" || l["client_id"] != s.appID || m.GetGauge().GetValue() != wantExpiry[l["key_id"]] {
			t.Errorf("series %v = %v, want %v", l, m.GetGauge().GetValue(), wantExpiry[l["key_id"]])
		}
		if l["key_id"] == s.spSecretKey && (l["source"] != "ServicePrincipal" || l["type"] != "Password") {
			t.Errorf("series %v: want source ServicePrincipal, type Password", l)
		}
	}
	for _, m := range families["credwatch_watch_ready_status"] {
		if l := labels(m); (l["condition"] == "True") != (m.GetGauge().GetValue() == 1) {
			t.Errorf("ready series %v = %v", l, m.GetGauge().GetValue())
		}
	}
	ok := 0.0
	for _, m := range families["credwatch_graph_requests_total"] {
		if labels(m)["code"] == "200" {
			ok = m.GetCounter().GetValue()
		}
	}
	if ok < 1 {
		t.Errorf("credwatch_graph_requests_total{code=200} = %v, want at least the $batch that read the watch", ok)
	}

	// Nothing secret anywhere a person, a log shipper or Prometheus can see.
	status, _ := json.Marshal(w)
	eventText, _ := json.Marshal(events)
	metricText, _ := json.Marshal(families)
	for _, secret := range append(fake.SecretTexts(), operatorSecret) {
		for where, text := range map[string]string{"logs": logs.String(), "events": string(eventText), "status": string(status), "metrics": string(metricText)} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contain a secret value (%s...)", where, secret[:3])
			}
		}
	}

	// A credential removed in Azure loses its series once the watch has seen it go: editing the
	// spec makes the operator read Graph again at once.
	sp, _ := fake.ServicePrincipal(tenantID, s.appID)
	sp.Passwords = nil
	fake.PutServicePrincipal(tenantID, sp)
	// The operator writes status meanwhile; a person's kubectl edit retries the same way.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, key, w); err != nil {
			return err
		}
		w.Spec.Thresholds.Warning = "45d"
		return k8s.Update(ctx, w)
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the removed secret's series to disappear", func() bool {
		for _, m := range gather(t, scrapes)["credwatch_credential_expiration_timestamp_seconds"] {
			if labels(m)["key_id"] == s.spSecretKey {
				return false
			}
		}
		return true
	})

	// Deleting the watch removes its series.
	if err := k8s.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the watch's series to disappear", func() bool {
		f := gather(t, scrapes)
		return len(f["credwatch_credential_expiration_timestamp_seconds"]) == 0 && len(f["credwatch_watch_ready_status"]) == 0
	})
}

func gather(t *testing.T, scrapes http.Handler) map[string][]*dto.Metric {
	t.Helper()
	rec := httptest.NewRecorder()
	scrapes.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, cwmetrics.MetricsPath, nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("scraping metrics (%d): %v", rec.Code, err)
	}
	out := map[string][]*dto.Metric{}
	for name, mf := range mfs {
		out[name] = mf.GetMetric()
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}
