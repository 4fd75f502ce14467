package controllers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/target"
)

// faults decides, from a seed, which calls to Azure fail and how.
type faults struct {
	mu  sync.Mutex
	rnd *rand.Rand
	// injected counts the faults by kind, for the log.
	injected map[string]int
}

func (f *faults) roll(p float64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rnd.Float64() < p
}

// before is a fault in place of the call, or nil: throttling with Retry-After, a server error, a
// timeout.
func (f *faults) before(op string) error {
	if !f.roll(0.1) {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch f.rnd.IntN(3) {
	case 0:
		f.injected["429"]++
		return &azerr.Error{Kind: azerr.KindThrottled, Status: http.StatusTooManyRequests, RetryAfter: time.Duration(1+f.rnd.IntN(20)) * time.Minute,
			Err: fmt.Errorf("%s: Too Many Requests", op)}
	case 1:
		f.injected["500"]++
		return &azerr.Error{Kind: azerr.KindUnavailable, Status: http.StatusInternalServerError, Err: fmt.Errorf("%s: Internal Server Error", op)}
	default:
		f.injected["timeout"]++
		return fmt.Errorf("%s: %w", op, context.DeadlineExceeded)
	}
}

// lost reports whether a write's answer is lost after it was applied.
func (f *faults) lost(op string) error {
	if !f.roll(0.1) {
		return nil
	}
	f.mu.Lock()
	f.injected["lost answer"]++
	f.mu.Unlock()
	return &azerr.Error{Kind: azerr.KindUnavailable, Err: fmt.Errorf("%s: the connection was reset after the request was sent", op)}
}

// faultyGraph is Graph with faults.
type faultyGraph struct {
	clients.Graph
	f *faults
}

func (g faultyGraph) ReadCredentials(ctx context.Context, cred azcore.TokenCredential, appID string) (graph.Snapshot, error) {
	if err := g.f.before("reading credentials"); err != nil {
		return graph.Snapshot{}, err
	}
	return g.Graph.ReadCredentials(ctx, cred, appID)
}

func (g faultyGraph) Check(ctx context.Context, cred azcore.TokenCredential, appID string, ask graph.Ask) (graph.Snapshot, error) {
	if err := g.f.before("reading credentials"); err != nil {
		return graph.Snapshot{}, err
	}
	return g.Graph.Check(ctx, cred, appID, ask)
}

func (g faultyGraph) AddPassword(ctx context.Context, cred azcore.TokenCredential, applicationID, displayName string, end time.Time) (graph.NewSecret, error) {
	if err := g.f.before("addPassword"); err != nil {
		return graph.NewSecret{}, err
	}
	s, err := g.Graph.AddPassword(ctx, cred, applicationID, displayName, end)
	if err == nil {
		if lost := g.f.lost("addPassword"); lost != nil {
			return graph.NewSecret{}, lost
		}
	}
	return s, err
}

func (g faultyGraph) RemovePassword(ctx context.Context, cred azcore.TokenCredential, applicationID, keyID string) error {
	if err := g.f.before("removePassword"); err != nil {
		return err
	}
	if err := g.Graph.RemovePassword(ctx, cred, applicationID, keyID); err != nil {
		return err
	}
	return g.f.lost("removePassword")
}

// faultyClusters is Resource Manager with faults.
type faultyClusters struct {
	clients.Clusters
	f *faults
}

func (c faultyClusters) ReadCluster(ctx context.Context, cred azcore.TokenCredential, ref aks.ClusterRef) (aks.Cluster, error) {
	if err := c.f.before("reading the cluster"); err != nil {
		return aks.Cluster{}, err
	}
	return c.Clusters.ReadCluster(ctx, cred, ref)
}

func (c faultyClusters) StartReset(ctx context.Context, cred azcore.TokenCredential, ref aks.ClusterRef, sp aks.ServicePrincipal) (string, bool, error) {
	if err := c.f.before("resetting the cluster"); err != nil {
		return "", false, err
	}
	token, done, err := c.Clusters.StartReset(ctx, cred, ref, sp)
	if err == nil {
		if lost := c.f.lost("resetting the cluster"); lost != nil {
			return "", false, lost
		}
	}
	return token, done, err
}

func (c faultyClusters) PollReset(ctx context.Context, cred azcore.TokenCredential, ref aks.ClusterRef, token string) (bool, error) {
	if err := c.f.before("polling the reset"); err != nil {
		return false, err
	}
	return c.Clusters.PollReset(ctx, cred, ref, token)
}

// faultSeed is CREDWATCH_FAULT_SEED, to replay a failure, or a new seed.
func faultSeed(t *testing.T) uint64 {
	if s := os.Getenv("CREDWATCH_FAULT_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CREDWATCH_FAULT_SEED=%q: %v", s, err)
		}
		return seed
	}
	return rand.Uint64()
}

// TestRotationUnderFaults rotates an AKS cluster's secret again and again while the operator is
// killed at random writes, Azure fails at random calls (429 with Retry-After, 500, timeouts,
// answers lost after the change applied, resets that fail after applying), and people act at
// random: a new secret deleted by hand, the target changed and put back, the watch deleted and
// created again. After every reconcile it checks what must always hold: at most one spare secret
// of credwatch's; the cluster never on a removed secret; the target Secret's secret one that
// signs in; a rotation that waits says why.
func TestRotationUnderFaults(t *testing.T) {
	needsAPIServer(t)
	n := faultSeed(t)
	t.Logf("seed %d: CREDWATCH_FAULT_SEED=%d go test ./controllers -run TestRotationUnderFaults replays it", n, n)
	rnd := rand.New(rand.NewPCG(n, n^0x5eed))
	f := &faults{rnd: rand.New(rand.NewPCG(n^0xfa17, n)), injected: map[string]int{}}

	h := newHarness(t)
	t0 := h.clock.Now()
	s := seed(t, t0, 20*day, 400*day, 200*day)
	arm := newARMClusters()
	arm.put("rg-prod", "aks-prod", s.appID)
	spec := func(spec *v1alpha1.CredentialWatchSpec) {
		spec.Target = v1alpha1.Target{AKSCluster: &v1alpha1.AKSClusterTarget{
			TenantID: tenantID, SubscriptionID: "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918", ResourceGroup: "rg-prod", Name: "aks-prod"}}
		rotationSpec(func(r *v1alpha1.Rotation) { r.GracePeriod = "1h" })(spec)
	}
	h.create("", spec)
	old, _ := h.oldCredwatchSecrets(s.appID, t0)

	var budget atomic.Int32
	rotations, kills, deletions, handRemovals, retargets, confirms := 0, 0, 0, 0, 0, 0
	retargetedAt := -1
	left, leftAt := map[string]bool{}, 0
	for round := 0; round < 3000 && rotations < 10; round++ {
		// A new process now and then, which dies after a few writes, or lives on.
		var dead atomic.Bool
		budget.Store(1000)
		if rnd.Float64() < 0.15 {
			budget.Store(int32(rnd.IntN(5)))
		}
		m := mortal{dead: &dead, budget: &budget}
		h.restart()
		h.r.Client = crashingClient{Client: k8s, mortal: m}
		h.r.Azure = clients.New(identities, faultyGraph{Graph: dyingGraph{Graph: graphAPI, mortal: m}, f: f},
			faultyClusters{Clusters: dyingClusters{Clusters: arm.reader(), mortal: m}, f: f})

		w := h.get()
		st := w.Status.Rotation
		switch r := rnd.Float64(); {
		case st == nil && w.Annotations[v1alpha1.RotateAnnotation] == lastRequest(w):
			// Done, or created again: ask for the next one.
			annotateWatch(t, h, v1alpha1.RotateAnnotation, fmt.Sprintf("round-%d", round))
		case st != nil && r < 0.02 && st.KeyID != "" && (st.Step == v1alpha1.StepSecretStored || st.Step == v1alpha1.StepSecretVerified) &&
			!h.clusterUses(arm, s.appID, st.KeyID):
			// Someone runs az ad app credential reset without --append, or deletes it in the portal.
			app, _ := fake.Application(tenantID, s.appID)
			for i, p := range app.Passwords {
				if p.KeyID == st.KeyID {
					app.Passwords = append(app.Passwords[:i], app.Passwords[i+1:]...)
					break
				}
			}
			fake.PutApplication(tenantID, app)
			handRemovals++
		case r < 0.03 && retargetedAt < 0:
			w.Spec.Target.AKSCluster.Name = "aks-other"
			if err := k8s.Update(context.Background(), w); err == nil {
				retargetedAt, retargets = round, retargets+1
			}
		case retargetedAt >= 0 && round-retargetedAt > 3:
			w.Spec.Target.AKSCluster.Name = "aks-prod"
			if err := k8s.Update(context.Background(), w); err == nil {
				retargetedAt = -1
			}
		case r < 0.06:
			arm.mu.Lock()
			arm.resetOutcome = "fails-after-applying"
			arm.mu.Unlock()
		case r < 0.07:
			arm.mu.Lock()
			arm.resetOutcome = ""
			arm.mu.Unlock()
		case st != nil && r < 0.08 && retargetedAt < 0:
			// Deleted mid-rotation, and created again under the same name by a pipeline.
			if err := k8s.Delete(context.Background(), w); err != nil {
				t.Fatal(err)
			}
			h.restart()
			h.r.Azure = clients.New(identities, faultyGraph{Graph: graphAPI, f: f}, faultyClusters{Clusters: arm.reader(), f: f})
			h.untilGone(3 * time.Hour)
			checkFaultInvariants(t, h, s.appID, old, arm, round, left)
			target, _ := h.targetSecret()
			for key := range h.credwatchSecrets(s.appID) {
				// What the target Secret does not hold is left to the watch created again, whose
				// rotation retires it once nothing uses it: after a reset that may have applied,
				// the cluster can still run on it while the Secret holds the newer one.
				if key != string(target.Data["keyID"]) && key != old {
					left[key] = true
				}
			}
			leftAt = rotations
			again := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: h.key.Namespace, Name: h.key.Name}}
			spec(&again.Spec)
			if err := k8s.Create(context.Background(), again); err != nil {
				t.Fatal(err)
			}
			deletions++
			continue
		}
		if c := target.Condition(w, v1alpha1.ConditionRotating); c.Reason == v1alpha1.ReasonResetNeedsConfirmation && st != nil {
			// An admin does what the hold says: moves the cluster onto the new secret by hand,
			// unless a reset that reported failure did, and confirms with the value it names.
			h.moveByHand(arm, s.appID, st.KeyID)
			_, confirm, _ := strings.Cut(c.Message, v1alpha1.ConfirmResetAnnotation+"=")
			confirm, _, _ = strings.Cut(confirm, " ")
			annotateWatch(t, h, v1alpha1.ConfirmResetAnnotation, confirm)
			confirms++
		}

		lastBefore := w.Status.LastRotation
		res, err := reconcileFully(ctrl.LoggerInto(context.Background(), h.logs.logger()), t, h.r, h.key)
		h.drainEvents()
		if dead.Load() {
			kills++
		}
		if err != nil && !dead.Load() && !apierrors.IsConflict(err) {
			t.Fatalf("round %d (seed %d): %v", round, n, err)
		}
		checkFaultInvariants(t, h, s.appID, old, arm, round, left)
		if now := h.get(); now.Status.LastRotation != nil && (lastBefore == nil || now.Status.LastRotation.KeyID != lastBefore.KeyID) {
			rotations++
		}
		wait := res.RequeueAfter
		if wait <= 0 || wait > 6*time.Hour {
			wait = 6 * time.Hour
		}
		h.step(max(wait, time.Second))
	}
	t.Logf("%d rotations; %d operator kills, %d watch deletions, %d secrets removed by hand, %d retargets, %d confirmations; faults %v",
		rotations, kills, deletions, handRemovals, retargets, confirms, f.injected)
	if rotations > leftAt {
		// The watch created again has the same name, so its secrets' prefix: its rotation
		// retired what its predecessor left.
		for key := range left {
			if inGraph(s.appID, key) {
				t.Errorf("secret %s, left by a deleted watch, was not retired by the rotations of the one created again", key)
			}
		}
	}
	if rotations < 2 {
		t.Errorf("only %d rotations completed (seed %d): the faults should slow rotation, not stop it", rotations, n)
	}
}

// lastRequest is the rotate annotation's value the watch's last rotation answered.
func lastRequest(w *v1alpha1.CredentialWatch) string {
	if w.Status.LastRotation == nil {
		return ""
	}
	return w.Status.LastRotation.Request
}

func annotateWatch(t *testing.T, h *harness, key, value string) {
	t.Helper()
	w := h.get()
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[key] = value
	if err := k8s.Update(context.Background(), w); err != nil && !apierrors.IsConflict(err) {
		t.Fatal(err)
	}
}

// clusterUses reports whether the cluster was last reset onto the application's secret keyID.
func (h *harness) clusterUses(arm *armClusters, appID, keyID string) bool {
	return keyID != "" && h.clusterKey(arm, appID) == keyID
}

// moveByHand runs az aks update-credentials onto the application's secret keyID, if it exists.
func (h *harness) moveByHand(arm *armClusters, appID, keyID string) {
	app, _ := fake.Application(tenantID, appID)
	for _, p := range app.Passwords {
		if p.KeyID == keyID {
			arm.mu.Lock()
			arm.secret["rg-prod/aks-prod"] = p.SecretText
			arm.mu.Unlock()
		}
	}
}

// checkFaultInvariants checks what must hold whatever happened; left are secrets a deleted
// watch let go of unretired, which its successor retires.
func checkFaultInvariants(t *testing.T, h *harness, appID, old string, arm *armClusters, round int, left map[string]bool) {
	t.Helper()
	app, _ := fake.Application(tenantID, appID)
	texts := map[string]string{}
	for _, p := range app.Passwords {
		texts[p.KeyID] = p.SecretText
	}
	arm.mu.Lock()
	onCluster := arm.secret["rg-prod/aks-prod"]
	arm.mu.Unlock()
	// The cluster never runs on a removed secret.
	clusterKey := ""
	for key, text := range texts {
		if text == onCluster {
			clusterKey = key
		}
	}
	if onCluster != "" && clusterKey == "" {
		t.Fatalf("round %d: the cluster runs on a secret that no longer exists", round)
	}
	// The target Secret holds a secret that exists, with its text: one that signs in.
	targetKey := ""
	if target, err := h.targetSecret(); err == nil && len(target.Data["clientSecret"]) > 0 {
		targetKey = string(target.Data["keyID"])
		if text, ok := texts[targetKey]; !ok || text != string(target.Data["clientSecret"]) {
			t.Fatalf("round %d: the target Secret holds secret %s, which no longer signs in", round, targetKey)
		}
	}
	// At most one spare secret of credwatch's: besides the one in use and the one the cluster
	// runs on, and the old one the watch started with.
	spare := 0
	for key := range h.credwatchSecrets(appID) {
		if key != targetKey && key != clusterKey && key != old && !left[key] {
			spare++
		}
	}
	if spare > 1 {
		var w v1alpha1.CredentialWatch
		_ = k8s.Get(context.Background(), h.key, &w)
		var names []string
		for key, p := range h.credwatchSecrets(appID) {
			names = append(names, key[:8]+"="+p.DisplayName)
		}
		t.Fatalf("round %d: %d spare secrets of credwatch's exist at once, want at most one: %v (target %.8s, cluster %.8s); rotation %+v",
			round, spare, names, targetKey, clusterKey, w.Status.Rotation)
	}
	// A rotation that waits says why.
	var w v1alpha1.CredentialWatch
	if err := k8s.Get(context.Background(), h.key, &w); err != nil {
		return
	}
	st := w.Status.Rotation
	if st == nil || w.DeletionTimestamp != nil || st.NextAttemptTime == nil || st.NextAttemptTime.Sub(h.clock.Now()) <= 2*time.Minute {
		return
	}
	c := target.Condition(&w, v1alpha1.ConditionRotating)
	if c.Message == "" || (c.Reason == string(st.Step) && !strings.Contains(c.Message, st.Message)) {
		t.Fatalf("round %d: the rotation waits until %v at step %s, and Rotating (%s: %q) does not say why (%q)",
			round, st.NextAttemptTime, st.Step, c.Reason, c.Message, st.Message)
	}
}
