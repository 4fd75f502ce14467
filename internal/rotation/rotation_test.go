package rotation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/githubsecrets"
	"github.com/credwatch/credwatch/internal/secret"
)

// verified is a rotation whose new secret k-1, kept and listed, was verified days ago.
func (w *world) verified() *v1alpha1.RotationStatus {
	w.adds = 1
	w.secrets = append(w.secrets, Secret{KeyID: "k-1", DisplayName: "credwatch-2b9c0c1e-20261130T090000Z", End: w.now.Add(360 * 24 * time.Hour)})
	w.held, w.heldText = Held{KeyID: "k-1", DisplayName: "credwatch-2b9c0c1e-20261130T090000Z"}, "text-1"
	return &v1alpha1.RotationStatus{Step: v1alpha1.StepSecretVerified, DisplayName: w.held.DisplayName, TenantID: "t", AppID: testApp,
		ApplicationObjectID: "a0e1", Cluster: testCluster, KeyID: "k-1", StartTime: metav1.NewTime(w.now.Add(-72 * time.Hour))}
}

// until moves the rotation on, reconcile after reconcile, until it reaches step or completes;
// at most n reconciles.
func (w *world) until(st *v1alpha1.RotationStatus, cluster bool, step v1alpha1.RotationStep, n int) (*v1alpha1.RotationStatus, Result) {
	w.t.Helper()
	var res Result
	for range n {
		st, res = w.run(st, cluster)
		if st == nil || st.Step == step {
			return st, res
		}
	}
	w.t.Fatalf("after %d reconciles the rotation is at %+v, not at %s", n, st, step)
	return nil, res
}

// A service principal's rotation: a new secret kept, accepted three times over a minute, in use
// at once, and the old secret this watch made retired after the grace period; the one made by
// hand stays.
func TestServicePrincipalRotation(t *testing.T) {
	w := newWorld(t)
	st, _ := w.until(nil, false, v1alpha1.StepRetiring, 10)
	if w.adds != 1 || w.dryRuns != 1 || w.published.KeyID != "k-1" || w.held.KeyID != "" || st.KeyID != "k-1" {
		t.Fatalf("%d adds, %d dry runs, staged %+v, published %+v, status %+v: want one secret added after a dry run, staged, then published",
			w.adds, w.dryRuns, w.held, w.published, st)
	}
	if st.Acceptances != acceptancesNeeded || w.now.Sub(st.FirstAcceptedTime.Time) < acceptanceSpan {
		t.Errorf("accepted %d times since %v: want %d over %v", st.Acceptances, st.FirstAcceptedTime, acceptancesNeeded, acceptanceSpan)
	}
	if st.RetireTime == nil || !w.listed("k-old") {
		t.Fatalf("status %+v: want the old secret kept through the grace period", st)
	}
	st, res := w.run(st, false)
	if st != nil || w.finished == nil || w.finished.KeyID != "k-1" {
		t.Fatalf("status %+v, finished %+v: want the rotation completed with k-1", st, w.finished)
	}
	if w.listed("k-old") || !w.listed("k-hand") || !w.listed("k-1") {
		t.Errorf("Graph lists %+v: want k-old retired, k-hand and k-1 kept", w.secrets)
	}
	if res.Condition.Reason != v1alpha1.ReasonIdle || !strings.Contains(res.Condition.Message, "removed 1 old secrets (k-old)") {
		t.Errorf("condition %+v", res.Condition)
	}
	if got := w.eventReasons(); !slices.Equal(got, []string{EventStarted, EventRotated}) {
		t.Errorf("events %v", got)
	}
}

// An AKS cluster's rotation retires the old secret only after a reset operation succeeded.
func TestAKSRotation(t *testing.T) {
	w := newWorld(t)
	st, _ := w.until(nil, true, v1alpha1.StepClusterUpdating, 10)
	if st.ResumeToken != "token-1" || st.ResetOperation != "op-1" || st.Resets != 1 || len(w.resets) != 1 || w.resets[0] != "text-1" {
		t.Fatalf("status %+v after resets %q: want the reset of the new secret followed by its token", st, w.resets)
	}
	if w.published.KeyID != "" {
		t.Fatalf("published %+v before the reset succeeded", w.published)
	}
	st, _ = w.until(st, true, v1alpha1.StepRetiring, 3)
	if st.FailedResets != 0 || st.ResumeToken != "" || w.published.KeyID != "k-1" {
		t.Errorf("status %+v, published %+v: want the secret handed to the target once in use", st, w.published)
	}
}

// The seed incident: a reset refused at once, then one that fails after applying part of the
// change while the cluster reads Succeeded. Attempts and outcomes are counted apart, and the
// old secret stays until an operation itself succeeds.
func TestAResetThatFailedIsMadeAgainUntilOneSucceeds(t *testing.T) {
	w := newWorld(t)
	w.startReset = func(n int) (bool, error) {
		if n == 1 {
			return false, &azerr.Error{Status: http.StatusConflict, Err: errors.New("OperationNotAllowed: another operation is in progress")}
		}
		return false, nil
	}
	w.pollReset = func(token string) (bool, error) {
		w.cluster.ProvisioningState = "Succeeded" // half applied, and reads Succeeded
		if token == "token-2" {
			return false, &azerr.Error{Status: http.StatusInternalServerError, Err: errors.New("InternalServerError")}
		}
		return true, nil
	}
	st, _ := w.until(nil, true, v1alpha1.StepClusterUpdating, 10)
	if st.Resets != 2 || st.FailedResets != 0 {
		t.Fatalf("status %+v: want the refused request counted as an attempt, not a failed operation", st)
	}
	st, _ = w.run(st, true) // op-2 fails; op-3 starts at once
	if st.Step != v1alpha1.StepClusterUpdating || st.ResetOperation != "op-3" || st.FailedResets != 1 || st.RetireTime != nil {
		t.Fatalf("status %+v: want another reset, nothing retiring", st)
	}
	st, _ = w.until(st, true, v1alpha1.StepRetiring, 5) // op-3 succeeds
	if st.Resets != 3 || st.FailedResets != 1 || len(w.resets) != 3 {
		t.Errorf("status %+v after %d resets: want the third to count", st, len(w.resets))
	}
}

// A hold confirmed after its new secret was removed retires nothing: the rotation adds another
// secret and holds again without a reset, and only a confirmation naming that secret counts, not
// the one given for the last operation, which moved the cluster onto the secret now gone.
func TestAConfirmedHoldWhoseSecretVanishedStartsOver(t *testing.T) {
	w := newWorld(t)
	w.pollReset = func(string) (bool, error) {
		w.cluster.ProvisioningState = "Succeeded"
		return false, &azerr.Error{Status: http.StatusInternalServerError, Err: errors.New("InternalServerError")}
	}
	st := w.verified()
	for range 20 {
		if st, _ = w.run(st, true); st.FailedResets >= failedResetsBeforeHold {
			break
		}
	}
	if st.FailedResets < failedResetsBeforeHold {
		t.Fatalf("status %+v: want it held", st)
	}
	w.secrets = slices.DeleteFunc(w.secrets, func(s Secret) bool { return s.KeyID == "k-1" })
	w.confirmed = "op-3"
	st, _ = w.run(st, true)
	if st.KeyID == "k-1" || st.Step == v1alpha1.StepRetiring || !slices.Contains(w.eventReasons(), EventSecretVanished) {
		t.Fatalf("status %+v, events %v: want a new secret, nothing retiring", st, w.eventReasons())
	}
	var res Result
	for range 20 {
		if st, res = w.run(st, true); res.Condition.Reason == v1alpha1.ReasonResetNeedsConfirmation {
			break
		}
	}
	if res.Condition.Reason != v1alpha1.ReasonResetNeedsConfirmation || len(w.resets) != failedResetsBeforeHold || st.ResetOperation != "" {
		t.Fatalf("condition %+v, %d resets, status %+v: want the new secret held without another reset", res.Condition, len(w.resets), st)
	}
	for _, want := range []string{"secret " + st.KeyID, "az aks update-credentials", "credwatch.dev/confirm-reset=" + st.KeyID} {
		if !strings.Contains(res.Condition.Message, want) {
			t.Errorf("condition says %q, want %q in it", res.Condition.Message, want)
		}
	}
	if st, _ = w.run(st, true); st.Step != v1alpha1.StepSecretVerified {
		t.Fatalf("status %+v: the old operation's confirmation let the new secret go on", st)
	}
	// Removed again while the rotation waits, unconfirmed: replaced at the next hourly look,
	// before anyone is asked to move the cluster onto it.
	held := st.KeyID
	w.confirmed = ""
	w.secrets = slices.DeleteFunc(w.secrets, func(s Secret) bool { return s.KeyID == held })
	for range 20 {
		if st, res = w.run(st, true); res.Condition.Reason == v1alpha1.ReasonResetNeedsConfirmation && st.KeyID != held {
			break
		}
	}
	if st.KeyID == held || res.Condition.Reason != v1alpha1.ReasonResetNeedsConfirmation || len(w.resets) != failedResetsBeforeHold {
		t.Fatalf("status %+v, condition %+v: want another secret held, with no reset", st, res.Condition)
	}
	w.confirmed = st.KeyID
	if st, _ = w.run(st, true); st.Step != v1alpha1.StepRetiring || !w.listed("k-old") {
		t.Errorf("status %+v: want the confirmed rotation retiring after its grace period", st)
	}
}

// After three failed operations the rotation stops resetting and holds the old secret, saying
// what to run and what to confirm; only the last operation's ID, confirmed, lets it go on.
func TestRepeatedResetFailuresHoldForConfirmation(t *testing.T) {
	w := newWorld(t)
	w.pollReset = func(string) (bool, error) {
		w.cluster.ProvisioningState = "Succeeded"
		return false, &azerr.Error{Status: http.StatusInternalServerError, Err: errors.New("InternalServerError")}
	}
	st, res := w.run(nil, true)
	for len(w.resets) < failedResetsBeforeHold || st.FailedResets < failedResetsBeforeHold {
		st, res = w.run(st, true)
	}
	if res.Condition.Reason != v1alpha1.ReasonResetNeedsConfirmation || res.Next.IsZero() {
		t.Fatalf("condition %+v, next %v: want the rotation held, looking for its secret hourly", res.Condition, res.Next)
	}
	for _, want := range []string{"az aks update-credentials --subscription " + testCluster.SubscriptionID + " -g rg-prod -n aks-prod",
		"credwatch.dev/confirm-reset=op-3", "kubectl annotate credentialwatch -n team-a payments"} {
		if !strings.Contains(res.Condition.Message, want) {
			t.Errorf("condition says %q, want %q in it", res.Condition.Message, want)
		}
	}
	if !slices.Contains(w.eventReasons(), EventResetHeld) {
		t.Errorf("events %v, want %s", w.eventReasons(), EventResetHeld)
	}

	for _, confirm := range []string{"", "op-2"} {
		w.confirmed = confirm
		st, res = w.run(st, true)
		if len(w.resets) != failedResetsBeforeHold || st.Step != v1alpha1.StepSecretVerified || res.Condition.Reason != v1alpha1.ReasonResetNeedsConfirmation {
			t.Fatalf("confirmed %q: %d resets, status %+v: want it still held", confirm, len(w.resets), st)
		}
	}
	w.cluster.ProvisioningState = "Failed"
	w.confirmed = "op-3"
	st, res = w.run(st, true)
	if st.Step != v1alpha1.StepSecretVerified || !strings.Contains(res.Condition.Message, "aks-prod is Failed") {
		t.Fatalf("status %+v, condition %+v: a confirmed reset of a Failed cluster retires nothing", st, res.Condition)
	}
	w.cluster.ProvisioningState = "Succeeded"
	st, _ = w.run(st, true)
	if st.Step != v1alpha1.StepRetiring || len(w.resets) != failedResetsBeforeHold || !slices.Contains(w.eventReasons(), EventResetConfirmed) {
		t.Errorf("status %+v, events %v: want the confirmed rotation retiring, with no further reset", st, w.eventReasons())
	}
}

// A cluster that reads Failed after a reset is retried with the clusters' backoff, with the
// command that recovers it by hand, and counts towards the hold.
func TestAClusterFailedAfterItsResetBacksOff(t *testing.T) {
	w := newWorld(t)
	w.pollReset = func(string) (bool, error) {
		w.cluster.ProvisioningState = "Failed"
		return false, &azerr.Error{Status: http.StatusInternalServerError, Err: errors.New("InternalServerError")}
	}
	st, _ := w.until(nil, true, v1alpha1.StepClusterUpdating, 10)
	before := w.now
	st, res := w.run(st, true)
	if st.Step != v1alpha1.StepSecretVerified || st.FailedResets != 1 || res.Next.Sub(before) < time.Hour ||
		!strings.Contains(st.Message, "recover by hand with: az aks update-credentials") {
		t.Errorf("status %+v, next in %v: want a failed operation, retried in an hour at the soonest", st, res.Next.Sub(before))
	}
}

// Right before the cluster is moved onto the new secret, days after it was verified, the secret
// is checked again: gone from Graph, the rotation starts over and adds a new one, keeping its
// cluster; no longer accepted, it waits; only a secret that exists and signs in is pushed.
func TestTheNewSecretIsCheckedAgainBeforeTheReset(t *testing.T) {
	for _, tc := range []struct {
		name      string
		remove    bool
		refuse    bool
		wantStep  v1alpha1.RotationStep
		wantEvent string
	}{
		{name: "removed by hand meanwhile", remove: true, wantStep: v1alpha1.StepSecretStored, wantEvent: EventSecretVanished},
		{name: "listed but refused", refuse: true, wantStep: v1alpha1.StepSecretVerified},
		{name: "still good", wantStep: v1alpha1.StepClusterUpdating},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			st := w.verified()
			if tc.remove {
				w.secrets = slices.DeleteFunc(w.secrets, func(s Secret) bool { return s.KeyID == st.KeyID })
			}
			if tc.refuse {
				w.signIn = func(string) error { return errors.New("AADSTS7000215: invalid client secret") }
			}
			st, _ = w.run(st, true)
			if st.Step != tc.wantStep || (len(w.resets) > 0) != (tc.wantStep == v1alpha1.StepClusterUpdating) {
				t.Fatalf("status %+v after %d resets, want step %s", st, len(w.resets), tc.wantStep)
			}
			if tc.remove && (st.Cluster == nil || *st.Cluster != *testCluster || st.KeyID != "k-2" || st.DisplayName == "credwatch-2b9c0c1e-20261130T090000Z") {
				t.Errorf("status %+v: want a new secret's name and the cluster still pinned", st)
			}
			if tc.wantEvent != "" && !slices.Contains(w.eventReasons(), tc.wantEvent) {
				t.Errorf("events %v, want %s", w.eventReasons(), tc.wantEvent)
			}
		})
	}
}

// A secret Entra keeps refusing, and Graph no longer lists, is replaced; the cluster stays pinned.
func TestASecretThatVanishedBeforeItWasAcceptedIsReplaced(t *testing.T) {
	w := newWorld(t)
	st, _ := w.until(nil, true, v1alpha1.StepSecretStored, 3)
	pinned := &v1alpha1.IdentityRef{Kind: v1alpha1.KindAzureIdentity, Name: "rotator"}
	st.Identity, st.SignInsGated = pinned, true
	w.signIn = func(string) error { return errors.New("AADSTS7000215: invalid client secret") }
	w.secrets = slices.DeleteFunc(w.secrets, func(s Secret) bool { return s.KeyID == st.KeyID })
	for range verifyTriesBeforeRecheck + 1 {
		st, _ = w.run(st, true)
	}
	if w.adds != 2 || st.KeyID != "k-2" || st.Cluster == nil || *st.Cluster != *testCluster {
		t.Errorf("%d adds, status %+v: want a second secret, and the cluster kept", w.adds, st)
	}
	if st.Identity == nil || *st.Identity != *pinned || !st.SignInsGated {
		t.Errorf("identity %v, gated %v: want what the rotation pinned kept when it starts over", st.Identity, st.SignInsGated)
	}
}

// An addPassword whose answer was lost may have made a secret Graph does not list yet: no second
// one is added until the list had two minutes to show it, read every 20 s.
func TestALostAddPasswordAnswerLeavesNoSecondSecret(t *testing.T) {
	w := newWorld(t)
	sent := metav1.NewTime(w.now.Add(-30 * time.Second))
	st := &v1alpha1.RotationStatus{Step: v1alpha1.StepStarted, DisplayName: "credwatch-2b9c0c1e-20261203T085900Z", AppID: testApp, AddTime: &sent}
	before := w.now
	st, res := w.run(st, false)
	if w.adds != 0 || st.Step != v1alpha1.StepStarted || res.Next.Sub(before) != addListPoll {
		t.Fatalf("%d adds, status %+v, next in %v: want the list read again in %v", w.adds, st, res.Next.Sub(before), addListPoll)
	}
	// The lost secret shows up: it is an orphan (its text is gone) and is removed, not kept.
	w.secrets = append(w.secrets, Secret{KeyID: "k-lost", DisplayName: st.DisplayName, End: w.now.Add(365 * 24 * time.Hour)})
	w.now = sent.Add(addListLag)
	st, _ = w.run(st, false)
	if w.adds != 1 || w.listed("k-lost") || st.Step == v1alpha1.StepStarted {
		t.Errorf("%d adds, Graph %+v, status %+v: want the orphan removed and one secret added", w.adds, w.secrets, st)
	}
	if !slices.Contains(w.eventReasons(), EventOrphanRemoved) {
		t.Errorf("events %v", w.eventReasons())
	}
}

// A Store that refuses the write refuses it before a secret is added: nothing to remove after.
func TestAStoreThatRefusesTheWriteAddsNothing(t *testing.T) {
	w := newWorld(t)
	w.storeErr = fmt.Errorf("writing: %w", apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "payments-sp", nil))
	st, res := w.run(nil, false)
	if w.adds != 0 || st.Step != v1alpha1.StepStarted || res.Condition.Reason != v1alpha1.ReasonRotationBlocked || res.Next.Sub(w.saved[0].StartTime.Time) < time.Hour {
		t.Errorf("%d adds, status %+v, condition %+v: want nothing added, blocked for an hour at least", w.adds, st, res.Condition)
	}
}

// A Store whose write fails after the secret was added gets no secret left behind.
func TestASecretThatCouldNotBeKeptIsRemoved(t *testing.T) {
	w := newWorld(t)
	m := w.machine(false)
	store := m.Store.(fakeStore)
	write := store.WriteFunc
	store.WriteFunc = func(ctx context.Context, name string, s NewSecret, dryRun bool) error {
		if dryRun {
			return write(ctx, name, s, dryRun)
		}
		return apierrors.NewTimeoutError("the API server did not answer", 1)
	}
	m.Store = store
	res, err := m.Start(t.Context(), Pin{TenantID: "t", AppID: testApp, ApplicationObjectID: "a0e1"}, Asked{})
	if err != nil {
		t.Fatal(err)
	}
	if w.adds != 1 || w.listed("k-1") || res.Status.Step != v1alpha1.StepStarted || res.Status.Failures != 1 {
		t.Errorf("%d adds, Graph %+v, status %+v: want the unkept secret removed and the step retried", w.adds, w.secrets, res.Status)
	}
}

// Someone else's Secret under the target name blocks the rotation before anything is added.
func TestASecretOfSomeoneElseBlocks(t *testing.T) {
	w := newWorld(t)
	m := w.machine(false)
	m.Store = fakeStore{HeldFunc: func(context.Context) (Held, error) {
		return Held{}, fmt.Errorf("Secret team-a/payments-sp: %w", ErrForeign)
	}}
	res, err := m.Start(t.Context(), Pin{TenantID: "t", AppID: testApp, ApplicationObjectID: "a0e1"}, Asked{})
	if err != nil {
		t.Fatal(err)
	}
	if w.adds != 0 || res.Condition.Reason != v1alpha1.ReasonRotationBlocked {
		t.Errorf("%d adds, condition %+v", w.adds, res.Condition)
	}
}

// A rotation at a cluster step with no cluster to act on waits, retiring nothing.
func TestAClusterStepWithoutItsClusterWaits(t *testing.T) {
	for _, step := range []v1alpha1.RotationStep{v1alpha1.StepSecretVerified, v1alpha1.StepClusterUpdating} {
		w := newWorld(t)
		st := &v1alpha1.RotationStatus{Step: step, AppID: testApp, KeyID: "k-1", Cluster: testCluster}
		st, res := w.run(st, false)
		if st.Step != step || st.Failures != 1 || st.RetireTime != nil || !strings.Contains(res.Condition.Message, "rg-prod/aks-prod, which the watch no longer names") {
			t.Errorf("%s: status %+v, condition %+v", step, st, res.Condition)
		}
	}
}

// An operator stopped after saving ClusterUpdating but before keeping the operation's token finds
// the cluster: still updating, it waits; settled, it resets again rather than assume the reset
// was made.
func TestAResetWhoseTokenWasLost(t *testing.T) {
	for _, tc := range []struct {
		state      string
		wantResets int
	}{
		{"Updating", 0},
		{"Succeeded", 1},
	} {
		w := newWorld(t)
		w.cluster.ProvisioningState = tc.state
		w.secrets = append(w.secrets, Secret{KeyID: "k-1", DisplayName: "credwatch-2b9c0c1e-20261203T085900Z"})
		w.held, w.heldText = Held{KeyID: "k-1"}, "text-1"
		st := &v1alpha1.RotationStatus{Step: v1alpha1.StepClusterUpdating, AppID: testApp, KeyID: "k-1", Cluster: testCluster, Resets: 1}
		st, _ = w.run(st, true)
		if st.Step != v1alpha1.StepClusterUpdating || len(w.resets) != tc.wantResets || st.RetireTime != nil {
			t.Errorf("cluster %s: status %+v after %d resets, want %d", tc.state, st, len(w.resets), tc.wantResets)
		}
	}
}

// A reset that runs for hours tells people, once.
func TestAResetThatRunsForHoursIsReported(t *testing.T) {
	w := newWorld(t)
	w.pollReset = func(string) (bool, error) { return false, nil }
	st, _ := w.until(nil, true, v1alpha1.StepClusterUpdating, 10)
	w.now = w.now.Add(clusterStuckAfter + time.Minute)
	st, _ = w.run(st, true)
	w.now = w.now.Add(time.Hour)
	st, _ = w.run(st, true)
	n := 0
	for _, e := range w.events {
		if strings.Contains(e, EventClusterFailed) {
			n++
		}
	}
	if n != 1 || !strings.Contains(st.Message, "it may need a look") {
		t.Errorf("%d events, status %+v", n, st)
	}
}

// Which failures retrying does not mend.
func TestPermanent(t *testing.T) {
	gr := schema.GroupResource{Resource: "secrets"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"Graph refusing the identity", &azerr.Error{Kind: azerr.KindForbidden, Status: http.StatusForbidden}, true},
		{"Graph not finding the application", &azerr.Error{Kind: azerr.KindNotFound, Status: http.StatusNotFound}, true},
		{"Graph throttling", &azerr.Error{Kind: azerr.KindThrottled, Status: http.StatusTooManyRequests}, false},
		{"a conflicting operation on the cluster", &azerr.Error{Status: http.StatusConflict}, false},
		{"Graph failing", &azerr.Error{Kind: azerr.KindUnavailable, Status: http.StatusServiceUnavailable}, false},
		{"no answer", &azerr.Error{Kind: azerr.KindUnavailable}, false},
		{"an immutable Secret", fmt.Errorf("writing: %w", apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "s", nil)), true},
		{"no right to write Secrets here", apierrors.NewForbidden(gr, "s", errors.New("no")), true},
		{"someone else's Secret", fmt.Errorf("x: %w", ErrForeign), true},
		{"the API server busy", apierrors.NewTooManyRequests("busy", 1), false},
		{"GitHub's rate limit, a 403", &azerr.Error{Kind: azerr.KindThrottled, Status: http.StatusForbidden, Code: "RateLimited"}, false},
		{"a GitHub host not allowed", fmt.Errorf("x: %w", githubsecrets.ErrHostNotAllowed), true},
	} {
		if got := Permanent(tc.err); got != tc.want {
			t.Errorf("%s: Permanent = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A step Azure throttles waits at least as long as Azure asked.
func TestRetriesWaitForRetryAfter(t *testing.T) {
	w := newWorld(t)
	m := w.machine(false)
	app := m.App.(fakeApp)
	app.SecretsFunc = func(context.Context) ([]Secret, error) {
		return nil, &azerr.Error{Kind: azerr.KindThrottled, Status: http.StatusTooManyRequests, RetryAfter: 10 * time.Minute}
	}
	m.App = app
	res, err := m.Start(t.Context(), Pin{TenantID: "t", AppID: testApp, ApplicationObjectID: "a0e1"}, Asked{})
	if err != nil {
		t.Fatal(err)
	}
	if next := res.Status.NextAttemptTime; next == nil || next.Sub(w.now) < 10*time.Minute {
		t.Errorf("status %+v: want the next attempt 10 minutes away at the soonest", res.Status)
	}
}

// Before any reset a rotation is withdrawn whole: its new secret leaves Graph and its staged copy
// goes. After a reset began, or once the secret is in use, it is not.
func TestAbort(t *testing.T) {
	for _, tc := range []struct {
		name      string
		st        func(w *world) *v1alpha1.RotationStatus
		wantAbort bool
	}{
		{name: "staged, not yet accepted", wantAbort: true, st: func(w *world) *v1alpha1.RotationStatus {
			st := w.verified()
			st.Step = v1alpha1.StepSecretStored
			return st
		}},
		{name: "verified, waiting for the window", wantAbort: true, st: func(w *world) *v1alpha1.RotationStatus { return w.verified() }},
		{name: "a reset began", st: func(w *world) *v1alpha1.RotationStatus {
			st := w.verified()
			st.Step, st.Resets = v1alpha1.StepClusterUpdating, 1
			return st
		}},
		{name: "after a failed reset", st: func(w *world) *v1alpha1.RotationStatus {
			st := w.verified()
			st.Resets, st.FailedResets = 1, 1
			return st
		}},
		{name: "in use", st: func(w *world) *v1alpha1.RotationStatus {
			st := w.verified()
			st.Step, st.Cluster = v1alpha1.StepRetiring, nil
			return st
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			st := tc.st(w)
			res, err := w.machine(true).Abort(t.Context(), *st, "credwatch.dev/abort-rotation=now")
			if (Abortable(*st) == nil) != tc.wantAbort {
				t.Fatalf("Abortable = %v, want abortable %v", Abortable(*st), tc.wantAbort)
			}
			if !tc.wantAbort {
				if err == nil || w.listed("k-1") == false || w.abandoned {
					t.Errorf("err %v, Graph %+v: want the abort refused and nothing touched", err, w.secrets)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != nil || !w.abandoned || w.listed("k-1") || !w.listed("k-old") || w.discards != 1 || res.Condition.Reason != v1alpha1.ReasonRotationAborted {
				t.Errorf("result %+v, Graph %+v, %d discards: want k-1 removed, its staged copy discarded, the rotation ended", res, w.secrets, w.discards)
			}
			if !slices.Contains(w.eventReasons(), EventAborted) {
				t.Errorf("events %v", w.eventReasons())
			}
		})
	}
}

// An abort right after an addPassword whose answer was lost waits for Graph's list, so that the
// secret it may have made is removed too.
func TestAbortWaitsForALostAdd(t *testing.T) {
	w := newWorld(t)
	sent := metav1.NewTime(w.now.Add(-10 * time.Second))
	st := v1alpha1.RotationStatus{Step: v1alpha1.StepStarted, DisplayName: "credwatch-2b9c0c1e-20261203T085950Z", AppID: testApp, AddTime: &sent}
	res, err := w.machine(false).Abort(t.Context(), st, "rotation was turned off")
	if err != nil || res.Status == nil || w.abandoned {
		t.Fatalf("result %+v, err %v: want the abort waiting", res, err)
	}
	w.secrets = append(w.secrets, Secret{KeyID: "k-lost", DisplayName: st.DisplayName})
	w.now = sent.Add(addListLag)
	if _, err := w.machine(false).Abort(t.Context(), *res.Status, "rotation was turned off"); err != nil || !w.abandoned || w.listed("k-lost") {
		t.Errorf("err %v, Graph %+v: want the lost secret removed and the rotation ended", err, w.secrets)
	}
}

// A rotation that starts over after resets were made keeps count of them: it can no more be
// aborted than before, and the failed ones still count towards the hold.
func TestStartingOverKeepsTheResets(t *testing.T) {
	w := newWorld(t)
	st := w.verified()
	st.Resets, st.FailedResets, st.ResetOperation = 2, 2, "op-2"
	w.secrets = slices.DeleteFunc(w.secrets, func(s Secret) bool { return s.KeyID == st.KeyID })
	st, _ = w.run(st, true)
	if st.KeyID == "k-1" || st.Resets < 2 || st.FailedResets != 2 || Abortable(*st) == nil {
		t.Errorf("status %+v: want a new secret, and the resets kept", st)
	}
}

// A reset Resource Manager answered without an operation is named after the new secret too: a
// confirmation set ahead of the hold, or left from an earlier rotation, does not match it.
func TestAHoldIsNamedAfterItsSecret(t *testing.T) {
	w := newWorld(t)
	w.startReset = func(int) (bool, error) {
		return false, &azerr.Error{Status: http.StatusInternalServerError, Err: errors.New("InternalServerError")}
	}
	w.confirmed = "reset-3"
	st := w.verified()
	for range 10 {
		st, _ = w.run(st, true)
		w.now = w.now.Add(25 * time.Hour)
	}
	if st.Step != v1alpha1.StepSecretVerified || st.FailedResets != failedResetsBeforeHold || st.ResetOperation != "reset-3-of-k-1" {
		t.Errorf("status %+v: want it held, the operation named after k-1", st)
	}
}

// A secret removed by hand after it was put in use retires nothing: what still runs on an old
// secret is all that signs in. The rotation starts over with a new secret.
func TestARetirementWhoseNewSecretIsGoneStartsOver(t *testing.T) {
	for _, published := range []bool{false, true} {
		t.Run(fmt.Sprintf("published %v", published), func(t *testing.T) {
			w := newWorld(t)
			st, _ := w.until(nil, false, v1alpha1.StepRetiring, 20)
			if !published {
				// As left by an operator stopped before it handed the secret to the Secret.
				st.RetireTime = nil
			}
			gone := st.KeyID
			w.secrets = slices.DeleteFunc(w.secrets, func(s Secret) bool { return s.KeyID == gone })
			w.now = w.now.Add(8 * 24 * time.Hour)
			st, _ = w.run(st, false)
			if !w.listed("k-old") || st == nil || st.KeyID == gone || st.Step == v1alpha1.StepRetiring || !slices.Contains(w.eventReasons(), EventSecretVanished) {
				t.Errorf("status %+v, Graph %+v, events %v: want a new secret, every old one kept", st, w.secrets, w.eventReasons())
			}
		})
	}
}

// A Secret changed to hold another secret's text under the new keyId (a valid old one, which
// passes a sign-in check) stops the rotation wherever it is: the cluster is not reset onto that
// text, it is not published, and no old secret is retired. Put back, the rotation goes on.
func TestASecretChangedUnderTheRotationStopsIt(t *testing.T) {
	for _, step := range []v1alpha1.RotationStep{v1alpha1.StepSecretStored, v1alpha1.StepSecretVerified, v1alpha1.StepRetiring} {
		t.Run(string(step), func(t *testing.T) {
			w := newWorld(t)
			var st *v1alpha1.RotationStatus
			if step == v1alpha1.StepSecretVerified {
				// Verified and reset in one reconcile, but for a window that was closed.
				st = w.verified()
				expiry := metav1.NewTime(w.now.Add(360 * 24 * time.Hour))
				st.SecretDigest, st.Expiry = secret.New("text-1").Digest(), &expiry
			} else {
				st, _ = w.until(nil, true, step, 10)
			}
			if st.SecretDigest != secret.New("text-1").Digest() {
				t.Fatalf("status keeps digest %q, want the new secret's", st.SecretDigest)
			}
			swap := func(text string) {
				if w.held.KeyID == "k-1" {
					w.heldText = text
				} else {
					w.publishedText = text
				}
			}
			swap("text-of-k-old")
			resets, published := len(w.resets), w.published
			var res Result
			for range 4 {
				st, res = w.run(st, true)
			}
			if len(w.resets) != resets || w.published != published || !w.listed("k-old") {
				t.Errorf("resets %q, published %+v, Graph %+v: want no reset, publication or retirement with the changed text", w.resets, w.published, w.secrets)
			}
			if res.Condition.Reason != v1alpha1.ReasonRotationBlocked || !strings.Contains(res.Condition.Message, "not the secret credwatch made") {
				t.Errorf("condition %+v: want the rotation blocked, saying the Secret was changed", res.Condition)
			}
			swap("text-1")
			for range 10 {
				if st, _ = w.run(st, true); st == nil {
					break
				}
			}
			if st != nil || w.finished == nil || w.listed("k-old") || slices.ContainsFunc(w.resets, func(r string) bool { return r != "text-1" }) {
				t.Errorf("status %+v, resets %q: want the rotation completed with k-1's text once the Secret holds it again", st, w.resets)
			}
		})
	}
}

// A rotation begun before digests were kept has none to compare: Graph's hint of the new secret
// still tells another text from it.
func TestAChangedSecretIsToldByGraphsHint(t *testing.T) {
	w := newWorld(t)
	st := w.verified()
	w.secrets[len(w.secrets)-1].Hint = "tex"
	w.heldText = "xyz-another-secret"
	st, res := w.run(st, true)
	if len(w.resets) != 0 || res.Condition.Reason != v1alpha1.ReasonRotationBlocked || !strings.Contains(res.Condition.Message, "Graph's hint") {
		t.Errorf("resets %q, status %+v, condition %+v: want no reset, and the rotation blocked by the hint", w.resets, st, res.Condition)
	}

	// Nor is such a text published, once the cluster runs on the new secret.
	w = newWorld(t)
	st = w.verified()
	st.Step = v1alpha1.StepRetiring
	w.secrets[len(w.secrets)-1].Hint = "tex"
	w.heldText = "xyz-another-secret"
	if _, res = w.run(st, true); w.published.KeyID != "" || res.Condition.Reason != v1alpha1.ReasonRotationBlocked {
		t.Errorf("published %+v, condition %+v: want nothing published, and the rotation blocked by the hint", w.published, res.Condition)
	}
}
