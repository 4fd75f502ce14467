package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/ledger"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/rotation/pacing"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
	"github.com/credwatch/credwatch/test/fakegraph"
)

const day = 24 * time.Hour

// harness drives one watch through the reconciler by hand, with a fake clock, so that days pass
// in an instant while every read and write goes to the real API server and the Graph fake.
type harness struct {
	t        *testing.T
	clock    *clocktesting.FakeClock
	recorder *record.FakeRecorder
	logs     *logBuffer
	r        *CredentialWatchReconciler
	key      types.NamespacedName
	events   []string // since the last takeEvents
	all      []string // every event, for the leak check
}

func newHarness(t *testing.T) *harness {
	h := &harness{
		t:        t,
		clock:    clocktesting.NewFakeClock(time.Now().UTC().Truncate(time.Second)),
		recorder: record.NewFakeRecorder(1000),
		logs:     &logBuffer{},
	}
	// A test that stops half-way must not leave Graph broken for the next one.
	t.Cleanup(func() {
		fake.SetUnreachable(false)
		fake.SetStalled(false)
		fake.Deny(operatorClientID, false)
		fake.Throttle(0, 0)
	})
	h.r = &CredentialWatchReconciler{
		Client:          k8s,
		SecretReader:    k8s,
		DefaultIdentity: testIdentity,
		ClusterID:       testClusterID,
		Recorder:        h.recorder,
		Clock:           h.clock,
		Rand:            func() float64 { return 0 },
		Azure:           clients.New(identities, graphAPI, nil),
		Channels:        &channels.Builder{Secrets: k8s, Destinations: localPeers},
		Scans:           tenantscan.NewStore(),
		Digests:         tenantscan.NewDigestStore(),
		CheckTimeout:    time.Second,
		Ledger:          &ledger.Store{Reader: k8s, Writer: k8s},
		Paces:           &pacing.Store{Reader: k8s, Writer: k8s, Namespace: newNamespace(t)},
	}
	return h
}

// testClusterID stands for the UID of the cluster's kube-system namespace.
const testClusterID = "6f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"

// create makes a watch of appID in a new namespace, with the spec's defaults unless edit says otherwise.
func (h *harness) create(appID string, edit func(*v1alpha1.CredentialWatchSpec)) {
	h.t.Helper()
	w := &v1alpha1.CredentialWatch{
		ObjectMeta: metav1.ObjectMeta{Name: "watch", Namespace: newNamespace(h.t)},
		Spec: v1alpha1.CredentialWatchSpec{
			Target: v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{TenantID: tenantID, ClientID: appID}},
		},
	}
	if appID == "" {
		w.Spec.Target.ServicePrincipal = nil // edit names the target
	}
	if edit != nil {
		edit(&w.Spec)
	}
	if err := k8s.Create(context.Background(), w); err != nil {
		h.t.Fatalf("creating watch: %v", err)
	}
	h.key = client.ObjectKeyFromObject(w)
}

// reconcile runs one reconcile at the fake clock's time and returns the watch as stored after it.
func (h *harness) reconcile() (*v1alpha1.CredentialWatch, ctrl.Result) {
	h.t.Helper()
	ctx := ctrl.LoggerInto(context.Background(), h.logs.logger())
	res, err := reconcileFully(ctx, h.t, h.r, h.key)
	if err != nil {
		h.t.Fatalf("reconcile: %v", err)
	}
	h.drainEvents()
	return h.get(), res
}

// reconcileFully reconciles the watch key as the controller does: once, and again when the
// answer to a planned read wakes it.
func reconcileFully(ctx context.Context, t *testing.T, r *CredentialWatchReconciler, key types.NamespacedName) (ctrl.Result, error) {
	t.Helper()
	inner := r.Azure
	p := planned{Azure: inner, woken: make(chan struct{}, 16), pending: &atomic.Int32{}}
	r.Azure = p
	defer func() { r.Azure = inner }()
	for {
		p.pending.Store(0)
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		if err != nil || p.pending.Load() == 0 {
			return res, err
		}
		select {
		case <-p.woken:
		case <-time.After(time.Minute):
			t.Fatalf("no answer woke %s", key)
		}
	}
}

// planned is Azure with each planned read's pending and waking seen by reconcileFully.
type planned struct {
	Azure
	woken   chan struct{}
	pending *atomic.Int32
}

func (p planned) Application(id azure.Identity, app graph.AppRef) (graph.AppClient, error) {
	c, err := p.Azure.Application(id, app)
	if err != nil {
		return nil, err
	}
	return plannedApp{AppClient: c, p: p}, nil
}

type plannedApp struct {
	graph.AppClient
	p planned
}

func (a plannedApp) Check(ctx context.Context, ask graph.Ask) (graph.Snapshot, error) {
	if strings.HasPrefix(ask.Asker, "aksFleet:") {
		// A fleet waits for its reads within its reconcile: reconcileFully has nothing to wait for.
		return a.AppClient.Check(ctx, ask)
	}
	wake := ask.Wake
	ask.Wake = func() { wake(); a.p.woken <- struct{}{} }
	snap, err := a.AppClient.Check(ctx, ask)
	if errors.Is(err, graph.ErrPending) {
		a.p.pending.Add(1)
	}
	return snap, err
}

func (h *harness) get() *v1alpha1.CredentialWatch {
	h.t.Helper()
	w := &v1alpha1.CredentialWatch{}
	if err := k8s.Get(context.Background(), h.key, w); err != nil {
		h.t.Fatalf("getting watch: %v", err)
	}
	return w
}

func (h *harness) drainEvents() {
	for {
		select {
		case e := <-h.recorder.Events:
			h.events = append(h.events, e)
			h.all = append(h.all, e)
		default:
			return
		}
	}
}

// takeEvents returns the events raised since the last call.
func (h *harness) takeEvents() []string {
	e := h.events
	h.events = nil
	return e
}

func (h *harness) step(d time.Duration) { h.clock.Step(d) }

func assertCondition(t *testing.T, w *v1alpha1.CredentialWatch, condType string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := target.Condition(w, condType)
	if c.Status != status || c.Reason != reason {
		t.Errorf("condition %s = %s/%s (%q), want %s/%s", condType, c.Status, c.Reason, c.Message, status, reason)
	}
	if c.ObservedGeneration != w.Generation {
		t.Errorf("condition %s observedGeneration = %d, want %d", condType, c.ObservedGeneration, w.Generation)
	}
}

func assertEvents(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("events = %q, want %d events starting %q", got, len(want), want)
		return
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("event %d = %q, want it to start %q", i, got[i], want[i])
		}
	}
}

// seed puts an application and its service principal into the fake, with one client secret on
// each and a certificate on the application, ending after the given durations from now.
type seeded struct {
	appID, appSecretKey, spSecretKey, certKey string
	appSecret, spSecret                       string
}

func seed(t *testing.T, now time.Time, appSecretLeft, spSecretLeft, certLeft time.Duration) seeded {
	t.Helper()
	s := seeded{
		appID:        uuid.NewString(),
		appSecretKey: uuid.NewString(),
		spSecretKey:  uuid.NewString(),
		certKey:      uuid.NewString(),
		appSecret:    "aPp~" + strings.ReplaceAll(uuid.NewString(), "-", ""),
		spSecret:     "sP8~" + strings.ReplaceAll(uuid.NewString(), "-", ""),
	}
	start := now.Add(-300 * day)
	// Graph's times carry fractions of a second; status keeps whole seconds.
	now = now.Add(473 * time.Millisecond)
	fake.PutApplication(tenantID, fakegraph.Object{
		ID: uuid.NewString(), AppID: s.appID, DisplayName: "aks-prod-sp",
		Passwords: []fakegraph.PasswordCredential{{KeyID: s.appSecretKey, DisplayName: "rbac", Hint: s.appSecret[:3], SecretText: s.appSecret, Start: start, End: now.Add(appSecretLeft)}},
		Keys:      []fakegraph.KeyCredential{{KeyID: s.certKey, DisplayName: "CN=aks-prod", Type: "AsymmetricX509Cert", Usage: "Verify", Start: start, End: now.Add(certLeft)}},
	})
	fake.PutServicePrincipal(tenantID, fakegraph.Object{
		ID: uuid.NewString(), AppID: s.appID, DisplayName: "aks-prod-sp",
		Passwords: []fakegraph.PasswordCredential{{KeyID: s.spSecretKey, DisplayName: "reset by az", Hint: s.spSecret[:3], SecretText: s.spSecret, Start: start, End: now.Add(spSecretLeft)}},
	})
	return s
}

func TestThresholdsMoveStateAsTimePasses(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	end := t0.Add(40*day + 30*time.Minute)
	s := seed(t, t0, end.Sub(t0), 400*day, 200*day)
	h.create(s.appID, nil)

	w, res := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	assertCondition(t, w, v1alpha1.ConditionExpiring, metav1.ConditionFalse, v1alpha1.ReasonNoneExpiring)
	assertCondition(t, w, v1alpha1.ConditionExpired, metav1.ConditionFalse, v1alpha1.ReasonNoneExpired)
	if got := len(w.Status.Credentials); got != 3 {
		t.Fatalf("credentials = %d, want 3 (two secrets, one certificate)", got)
	}
	first := w.Status.Credentials[0]
	if first.KeyID != s.appSecretKey || first.Type != v1alpha1.CredentialTypePassword || first.Source != v1alpha1.SourceApplication ||
		first.Hint != s.appSecret[:3] || first.DisplayName != "rbac" || !first.EndTime.Time.Equal(end) || first.State != v1alpha1.StateValid {
		t.Errorf("first credential = %+v, want the application's secret, Valid, ending in 40d", first)
	}
	if sp := w.Status.Credentials[2]; sp.KeyID != s.spSecretKey || sp.Source != v1alpha1.SourceServicePrincipal {
		t.Errorf("last credential = %+v, want the service principal's secret", sp)
	}
	if c := w.Status.Credentials[1]; c.KeyID != s.certKey || c.Type != v1alpha1.CredentialTypeCertificate {
		t.Errorf("second credential = %+v, want the certificate", c)
	}
	if w.Status.State != v1alpha1.StateValid || w.Status.ExpiresIn != "40d" || !w.Status.EarliestExpiry.Time.Equal(end) {
		t.Errorf("summary = %s, expires in %q at %v; want Valid, 40d", w.Status.State, w.Status.ExpiresIn, w.Status.EarliestExpiry)
	}
	if w.Status.ServicePrincipal == nil || w.Status.ServicePrincipal.DisplayName != "aks-prod-sp" ||
		w.Status.ServicePrincipal.ApplicationObjectID == "" || w.Status.ServicePrincipal.ServicePrincipalObjectID == "" {
		t.Errorf("servicePrincipal = %+v, want both objects found", w.Status.ServicePrincipal)
	}
	if res.RequeueAfter != 30*time.Minute+time.Second {
		t.Errorf("requeue after %v, want 30m1s, when EXPIRES IN turns from 40d to 39d", res.RequeueAfter)
	}
	assertEvents(t, h.takeEvents())

	// At 30 days from expiry the application's secret turns Warning.
	h.step(10*day + 30*time.Minute)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionExpiring, metav1.ConditionTrue, v1alpha1.ReasonWithinWarning)
	if w.Status.State != v1alpha1.StateWarning || w.Status.ExpiresIn != "30d" {
		t.Errorf("state %s, expires in %q; want Warning, 30d", w.Status.State, w.Status.ExpiresIn)
	}
	assertEvents(t, h.takeEvents(), "Warning CredentialWarning Secret \"rbac\" (keyId "+s.appSecretKey+", on the Application object) of \"aks-prod-sp\"")

	// A reconcile with nothing new raises nothing: events fire on transitions only.
	h.step(time.Minute)
	h.reconcile()
	assertEvents(t, h.takeEvents())

	// With a weekly check, the reconcile comes back at the next crossing, not the next check.
	w = h.get()
	w.Spec.CheckInterval = "1w"
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	h.step(23*day - 11*time.Minute) // 7d10m left: Critical in 10m
	_, res = h.reconcile()
	if res.RequeueAfter != 10*time.Minute {
		t.Errorf("requeue after %v, want 10m, when the secret turns Critical", res.RequeueAfter)
	}
	h.step(res.RequeueAfter)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionExpiring, metav1.ConditionTrue, v1alpha1.ReasonWithinCritical)
	if w.Status.Credentials[0].State != v1alpha1.StateCritical {
		t.Errorf("application secret is %s, want Critical", w.Status.Credentials[0].State)
	}
	assertEvents(t, h.takeEvents(), "Warning CredentialCritical Secret \"rbac\"")

	// At its end time it is Expired, and the event says how to renew it.
	h.step(7 * day)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionExpired, metav1.ConditionTrue, v1alpha1.ReasonCredentialExpired)
	if w.Status.State != v1alpha1.StateExpired || w.Status.ExpiresIn != "0m" {
		t.Errorf("state %s, expires in %q; want Expired, 0m", w.Status.State, w.Status.ExpiresIn)
	}
	events := h.takeEvents()
	assertEvents(t, events, "Warning CredentialExpired Secret \"rbac\"")
	if len(events) == 1 && !strings.Contains(events[0], "az ad app credential reset --id "+s.appID+" --append") {
		t.Errorf("expired event %q does not say how to renew", events[0])
	}
}

func TestAlreadyExpiredSecretIsExpired(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 300*day, -3*day, 300*day)
	h.create(s.appID, nil)

	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	assertCondition(t, w, v1alpha1.ConditionExpired, metav1.ConditionTrue, v1alpha1.ReasonCredentialExpired)
	if w.Status.State != v1alpha1.StateExpired || w.Status.ExpiresIn != "-3d" {
		t.Errorf("state %s, expires in %q; want Expired, -3d", w.Status.State, w.Status.ExpiresIn)
	}
	if c := w.Status.Credentials[0]; c.KeyID != s.spSecretKey || c.State != v1alpha1.StateExpired {
		t.Errorf("first credential = %+v, want the service principal's expired secret", c)
	}
	assertEvents(t, h.takeEvents(), "Warning CredentialExpired Secret \"reset by az\"")
	if msg := target.Condition(w, v1alpha1.ConditionExpired).Message; !strings.Contains(msg, "ServicePrincipal object") {
		t.Errorf("Expired message %q does not say the secret is on the service principal", msg)
	}
}

// failureStory is a Graph failure and how the watch must show it, then recover from it.
type failureStory struct {
	breakGraph   func(s seeded)
	mendGraph    func(s seeded)
	edit         func(*v1alpha1.CredentialWatchSpec)
	wantReason   string
	wantMinRetry time.Duration
	// wantMessage is said by the Ready condition and the event, when set.
	wantMessage string
}

func TestGraphFailuresShowAndRecover(t *testing.T) {
	needsAPIServer(t)
	var app, sp fakegraph.Object
	stories := map[string]failureStory{
		"unknown appId": {
			breakGraph: func(s seeded) {
				app, _ = fake.Application(tenantID, s.appID)
				sp, _ = fake.ServicePrincipal(tenantID, s.appID)
				fake.DeleteApplication(tenantID, s.appID)
				fake.DeleteServicePrincipal(tenantID, s.appID)
			},
			mendGraph: func(seeded) {
				fake.PutApplication(tenantID, app)
				fake.PutServicePrincipal(tenantID, sp)
			},
			wantReason:   v1alpha1.ReasonServicePrincipalNotFound,
			wantMinRetry: 30 * time.Second,
		},
		"permission denied": {
			breakGraph:   func(seeded) { fake.Deny(operatorClientID, true) },
			mendGraph:    func(seeded) { fake.Deny(operatorClientID, false) },
			wantReason:   v1alpha1.ReasonAccessDenied,
			wantMinRetry: 30 * time.Second,
			wantMessage:  "access denied (HTTP 403, Authorization_RequestDenied); the identity needs Application.Read.All",
		},
		// As for an identity with Application.ReadWrite.OwnedBy that does not own the application:
		// lists return the service principal alone, and the point read confirming it is refused.
		"the application readable only through its service principal": {
			breakGraph:   func(s seeded) { fake.HideApplication(operatorClientID, s.appID, true) },
			mendGraph:    func(s seeded) { fake.HideApplication(operatorClientID, s.appID, false) },
			wantReason:   v1alpha1.ReasonAccessDenied,
			wantMinRetry: 30 * time.Second,
			wantMessage:  "access denied (HTTP 403, Authorization_RequestDenied); the identity needs Application.Read.All (or Application.ReadWrite.OwnedBy as an owner of the application)",
		},
		"the application's confirmation fails": {
			breakGraph: func(s seeded) {
				fake.HideApplication(operatorClientID, s.appID, true)
				fake.FailApplication(s.appID, http.StatusInternalServerError)
			},
			mendGraph:    func(s seeded) { fake.HideApplication(operatorClientID, s.appID, false) },
			wantReason:   v1alpha1.ReasonGraphUnreachable,
			wantMinRetry: 30 * time.Second,
			wantMessage:  "reading application",
		},
		"throttled: Retry-After is honoured": {
			// Each try of the planned read, which tries a throttled list three times.
			breakGraph:   func(seeded) { fake.Throttle(3, 150*time.Second) },
			mendGraph:    func(seeded) {},
			wantReason:   v1alpha1.ReasonThrottled,
			wantMinRetry: 150 * time.Second,
		},
		"Graph unreachable": {
			breakGraph:   func(seeded) { fake.SetUnreachable(true) },
			mendGraph:    func(seeded) { fake.SetUnreachable(false) },
			wantReason:   v1alpha1.ReasonGraphUnreachable,
			wantMinRetry: 30 * time.Second,
		},
		"Graph accepts and never answers": {
			breakGraph:   func(seeded) { fake.SetStalled(true) },
			mendGraph:    func(seeded) { fake.SetStalled(false) },
			wantReason:   v1alpha1.ReasonGraphUnreachable,
			wantMinRetry: 30 * time.Second,
		},
	}
	for name, story := range stories {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			s := seed(t, h.clock.Now(), 20*day, 300*day, 300*day)
			h.create(s.appID, story.edit)
			story.breakGraph(s)

			w, res := h.reconcile()
			assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionFalse, story.wantReason)
			if res.RequeueAfter < story.wantMinRetry || res.RequeueAfter > 15*time.Minute {
				t.Errorf("retry after %v, want between %v and 15m", res.RequeueAfter, story.wantMinRetry)
			}
			if w.Status.ConsecutiveFailures != 1 || w.Status.LastCheckTime != nil {
				t.Errorf("failures %d, last check %v; want 1 and none", w.Status.ConsecutiveFailures, w.Status.LastCheckTime)
			}
			events := h.takeEvents()
			assertEvents(t, events, "Warning "+story.wantReason+" Checking credentials failed")
			if msg := target.Condition(w, v1alpha1.ConditionReady).Message; !strings.Contains(msg, story.wantMessage) ||
				(len(events) > 0 && !strings.Contains(events[0], story.wantMessage)) {
				t.Errorf("Ready says %q, the event %q; want both to say %q", msg, events, story.wantMessage)
			}

			// Before the retry is due a reconcile (a restart, an unrelated update) leaves Graph alone.
			before := len(fake.Requests())
			h.reconcile()
			if after := len(fake.Requests()); after != before {
				t.Errorf("a reconcile before the retry was due sent %d Graph requests", after-before)
			}

			story.mendGraph(s)
			h.step(res.RequeueAfter)
			w, _ = h.reconcile()
			assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
			assertCondition(t, w, v1alpha1.ConditionExpiring, metav1.ConditionTrue, v1alpha1.ReasonWithinWarning)
			if w.Status.ConsecutiveFailures != 0 || len(w.Status.Credentials) != 3 {
				t.Errorf("failures %d, credentials %d; want 0 and 3", w.Status.ConsecutiveFailures, len(w.Status.Credentials))
			}
			assertEvents(t, h.takeEvents(), "Normal CheckRecovered", "Warning CredentialWarning")
			assertNoSecrets(t, h)
		})
	}
}

func TestBackoffGrowsAndExpiryStillAdvancesWhileGraphIsDown(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 2*time.Hour, 300*day, 300*day)
	h.create(s.appID, nil)
	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	h.takeEvents()

	fake.SetUnreachable(true)
	defer fake.SetUnreachable(false)
	h.step(6 * time.Hour)
	var waits []time.Duration
	for range 4 {
		_, res := h.reconcile()
		waits = append(waits, res.RequeueAfter)
		h.step(res.RequeueAfter)
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute}
	for i := range want {
		if waits[i] != want[i] {
			t.Errorf("retry waits = %v, want %v", waits, want)
			break
		}
	}
	w = h.get()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonGraphUnreachable)
	// One event for the outage and one for the expiry, not one per retry.
	assertEvents(t, h.takeEvents(), "Warning GraphUnreachable", "Warning CredentialExpired")
	// The secret ended while Graph was down: the clock alone says it is expired.
	assertCondition(t, w, v1alpha1.ConditionExpired, metav1.ConditionTrue, v1alpha1.ReasonCredentialExpired)
	if w.Status.ConsecutiveFailures != 4 {
		t.Errorf("failures = %d, want 4", w.Status.ConsecutiveFailures)
	}

	fake.SetUnreachable(false)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	assertEvents(t, h.takeEvents(), "Normal CheckRecovered")
}

func TestDeletedServicePrincipalForgetsItsCredentials(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 3*day, 300*day, -day)
	h.create(s.appID, nil)
	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionExpired, metav1.ConditionTrue, v1alpha1.ReasonCredentialExpired)
	h.takeEvents()

	fake.DeleteApplication(tenantID, s.appID)
	fake.DeleteServicePrincipal(tenantID, s.appID)
	h.step(6 * time.Hour)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonServicePrincipalNotFound)
	if len(w.Status.Credentials) != 0 || w.Status.State != "" || w.Status.EarliestExpiry != nil || w.Status.ServicePrincipal != nil {
		t.Errorf("status still describes the deleted service principal: %+v", w.Status)
	}
	for _, c := range []string{v1alpha1.ConditionExpiring, v1alpha1.ConditionExpired} {
		if meta.FindStatusCondition(w.Status.Conditions, c) != nil {
			t.Errorf("condition %s is still set for credentials that no longer exist", c)
		}
	}
	// Nothing is left to expire, so no event about the credentials it had.
	h.step(3 * day)
	h.reconcile()
	for _, e := range h.takeEvents() {
		if strings.Contains(e, "CredentialCritical") || strings.Contains(e, "CredentialExpired") {
			t.Errorf("event about a deleted credential: %q", e)
		}
	}
}

// TestWatchSignsInAsItsAzureIdentity: a team's AzureIdentity signs in with the client secret its
// Secret holds, as its own controller proves against Entra ID, and the team's watch reads Graph
// as that client and no other.
func TestWatchSignsInAsItsAzureIdentity(t *testing.T) {
	needsAPIServer(t)
	const watcherClient = "5b6c7d8e-9f0a-4b1c-8d2e-3f4a5b6c7d8e"
	const watcherSecret = "wAtCh~er-SECRET-abcdefghijklmnopqrstuvwxyz0123"
	fake.AddClient(tenantID, watcherClient, watcherSecret)

	h := newHarness(t)
	s := seed(t, h.clock.Now(), 100*day, 100*day, 100*day)
	h.create(s.appID, func(spec *v1alpha1.CredentialWatchSpec) {
		spec.IdentityRef = &v1alpha1.IdentityRef{Kind: v1alpha1.KindAzureIdentity, Name: "graph-reader"}
	})
	ctx := context.Background()
	ids := &IdentityReconciler{Client: k8s, Secrets: k8s, Recorder: h.recorder, Clock: h.clock, Azure: clients.New(identities, graphAPI, nil)}
	signIn := func() *v1alpha1.AzureIdentity {
		t.Helper()
		key := client.ObjectKey{Namespace: h.key.Namespace, Name: "graph-reader"}
		if _, err := ids.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		var id v1alpha1.AzureIdentity
		if err := k8s.Get(ctx, key, &id); err != nil {
			t.Fatal(err)
		}
		return &id
	}

	// No identity yet: a person has to create it; the condition says which.
	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonIdentityNotFound)
	if msg := target.Condition(w, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "AzureIdentity "+h.key.Namespace+"/graph-reader") {
		t.Errorf("message %q does not name the identity", msg)
	}

	id := &v1alpha1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Name: "graph-reader", Namespace: h.key.Namespace}}
	id.Spec.ClientSecret = &v1alpha1.ClientSecretSignIn{TenantID: tenantID, ClientID: watcherClient, SecretRef: v1alpha1.SecretKeyRef{Name: "graph-reader", Key: "clientSecret"}}
	id.Spec.Allow.Applications = []string{s.appID}
	if err := k8s.Create(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Its Secret is missing, then wrong: the identity says so, with Entra's code, and so does the watch.
	got := signIn()
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonCredentialSecretInvalid || !strings.Contains(c.Message, h.key.Namespace+"/graph-reader") {
		t.Errorf("identity Ready = %+v, want CredentialSecretInvalid naming the Secret", c)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "graph-reader", Namespace: h.key.Namespace},
		Data:       map[string][]byte{"clientSecret": []byte("not-the-secret")},
	}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	h.step(time.Hour)
	got = signIn()
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonAuthenticationFailed || !strings.Contains(c.Message, "AADSTS7000215") {
		t.Errorf("identity Ready = %+v, want AuthenticationFailed with AADSTS7000215", c)
	}
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonIdentityNotReady)

	secret.Data["clientSecret"] = []byte(watcherSecret)
	if err := k8s.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	h.step(time.Hour)
	got = signIn()
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || got.Status.SignIn != "ClientSecret" {
		t.Fatalf("identity Ready = %+v, signIn %q; want signed in with a ClientSecret", c, got.Status.SignIn)
	}
	fake.ResetRequests()
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	reqs := fake.Requests()
	if len(reqs) == 0 {
		t.Fatal("the watch read nothing from Graph")
	}
	for _, r := range reqs {
		if r.ClientID != watcherClient {
			t.Errorf("Graph request %s %s signed in as %s, want the identity's client %s", r.Method, r.Path, r.ClientID, watcherClient)
		}
	}
	assertNoSecrets(t, h, watcherSecret, "not-the-secret")
}

func TestGraphIsReadWithOnlyTheFieldsNeeded(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 100*day, 100*day, 100*day)
	h.create(s.appID, nil)
	fake.ResetRequests()
	h.reconcile()
	reqs := fake.Requests()
	if len(reqs) != 3 || !reqs[2].IsBatch() {
		t.Fatalf("Graph requests = %+v, want a $batch listing the applications and the service principals", reqs)
	}
	for _, r := range reqs[:2] {
		q, _ := url.QueryUnescape(r.RawQuery)
		if r.Method != "GET" || !r.Batched || !strings.Contains(q, "$filter=appId in ('"+s.appID+"')") || !strings.Contains(q, "$select=") {
			t.Errorf("request %s %s?%s, want a list filtered by appId with $select", r.Method, r.Path, q)
		}
	}
}

// A list that returns the service principal without its application is confirmed by a point read
// before the watch says the application is in another tenant; the answer is kept, and the next
// check reads the lists alone.
func TestAnApplicationOfAnotherTenantIsConfirmedOnce(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 100*day, 100*day, 100*day)
	fake.DeleteApplication(tenantID, s.appID)
	h.create(s.appID, nil)
	pointReads := func() (n int) {
		for _, r := range fake.Requests() {
			if strings.Contains(r.Path, "/applications(appId=") {
				n++
			}
		}
		return n
	}
	fake.ResetRequests()
	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	if msg := target.Condition(w, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "the application object is not in this tenant") || pointReads() != 1 {
		t.Errorf("Ready says %q after %d point reads of the application; want it confirmed by one", msg, pointReads())
	}
	h.step(7 * time.Hour) // past the check interval, 6h
	fake.ResetRequests()
	w, _ = h.reconcile()
	if n := len(fake.Requests()); n != 3 || pointReads() != 0 || w.Status.LastCheckTime == nil || !w.Status.LastCheckTime.Time.Equal(h.clock.Now().Truncate(time.Second)) {
		t.Errorf("the next check sent %d requests, %d point reads of the application, checked at %v; want the lists alone", n, pointReads(), w.Status.LastCheckTime)
	}
}

// assertNoSecrets fails if a secret the fake holds, or extra, appears in what the harness logged
// or recorded, or in the watch's stored status.
func assertNoSecrets(t *testing.T, h *harness, extra ...string) {
	t.Helper()
	status, err := json.Marshal(h.get())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{
		"logs":   h.logs.String(),
		"events": strings.Join(h.all, "\n"),
		"status": string(status),
	}
	for _, secret := range append(fake.SecretTexts(), extra...) {
		for where, text := range seen {
			if strings.Contains(text, secret) {
				t.Errorf("%s contain a secret value (%s...)", where, secret[:3])
			}
		}
	}
}
