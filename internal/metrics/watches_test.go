package metrics

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
)

func watch(name string, creds []v1alpha1.Credential, ready metav1.ConditionStatus, failures int32) *v1alpha1.CredentialWatch {
	w := &v1alpha1.CredentialWatch{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "platform"},
		Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{
			TenantID: "t", ClientID: "c-" + name}}},
		Status: v1alpha1.CredentialWatchStatus{Credentials: creds, ConsecutiveFailures: failures},
	}
	if ready != "" {
		w.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: ready}}
		last := metav1.NewTime(time.Unix(1_800_000_000, 0))
		w.Status.LastCheckTime = &last
	}
	return w
}

func drifting(w *v1alpha1.CredentialWatch) *v1alpha1.CredentialWatch {
	w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionSigningKeyDrift, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCanaryRejected})
	return w
}

func rotated(w *v1alpha1.CredentialWatch) *v1alpha1.CredentialWatch {
	w.Status.State = v1alpha1.StateWarning
	w.Status.LastRotation = &v1alpha1.LastRotation{Time: metav1.NewTime(time.Unix(1_700_000_000, 0)), KeyID: "k0"}
	w.Status.Rotation = &v1alpha1.RotationStatus{Step: v1alpha1.StepRetiring, Failures: 2}
	return w
}

func withFindings(w *v1alpha1.CredentialWatch) *v1alpha1.CredentialWatch {
	w.Status.Findings = &v1alpha1.FindingsStatus{LongLived: 2, ServicePrincipalSecret: 1}
	return w
}

func TestWatches(t *testing.T) {
	creds := []v1alpha1.Credential{
		{KeyID: "k1", Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication, EndTime: metav1.NewTime(time.Unix(1_900_000_000, 0))},
		{KeyID: "k2", Type: v1alpha1.CredentialTypeCertificate, Source: v1alpha1.SourceServicePrincipal, EndTime: metav1.NewTime(time.Unix(2_000_000_000, 0))},
	}
	c := listOf(
		withFindings(rotated(watch("ok", creds, metav1.ConditionTrue, 0))),
		watch("new", nil, "", 0),
		drifting(watch("failing", nil, metav1.ConditionFalse, 3)),
	)

	want := `
# HELP credwatch_credential_expiration_timestamp_seconds The date after which the credential expires, as a Unix timestamp.
# TYPE credwatch_credential_expiration_timestamp_seconds gauge
credwatch_credential_expiration_timestamp_seconds{client_id="c-ok",key_id="k1",name="ok",namespace="platform",source="Application",type="Password"} 1.9e+09
credwatch_credential_expiration_timestamp_seconds{client_id="c-ok",key_id="k2",name="ok",namespace="platform",source="ServicePrincipal",type="Certificate"} 2e+09
# HELP credwatch_credential_policy_findings Credentials that break the watch's hygiene policy (spec.hygiene), by kind (StartAfterEnd, NeverExpires, ServicePrincipalSecret, ManySecrets, LongLived, NotYetValid); absent when none does.
# TYPE credwatch_credential_policy_findings gauge
credwatch_credential_policy_findings{client_id="c-ok",kind="LongLived",name="ok",namespace="platform"} 2
credwatch_credential_policy_findings{client_id="c-ok",kind="ServicePrincipalSecret",name="ok",namespace="platform"} 1
# HELP credwatch_watch_consecutive_check_failures Failed checks of the watch since its last successful one; absent while checks succeed.
# TYPE credwatch_watch_consecutive_check_failures gauge
credwatch_watch_consecutive_check_failures{client_id="c-failing",name="failing",namespace="platform"} 3
# HELP credwatch_watch_last_check_timestamp_seconds When the watch last checked successfully (Microsoft Graph, or the API servers of a serviceAccountIssuer target), as a Unix timestamp.
# TYPE credwatch_watch_last_check_timestamp_seconds gauge
credwatch_watch_last_check_timestamp_seconds{client_id="c-failing",name="failing",namespace="platform"} 1.8e+09
credwatch_watch_last_check_timestamp_seconds{client_id="c-ok",name="ok",namespace="platform"} 1.8e+09
# HELP credwatch_watch_last_rotation_timestamp_seconds When the watch last completed a rotation of its secret, as a Unix timestamp.
# TYPE credwatch_watch_last_rotation_timestamp_seconds gauge
credwatch_watch_last_rotation_timestamp_seconds{client_id="c-ok",name="ok",namespace="platform"} 1.7e+09
# HELP credwatch_watch_rotation_in_progress 1 while a rotation is in progress, labelled with its step; absent otherwise.
# TYPE credwatch_watch_rotation_in_progress gauge
credwatch_watch_rotation_in_progress{client_id="c-ok",name="ok",namespace="platform",step="Retiring"} 1
# HELP credwatch_watch_rotation_step_failures Failed attempts at the current step of the rotation in progress, labelled with the step; absent when no rotation is in progress.
# TYPE credwatch_watch_rotation_step_failures gauge
credwatch_watch_rotation_step_failures{client_id="c-ok",name="ok",namespace="platform",step="Retiring"} 2
# HELP credwatch_watch_signing_key_drift 1 while the API servers disagree on the service-account token keys, labelled with how (SigningKeyNotShared, CanaryRejected, IssuersDiffer, KeyRemovedEarly); absent otherwise.
# TYPE credwatch_watch_signing_key_drift gauge
credwatch_watch_signing_key_drift{name="failing",namespace="platform",reason="CanaryRejected"} 1
# HELP credwatch_watch_state The worst state of the watch's credentials: 1, labelled with the state (Valid, Warning, Critical, Expired); absent before the first check.
# TYPE credwatch_watch_state gauge
credwatch_watch_state{client_id="c-ok",name="ok",namespace="platform",state="Warning"} 1
# HELP credwatch_watch_ready_status The Ready condition of a CredentialWatch: 1, labelled with the condition's status (True, False, Unknown).
# TYPE credwatch_watch_ready_status gauge
credwatch_watch_ready_status{client_id="c-failing",condition="False",name="failing",namespace="platform"} 1
credwatch_watch_ready_status{client_id="c-new",condition="Unknown",name="new",namespace="platform"} 1
credwatch_watch_ready_status{client_id="c-ok",condition="True",name="ok",namespace="platform"} 1
`
	if got := scrape(t, NewWatches(c, tenantscan.NewStore(), nil, testClock), emptyRegistry()); normalize(t, got) != normalize(t, want) {
		t.Errorf("scrape:\n%s\nwant:\n%s", got, want)
	}
}

func TestWatchesReportEveryCredentialOfATenantScan(t *testing.T) {
	scan := func(name string, listed ...v1alpha1.Credential) *v1alpha1.CredentialWatch {
		return &v1alpha1.CredentialWatch{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "platform"},
			Spec:       v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "t"}}},
			Status:     v1alpha1.CredentialWatchStatus{Credentials: listed},
		}
	}
	cred := func(app, key string, end int64) v1alpha1.Credential {
		return v1alpha1.Credential{AppID: app, KeyID: key, Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication,
			EndTime: metav1.NewTime(time.Unix(end, 0))}
	}
	expiring := cred("app-1", "k1", 1_800_000_000)
	c := listOf(
		scan("scanned", expiring),
		// Scanned by another replica, the leader: only its status is known here.
		scan("elsewhere", cred("app-3", "k3", 1_700_000_000)),
	)
	store := tenantscan.NewStore()
	store.Put(types.NamespacedName{Namespace: "platform", Name: "scanned"}, tenantscan.Found{Credentials: []v1alpha1.Credential{expiring, cred("app-2", "k2", 1_900_000_000)}})

	want := `
# HELP credwatch_credential_expiration_timestamp_seconds The date after which the credential expires, as a Unix timestamp.
# TYPE credwatch_credential_expiration_timestamp_seconds gauge
credwatch_credential_expiration_timestamp_seconds{client_id="app-1",key_id="k1",name="scanned",namespace="platform",source="Application",type="Password"} 1.8e+09
credwatch_credential_expiration_timestamp_seconds{client_id="app-2",key_id="k2",name="scanned",namespace="platform",source="Application",type="Password"} 1.9e+09
credwatch_credential_expiration_timestamp_seconds{client_id="app-3",key_id="k3",name="elsewhere",namespace="platform",source="Application",type="Password"} 1.7e+09
`
	got := scrape(t, NewWatches(c, store, nil, testClock), emptyRegistry())
	if normalize(t, got, "credwatch_credential_expiration_timestamp_seconds") != normalize(t, want) {
		t.Errorf("scrape:\n%s\nwant:\n%s", got, want)
	}
}

// TestWatchesMarkReplacedCredentials: a secret renewed with --append is marked, on a watch and per
// application of a tenant scan, once its renewal has started, so that alerts can leave it out. A
// cluster's and a rotating watch's only by the secret their rotation put in use: a cluster moves
// onto a secret only when reset.
func TestWatchesMarkReplacedCredentials(t *testing.T) {
	secret := func(app, key string, start, end int64) v1alpha1.Credential {
		s := metav1.NewTime(time.Unix(start, 0))
		return v1alpha1.Credential{AppID: app, KeyID: key, Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication,
			StartTime: &s, EndTime: metav1.NewTime(time.Unix(end, 0))}
	}
	sp := watch("sp", []v1alpha1.Credential{secret("", "old", 1_700_000_000, 1_800_000_000), secret("", "new", 1_790_000_000, 1_830_000_000)}, metav1.ConditionTrue, 0)
	// Renewed by a secret that starts only after the scrape: not yet.
	early := watch("early", []v1alpha1.Credential{secret("", "old", 1_700_000_000, 1_850_000_000), secret("", "new", 1_810_000_000, 1_900_000_000)}, metav1.ConditionTrue, 0)
	cluster := func(name string, last *v1alpha1.LastRotation) *v1alpha1.CredentialWatch {
		w := watch(name, []v1alpha1.Credential{secret("", "old", 1_700_000_000, 1_800_000_000), secret("", "new", 1_790_000_000, 1_830_000_000)}, metav1.ConditionTrue, 0)
		w.Spec.Target = v1alpha1.Target{AKSCluster: &v1alpha1.AKSClusterTarget{TenantID: "t", SubscriptionID: "s", ResourceGroup: "rg", Name: name}}
		w.Status.LastRotation = last
		return w
	}
	byHand := cluster("by-hand", nil)
	rotated := cluster("rotated", &v1alpha1.LastRotation{KeyID: "new"})
	scan := &v1alpha1.CredentialWatch{
		ObjectMeta: metav1.ObjectMeta{Name: "scan", Namespace: "platform"},
		Spec:       v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "t"}}},
	}
	store := tenantscan.NewStore()
	store.Put(types.NamespacedName{Namespace: "platform", Name: "scan"}, tenantscan.Found{Credentials: []v1alpha1.Credential{
		secret("app-1", "a-old", 1_700_000_000, 1_800_000_000), secret("app-1", "a-new", 1_790_000_000, 1_830_000_000),
		// Another application's later secret renews nothing of app-1.
		secret("app-2", "b", 1_795_000_000, 1_900_000_000),
	}})
	want := `
# HELP credwatch_credential_superseded 1 for a credential a newer one of its kind on the same object has replaced: started and ending later (as ` + "`az ad app credential reset --append`" + ` leaves the old one beside it), and, for an aksCluster watch or one that rotates, put in use by credwatch's rotation; absent otherwise. Same labels as credwatch_credential_expiration_timestamp_seconds.
# TYPE credwatch_credential_superseded gauge
credwatch_credential_superseded{client_id="app-1",key_id="a-old",name="scan",namespace="platform",source="Application",type="Password"} 1
credwatch_credential_superseded{client_id="",key_id="old",name="rotated",namespace="platform",source="Application",type="Password"} 1
credwatch_credential_superseded{client_id="c-sp",key_id="old",name="sp",namespace="platform",source="Application",type="Password"} 1
`
	got := scrape(t, NewWatches(listOf(sp, early, byHand, rotated, scan), store, nil, testClock), emptyRegistry())
	if normalize(t, got, "credwatch_credential_superseded") != normalize(t, want) {
		t.Errorf("scrape:\n%s\nwant:\n%s", got, want)
	}
	if got := scrape(t, NewWatches(listOf(watch("one", []v1alpha1.Credential{secret("", "k", 1, 2)}, metav1.ConditionTrue, 0)), tenantscan.NewStore(), nil, testClock), emptyRegistry()); strings.Contains(got, "superseded") {
		t.Errorf("a watch with nothing renewed shows the family:\n%s", got)
	}
}

// TestWatchesTellSignIns: a credential whose last sign-in is known has its series; the family is
// absent when no watch knows one. Whether each is in use shows for a watch whose sign-ins are
// known, not for one that does not read them.
func TestWatchesTellSignIns(t *testing.T) {
	at := metav1.NewTime(time.Unix(1_799_000_000, 0))
	creds := []v1alpha1.Credential{
		{KeyID: "used", Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceServicePrincipal, EndTime: metav1.NewTime(time.Unix(1_800_000_000, 0)), LastSignIn: &at, InUse: true},
		{KeyID: "idle", Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication, EndTime: metav1.NewTime(time.Unix(1_800_000_000, 0))},
	}
	want := `
# HELP credwatch_credential_last_sign_in_timestamp_seconds When the credential last signed in, as Graph's sign-in activity report has it (spec.usage.signIns; hours behind), as a Unix timestamp; absent when unknown. Same labels as credwatch_credential_expiration_timestamp_seconds.
# TYPE credwatch_credential_last_sign_in_timestamp_seconds gauge
credwatch_credential_last_sign_in_timestamp_seconds{client_id="c-sp",key_id="used",name="sp",namespace="platform",source="ServicePrincipal",type="Password"} 1.799e+09
`
	got := scrape(t, NewWatches(listOf(watch("sp", creds, metav1.ConditionTrue, 0)), tenantscan.NewStore(), nil, testClock), emptyRegistry())
	if normalize(t, got, "credwatch_credential_last_sign_in_timestamp_seconds") != normalize(t, want) {
		t.Errorf("scrape:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(got, "credwatch_credential_in_use") {
		t.Errorf("a watch that does not read sign-ins tells what is in use:\n%s", got)
	}
	reading := watch("sp", creds, metav1.ConditionTrue, 0)
	reading.Spec.Usage = &v1alpha1.Usage{SignIns: true}
	reading.Status.SignInsReadTime = &at
	reading.Status.Conditions = append(reading.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionSignInsRead, Status: metav1.ConditionTrue})
	want = `
# HELP credwatch_credential_in_use 1 for a credential that signed in within the watch's usage.activeWithin, 0 for one that did not (spec.usage.signIns); absent when the watch's sign-ins are not known. Same labels as credwatch_credential_expiration_timestamp_seconds.
# TYPE credwatch_credential_in_use gauge
credwatch_credential_in_use{client_id="c-sp",key_id="used",name="sp",namespace="platform",source="ServicePrincipal",type="Password"} 1
credwatch_credential_in_use{client_id="c-sp",key_id="idle",name="sp",namespace="platform",source="Application",type="Password"} 0
`
	got = scrape(t, NewWatches(listOf(reading), tenantscan.NewStore(), nil, testClock), emptyRegistry())
	if normalize(t, got, "credwatch_credential_in_use") != normalize(t, want) {
		t.Errorf("scrape:\n%s\nwant:\n%s", got, want)
	}
	if got := scrape(t, NewWatches(listOf(watch("none", creds[1:], metav1.ConditionTrue, 0)), tenantscan.NewStore(), nil, testClock), emptyRegistry()); strings.Contains(got, "last_sign_in") {
		t.Errorf("no sign-in known, yet the family shows:\n%s", got)
	}
}

// TestWatchesTellBlockedRotations: a rotation that waits for a person shows, with the reason; one
// that merely waits (a window, a grace period) does not.
func TestWatchesTellBlockedRotations(t *testing.T) {
	rotating := func(name string, status metav1.ConditionStatus, reason string) *v1alpha1.CredentialWatch {
		w := watch(name, nil, metav1.ConditionTrue, 0)
		w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionRotating, Status: status, Reason: reason})
		return w
	}
	no := metav1.ConditionFalse
	c := listOf(rotating("held", no, v1alpha1.ReasonResetNeedsConfirmation), rotating("blocked", no, v1alpha1.ReasonRotationBlocked),
		rotating("moved", no, v1alpha1.ReasonRotationTargetChanged), rotating("refused", no, v1alpha1.ReasonIdentityNotAllowed),
		// Finishing on its pinned cluster though the spec changed: rotating, not waiting.
		rotating("finishing", metav1.ConditionTrue, v1alpha1.ReasonRotationTargetChanged),
		rotating("idle", no, v1alpha1.ReasonIdle), rotating("planned", no, v1alpha1.ReasonDryRun), rotating("aborted", no, v1alpha1.ReasonRotationAborted),
		rotating("retiring", metav1.ConditionTrue, string(v1alpha1.StepRetiring)))
	want := `
# HELP credwatch_watch_rotation_blocked 1 while the watch's rotation cannot go on until a person acts (Rotating is False: blocked, held for confirmation, refused by its identity, its target changed, or left in DryRun), labelled with the condition's reason; absent while it rotates, is idle, only plans, or was aborted.
# TYPE credwatch_watch_rotation_blocked gauge
credwatch_watch_rotation_blocked{client_id="c-blocked",name="blocked",namespace="platform",reason="Blocked"} 1
credwatch_watch_rotation_blocked{client_id="c-held",name="held",namespace="platform",reason="ResetNeedsConfirmation"} 1
credwatch_watch_rotation_blocked{client_id="c-moved",name="moved",namespace="platform",reason="RotationTargetChanged"} 1
credwatch_watch_rotation_blocked{client_id="c-refused",name="refused",namespace="platform",reason="IdentityNotAllowed"} 1
`
	got := scrape(t, NewWatches(c, tenantscan.NewStore(), nil, testClock), emptyRegistry())
	if normalize(t, got, "credwatch_watch_rotation_blocked") != normalize(t, want) {
		t.Errorf("scrape:\n%s\nwant:\n%s", got, want)
	}
}

func TestHandlerAppendsTheWatchesToTheRegistrysSeries(t *testing.T) {
	// Label values come from users and from Graph: whatever they hold must survive the text format.
	odd := watch("odd", []v1alpha1.Credential{{KeyID: "k\\1\"\n", Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication,
		EndTime: metav1.NewTime(time.Unix(1_900_000_000, 0))}}, metav1.ConditionTrue, 0)
	reg := prometheus.NewRegistry()
	counter := prometheus.NewCounter(prometheus.CounterOpts{Name: "reconciles_total", Help: "Reconciles."})
	counter.Add(7)
	reg.MustRegister(counter)
	w := NewWatches(listOf(odd), tenantscan.NewStore(), nil, testClock)
	registry := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})

	// Prometheus asks for protobuf or OpenMetrics, gzipped, when it can: the answer is plain text.
	req := httptest.NewRequest(http.MethodGet, MetricsPath, nil)
	req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0")
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	w.Handler(registry).ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type = %q, want the text format", ct)
	}
	families := parse(t, rec.Body.String())
	if got := families["reconciles_total"].GetMetric()[0].GetCounter().GetValue(); got != 7 {
		t.Errorf("reconciles_total = %v, want the registry's 7", got)
	}
	var keyIDs []string
	for _, m := range families["credwatch_credential_expiration_timestamp_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "key_id" {
				keyIDs = append(keyIDs, l.GetValue())
			}
		}
	}
	if len(keyIDs) != 1 || keyIDs[0] != "k\\1\"\n" {
		t.Errorf("key_id labels = %q, want the odd key ID unchanged", keyIDs)
	}

	// Other paths the metrics server serves are the registry's alone.
	rec = httptest.NewRecorder()
	w.Handler(registry).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/other", nil))
	if _, ok := parse(t, rec.Body.String())["credwatch_watch_ready_status"]; ok {
		t.Error("a path other than /metrics carries the watches' series")
	}
}

func TestHandlerPassesFailuresOn(t *testing.T) {
	broken := http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		http.Error(rw, "collector failed", http.StatusInternalServerError)
	})
	rec := httptest.NewRecorder()
	NewWatches(listOf(), tenantscan.NewStore(), nil, testClock).Handler(broken).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, MetricsPath, nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "collector failed") {
		t.Errorf("a failing registry answered %d %q, want its 500", rec.Code, rec.Body.String())
	}

	unsynced := func() ([]*v1alpha1.CredentialWatch, error) {
		return nil, errors.New("the CredentialWatch cache has not synced yet")
	}
	rec = httptest.NewRecorder()
	NewWatches(unsynced, tenantscan.NewStore(), nil, testClock).Handler(emptyRegistry()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, MetricsPath, nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "has not synced") {
		t.Errorf("an unreadable cache answered %d %q, want 503 with the reason", rec.Code, rec.Body.String())
	}
}

func listOf(watches ...*v1alpha1.CredentialWatch) List {
	return func() ([]*v1alpha1.CredentialWatch, error) { return watches, nil }
}

// testClock is the time of the tests' scrapes: after every credential's start.
var testClock = clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))

func emptyRegistry() http.Handler {
	return promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{})
}

// scrape returns what the handler serves at /metrics.
func scrape(t *testing.T, w *Watches, registry http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	w.Handler(registry).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, MetricsPath, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body.String())
	}
	return rec.Body.String()
}

// parse reads text the way Prometheus does, failing on anything it would refuse.
func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parsing %q: %v", text, err)
	}
	return families
}

// normalize returns the named families of text (all if none is named) in a canonical form, so
// that texts are compared by their series, not their order or number formatting.
func normalize(t *testing.T, text string, names ...string) string {
	t.Helper()
	families := parse(t, text)
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(families))
	}
	var out strings.Builder
	for _, name := range names {
		mf, ok := families[name]
		if !ok {
			continue
		}
		slices.SortFunc(mf.Metric, func(a, b *dto.Metric) int { return strings.Compare(a.String(), b.String()) })
		if _, err := expfmt.MetricFamilyToText(&out, mf); err != nil {
			t.Fatal(err)
		}
	}
	return out.String()
}

// BenchmarkScrape10000 scrapes 10,000 watches of two secrets each, one renewing the other, with a
// rotation: what a scrape costs beyond writing the text (go test -bench Scrape -benchmem).
func BenchmarkScrape10000(b *testing.B) {
	start, renewal := metav1.NewTime(time.Unix(1_700_000_000, 0)), metav1.NewTime(time.Unix(1_790_000_000, 0))
	list := make([]*v1alpha1.CredentialWatch, 10_000)
	for i := range list {
		w := watch(fmt.Sprintf("w-%05d", i), []v1alpha1.Credential{
			{KeyID: "old", Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication, StartTime: &start, EndTime: metav1.NewTime(time.Unix(1_800_000_000, 0))},
			{KeyID: "new", Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication, StartTime: &renewal, EndTime: metav1.NewTime(time.Unix(1_830_000_000, 0))},
		}, metav1.ConditionTrue, 0)
		list[i] = rotated(w)
	}
	w := NewWatches(listOf(list...), tenantscan.NewStore(), nil, testClock)
	registry := emptyRegistry()
	b.ReportAllocs()
	var text int
	for b.Loop() {
		rec := httptest.NewRecorder()
		w.Handler(registry).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, MetricsPath, nil))
		text = rec.Body.Len()
	}
	b.ReportMetric(float64(text), "text-bytes/op")
}
