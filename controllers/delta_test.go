package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/internal/graph/deltastore"
	"github.com/credwatch/credwatch/internal/graph/planner"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// deltaNamespace is where the suite keeps its delta logs, as the operator keeps them in its own.
const deltaNamespace = "credwatch-delta"

// deltaCounts counts what the suite's rounds found, as the operator's metrics do.
type deltaCounts struct{ resyncs, missed atomic.Int64 }

func (c *deltaCounts) Resynced() { c.resyncs.Add(1) }
func (c *deltaCounts) Missed()   { c.missed.Add(1) }

// deltaEvents keeps the events on the delta logs' ConfigMaps.
type deltaEvents struct {
	mu     sync.Mutex
	events []string
}

func (e *deltaEvents) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, fmt.Sprintf("%s %s %s", eventtype, reason, fmt.Sprintf(format, args...)))
}

func (e *deltaEvents) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.events...)
}

var (
	deltaCounters = &deltaCounts{}
	deltaEventLog = &deltaEvents{}
)

// deltaTenant is the tenant TestChecksReadFromGraphsChanges fills: a delta round reads all of it.
const deltaTenant = "3e5f7a9b-2c4d-4e6f-8a0b-1c3d5e7f9a2b"

// steppedClock is the real clock moved on as far as a story moved its fake one: its timers run
// in real time, as a planner's windows must, and its rounds are as far apart as the story's
// sweeps.
type steppedClock struct {
	clock.RealClock
	ahead *atomic.Int64
}

func (c steppedClock) Now() time.Time                  { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c steppedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// deltaGraph is a read planner that answers from Graph's changes, kept in deltaNamespace, as the
// operator's does; a story's own, so that its rounds spend no other story's Graph.
func deltaGraph(t *testing.T, ahead *atomic.Int64) *planner.Graph {
	t.Helper()
	g := planner.NewGraph(graphReader, steppedClock{ahead: ahead}, planWindow)
	if err := g.UseDelta(planner.DeltaOptions{Keeper: &deltastore.Store{
		Reader: k8s, Writer: k8s, Namespace: deltaNamespace, Events: deltaEventLog, Counters: deltaCounters, Log: logr.Discard(),
	}}); err != nil {
		t.Fatal(err)
	}
	return g
}

// Twenty applications of a tenant are watched by an identity that may list it. After their first
// checks, a sweep asks Graph only what changed: a secret added out of band shows in its watch's
// status from the round that reports it, with no application read; a restarted operator reads
// each watch once and goes on from the kept links; a state Graph lost starts again once, with an
// event, and the watches are read.
func TestChecksReadFromGraphsChanges(t *testing.T) {
	needsAPIServer(t)
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deltaNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	fake.AddClient(deltaTenant, operatorClientID, operatorSecret)
	h := newHarness(t)
	ahead := &atomic.Int64{}
	h.r.Azure = clients.New(identities, deltaGraph(t, ahead), nil)
	ns := newNamespace(t)
	var keys []types.NamespacedName
	apps := map[types.NamespacedName]string{}
	end := h.clock.Now().Add(200 * day)
	for i := range 20 {
		appID := uuid.NewString()
		fake.PutApplication(deltaTenant, fakegraph.Object{AppID: appID, DisplayName: fmt.Sprintf("app-%02d", i),
			Passwords: []fakegraph.PasswordCredential{{DisplayName: "ci", SecretText: "aBc~" + uuid.NewString(), Start: h.clock.Now().Add(-day), End: end}}})
		fake.PutServicePrincipal(deltaTenant, fakegraph.Object{AppID: appID, DisplayName: fmt.Sprintf("app-%02d", i)})
		w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%02d", i), Namespace: ns},
			Spec: v1alpha1.CredentialWatchSpec{CheckInterval: "1h", Target: v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{TenantID: deltaTenant, ClientID: appID}}}}
		if err := k8s.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, client.ObjectKeyFromObject(w))
		apps[client.ObjectKeyFromObject(w)] = appID
	}
	// sweep checks every watch, and counts the applications and service principals read in lists
	// or alone, and the delta requests.
	sweep := func(why string) (read, delta int) {
		t.Helper()
		h.step(2 * time.Hour)
		ahead.Add(int64(2 * time.Hour))
		fake.ResetRequests()
		for _, key := range keys {
			if _, err := reconcileFully(ctrl.LoggerInto(ctx, h.logs.logger()), t, h.r, key); err != nil {
				t.Fatalf("%s: %v", why, err)
			}
		}
		for _, r := range fake.Requests() {
			switch {
			case strings.HasSuffix(r.Path, "/delta"):
				delta++
			case strings.Contains(r.Path, "$batch"), strings.Contains(r.Path, "(appId="):
				read++
			}
		}
		return read, delta
	}
	statusOf := func(key types.NamespacedName) *v1alpha1.CredentialWatch {
		t.Helper()
		w := &v1alpha1.CredentialWatch{}
		if err := k8s.Get(ctx, key, w); err != nil {
			t.Fatal(err)
		}
		return w
	}

	if read, _ := sweep("first checks"); read == 0 {
		w := statusOf(keys[0])
		t.Fatalf("the first checks read nothing: %+v %v", w.Status.Conditions, fake.Requests())
	}
	sweep("the checks read before the log started")
	read, delta := sweep("a quiet tenant")
	if read != 0 || delta == 0 {
		t.Fatalf("a quiet tenant: %d reads and %d delta requests; want only delta requests", read, delta)
	}
	for _, key := range keys {
		if w := statusOf(key); len(w.Status.Credentials) != 1 || w.Status.LastCheckTime == nil || !h.clock.Now().Equal(w.Status.LastCheckTime.Time) {
			t.Fatalf("%s after a quiet sweep: %+v, last check %v", key.Name, w.Status.Credentials, w.Status.LastCheckTime)
		}
	}

	// A secret added out of band, as `az ad app credential reset --append` would.
	changed := keys[5]
	app, _ := fake.Application(deltaTenant, apps[changed])
	app.Passwords = append(app.Passwords, fakegraph.PasswordCredential{DisplayName: "added by hand", SecretText: "xYz~" + uuid.NewString(), Start: h.clock.Now(), End: end})
	fake.PutApplication(deltaTenant, app)
	if read, _ := sweep("a secret added"); read != 0 {
		t.Fatalf("a secret added: %d reads; the round reports it", read)
	}
	w := statusOf(changed)
	if len(w.Status.Credentials) != 2 || !slices.ContainsFunc(w.Status.Credentials, func(c v1alpha1.Credential) bool { return c.DisplayName == "added by hand" }) {
		t.Fatalf("the watch of the changed application: %+v", w.Status.Credentials)
	}

	// A restarted operator: a new planner on the kept state. A watch's status is no base for a
	// round until the planner answered it (anyone who may write the status could say anything
	// there), so each watch is read once, and the next sweep goes on from the kept links.
	h.r.Azure = clients.New(identities, deltaGraph(t, ahead), nil)
	sweep("after a restart")
	if read, delta := sweep("the sweep after a restart"); read != 0 || delta == 0 {
		t.Errorf("the sweep after a restart: %d reads, %d delta requests", read, delta)
	}
	if ev := deltaEventLog.all(); len(ev) != 0 {
		t.Errorf("a restart on the kept state resynced: %v", ev)
	}

	// Graph lost the state behind the links: one sweep reads the watches, and says so once.
	before := deltaCounters.resyncs.Load()
	fake.ResetDeltaState(deltaTenant)
	if read, _ := sweep("a lost state"); read == 0 {
		t.Error("after Graph lost the state, nothing was read")
	}
	sweep("the checks read after the state was lost")
	if read, _ := sweep("the sweep after"); read != 0 {
		t.Errorf("the sweep after a lost state: %d reads", read)
	}
	if got := deltaCounters.resyncs.Load() - before; got != 1 {
		t.Errorf("%d resyncs counted, want 1", got)
	}
	if ev := deltaEventLog.all(); len(ev) == 0 || !strings.Contains(ev[len(ev)-1], "Warning "+deltastore.EventResynced) || !strings.Contains(ev[len(ev)-1], "410") {
		t.Errorf("events: %v", ev)
	}
	if deltaCounters.missed.Load() != 0 {
		t.Errorf("%d misses counted", deltaCounters.missed.Load())
	}
}
