package rotation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/rotation/pacing"
	"github.com/credwatch/credwatch/internal/target"
)

// runWorld is the world of the machine's tests, with the watch and the edges of a Run around it.
type runWorld struct {
	*world
	obj      *v1alpha1.CredentialWatch
	grantErr error
	ops      []v1alpha1.Operation
	// appsAllowed replaces the identity's allow.applications when set.
	appsAllowed []string
	// identityRef is the identity the spec names, when not "id", the only one there is.
	identityRef string
	finalizer   []bool
	clientsErr  error
	// repos are the GitHub repositories the identity allows.
	repos []string
	// kvWriter is what AzureIdentity kv-writer allows; nil: there is no such identity.
	kvWriter *v1alpha1.IdentityAllow
	// vaultsAs names the identities Key Vaults were reached as, in order.
	vaultsAs []string
	// pace is the application's record; paceLog, what the run did to it, in order.
	pace    pacing.Record
	paceLog []string
}

func newRunWorld(t *testing.T, mode v1alpha1.RotationMode) *runWorld {
	w := newWorld(t)
	checked := metav1.NewTime(w.now.Add(-time.Hour))
	obj := &v1alpha1.CredentialWatch{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "payments", UID: "uid", Generation: 1, Annotations: map[string]string{}},
		Spec: v1alpha1.CredentialWatchSpec{
			Target:   v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{TenantID: "t", ClientID: testApp}},
			Rotation: &v1alpha1.Rotation{Enabled: true, Mode: mode, SecretRef: v1alpha1.SecretName{Name: "payments-sp"}},
		},
		Status: v1alpha1.CredentialWatchStatus{LastCheckTime: &checked,
			Conditions:       []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}},
			ServicePrincipal: &v1alpha1.ServicePrincipalStatus{AppID: testApp, ApplicationObjectID: "a0e1"},
			Credentials: []v1alpha1.Credential{{KeyID: "k-old", Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication,
				EndTime: metav1.NewTime(w.now.Add(5 * 24 * time.Hour))}}},
	}
	return &runWorld{world: w, obj: obj, ops: []v1alpha1.Operation{v1alpha1.OperationRotate}}
}

func (rw *runWorld) edges() Edges {
	m := rw.machine(false)
	apps := []string{testApp}
	if rw.appsAllowed != nil {
		apps = rw.appsAllowed
	}
	named := "id"
	if rw.identityRef != "" {
		named = rw.identityRef
	}
	return Edges{
		Identity: &v1alpha1.IdentityRef{Kind: v1alpha1.KindAzureIdentity, Name: named},
		Grant: func(_ context.Context, ref *v1alpha1.IdentityRef) (access.Grant, error) {
			if ref != nil && ref.Name == "kv-writer" && rw.kvWriter != nil {
				return access.Grant{Namespace: access.Namespace{Name: "team-a"}, Identity: access.Identity{Kind: v1alpha1.KindAzureIdentity, Namespace: "team-a", Name: ref.Name,
					Spec: v1alpha1.IdentitySpec{Allow: *rw.kvWriter}}}, nil
			}
			if ref == nil || ref.Name != "id" {
				return access.Grant{}, errors.New("AzureIdentity team-a/" + named + " does not exist")
			}
			return access.Grant{Namespace: access.Namespace{Name: "team-a"}, Identity: access.Identity{Kind: v1alpha1.KindAzureIdentity, Namespace: "team-a", Name: "id",
				Spec: v1alpha1.IdentitySpec{Allow: v1alpha1.IdentityAllow{Tenants: []string{"t"}, Applications: apps, Operations: rw.ops, GitHubRepositories: rw.repos}}}}, rw.grantErr
		},
		Clients: func(context.Context, access.Grant, Pin) (Clients, error) {
			return Clients{App: m.App, SignIn: m.SignIn}, rw.clientsErr
		},
		Vaults: func(_ context.Context, g access.Grant, _ Pin) (KeyVaults, error) {
			rw.vaultsAs = append(rw.vaultsAs, g.Identity.Name)
			return rw.vaults, nil
		},
		Store: func(string, Pin) Store { return m.Store },
		Ledger: fakeLedger{
			SaveFunc: func(_ context.Context, st v1alpha1.RotationStatus) error {
				rw.saved = append(rw.saved, st)
				rw.obj.Status.Rotation = st.DeepCopy()
				return nil
			},
			FinishFunc: m.Ledger.Finish,
			AbandonFunc: func(ctx context.Context, why string) error {
				// As the controller's ledger does: the rotation ends, and the abort is kept.
				rw.obj.Status.LastAbort = &v1alpha1.LastAbort{Time: metav1.NewTime(rw.now), Reason: why, Generation: rw.obj.Generation}
				return m.Ledger.Abandon(ctx, why)
			},
		},
		Events:    m.Events,
		Finalizer: func(_ context.Context, add bool) error { rw.finalizer = append(rw.finalizer, add); return nil },
		ClusterID: "cluster",
		Pace: fakePacer{
			ReadFunc: func(context.Context, string, string) (pacing.Record, error) { return rw.pace, nil },
			StartedFunc: func(_ context.Context, _ pacing.Record, at time.Time, uid string, _ bool) error {
				rw.pace.LastStart, rw.pace.LastUID = at, uid
				rw.paceLog = append(rw.paceLog, "started")
				return nil
			},
			ReleasedFunc: func(_ context.Context, _ pacing.Record, quiet time.Time, p *pacing.Pending) error {
				rw.pace.QuietUntil, rw.pace.Pending = quiet, p
				rw.paceLog = append(rw.paceLog, "released")
				return nil
			},
			AdoptedFunc: func(context.Context, pacing.Record) error {
				rw.pace.Pending = nil
				rw.paceLog = append(rw.paceLog, fmt.Sprintf("adopted (%d saved before)", len(rw.saved)))
				return nil
			},
		},
	}
}

func (rw *runWorld) reconcile() (time.Time, error) {
	run, err := NewRun(rw.obj, rw.now, rw.edges())
	if err != nil {
		rw.t.Fatal(err)
	}
	return run.Reconcile(context.Background())
}

func TestRunStartsADueRotation(t *testing.T) {
	rw := newRunWorld(t, v1alpha1.RotationApply)
	if _, err := rw.reconcile(); err != nil {
		t.Fatal(err)
	}
	if len(rw.finalizer) != 1 || !rw.finalizer[0] || rw.adds != 1 || rw.obj.Status.Rotation == nil {
		t.Fatalf("finalizer %v, %d secrets added, status %+v; want the finalizer added before the secret", rw.finalizer, rw.adds, rw.obj.Status.Rotation)
	}
	if c := target.Condition(rw.obj, v1alpha1.ConditionRotating); c.Status != metav1.ConditionTrue {
		t.Fatalf("Rotating %+v", c)
	}
}

// A dry run says what it would do, by event once, and touches nothing.
func TestRunDryRunPlans(t *testing.T) {
	rw := newRunWorld(t, v1alpha1.RotationDryRun)
	for range 2 {
		if _, err := rw.reconcile(); err != nil {
			t.Fatal(err)
		}
	}
	c := target.Condition(rw.obj, v1alpha1.ConditionRotating)
	if c.Reason != v1alpha1.ReasonDryRun || rw.adds != 0 || len(rw.finalizer) != 0 || len(rw.events) != 1 || !strings.Contains(rw.events[0], "RotationPlanned") {
		t.Fatalf("Rotating %s, %d adds, finalizer %v, events %q; want a plan told once and nothing made", c.Reason, rw.adds, rw.finalizer, rw.events)
	}
}

// An identity that does not allow rotating pauses the rotation before Azure is asked; the API
// server failing is the reconcile's error, not the rotation's.
func TestRunPaused(t *testing.T) {
	rw := newRunWorld(t, v1alpha1.RotationApply)
	rw.ops = nil
	if _, err := rw.reconcile(); err != nil {
		t.Fatal(err)
	}
	c := target.Condition(rw.obj, v1alpha1.ConditionRotating)
	if c.Reason != v1alpha1.ReasonIdentityNotAllowed || rw.adds != 0 || len(rw.events) != 1 {
		t.Fatalf("Rotating %s (%s), %d adds, events %q", c.Reason, c.Message, rw.adds, rw.events)
	}
	rw.grantErr = &target.KubernetesError{Err: errors.New("connection refused")}
	if _, err := rw.reconcile(); err == nil {
		t.Fatal("want the API server's failure returned")
	}
}

// An identity that no longer allows Rotate withdraws the rotation whose new secret nothing uses
// yet: the secret leaves Graph and the staging Secret, and the event says why. Once the secret is
// in use, the rotation waits for Rotate again instead.
func TestRunRevokedRotateWithdrawsAnUnusedSecret(t *testing.T) {
	dryRun := func(rw *runWorld) { rw.obj.Spec.Rotation.Mode = v1alpha1.RotationDryRun }
	reIdentified := func(rw *runWorld) { rw.identityRef = "gone" }
	aborted := func(rw *runWorld) { rw.obj.Annotations[v1alpha1.AbortRotationAnnotation] = "1" }
	retargeted := func(rw *runWorld) {
		rw.obj.Spec.Target.ServicePrincipal.ClientID = "0f0e0d0c-0b0a-4909-8807-060504030201"
	}
	for _, tc := range []struct {
		name      string
		step      v1alpha1.RotationStep
		ops       []v1alpha1.Operation
		edit      func(*runWorld) // what the watch's author did before the revocation
		withdrawn bool
	}{
		{"secret stored, Rotate revoked", v1alpha1.StepSecretStored, nil, nil, true},
		{"secret in use, Rotate revoked", v1alpha1.StepRetiring, nil, nil, false},
		{"secret stored, the identity refuses the application", v1alpha1.StepSecretStored, []v1alpha1.Operation{v1alpha1.OperationRotate}, nil, false},
		{"secret stored, mode DryRun, Rotate revoked", v1alpha1.StepSecretStored, nil, dryRun, true},
		{"secret stored, target changed, Rotate revoked", v1alpha1.StepSecretStored, nil, retargeted, true},
		{"secret stored, identityRef changed to one that does not exist, Rotate revoked", v1alpha1.StepSecretStored, nil, reIdentified, true},
		{"secret stored, abort asked, Rotate revoked", v1alpha1.StepSecretStored, nil, aborted, true},
		{"begun by an earlier version, Rotate revoked", v1alpha1.StepSecretStored, nil, func(rw *runWorld) { rw.obj.Status.Rotation.SecretDigest = "" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rw := newRunWorld(t, v1alpha1.RotationApply)
			if _, err := rw.reconcile(); err != nil {
				t.Fatal(err)
			}
			added := rw.obj.Status.Rotation.KeyID
			rw.obj.Status.Rotation.Step = tc.step
			rw.ops, rw.events = tc.ops, nil
			rw.now = rw.now.Add(time.Minute) // past the sign-in check's next attempt
			if tc.edit != nil {
				tc.edit(rw)
			}
			if tc.ops != nil {
				rw.appsAllowed = []string{"00000000-0000-0000-0000-00000000beef"}
			}
			if _, err := rw.reconcile(); err != nil {
				t.Fatal(err)
			}
			c := target.Condition(rw.obj, v1alpha1.ConditionRotating)
			withdrawn := !rw.listed(added) && rw.discards == 1 && rw.abandoned
			if withdrawn != tc.withdrawn {
				t.Fatalf("secret %s listed %v, %d discards, abandoned %v (Rotating %s: %s); want withdrawn %v",
					added, rw.listed(added), rw.discards, rw.abandoned, c.Reason, c.Message, tc.withdrawn)
			}
			if tc.withdrawn && (c.Reason != v1alpha1.ReasonRotationAborted || len(rw.events) != 1 || !strings.Contains(rw.events[0], "no longer allows Rotate")) {
				t.Fatalf("Rotating %s, events %q; want the abort told with its cause", c.Reason, rw.events)
			}
			if !tc.withdrawn && (c.Reason != v1alpha1.ReasonIdentityNotAllowed || rw.obj.Status.Rotation == nil) {
				t.Fatalf("Rotating %s, rotation %+v; want it paused where it was", c.Reason, rw.obj.Status.Rotation)
			}
		})
	}
}

// A rotation withdrawn because Rotate was revoked is no abort anyone asked for: once Rotate is
// allowed again, the next one starts by itself, when the pace allows; after an abort asked for,
// none does until the spec changes.
func TestRunStartsAgainOnceRotateIsAllowedAgain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		revoke bool
		starts bool
	}{{"withdrawn on revocation", true, true}, {"aborted by annotation", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			rw := newRunWorld(t, v1alpha1.RotationApply)
			if _, err := rw.reconcile(); err != nil {
				t.Fatal(err)
			}
			rw.now = rw.now.Add(time.Minute) // past the sign-in check's next attempt
			if tc.revoke {
				rw.ops = nil
			} else {
				rw.obj.Annotations[v1alpha1.AbortRotationAnnotation] = "1"
			}
			if _, err := rw.reconcile(); err != nil || rw.obj.Status.Rotation != nil {
				t.Fatalf("rotation %+v, %v; want it withdrawn", rw.obj.Status.Rotation, err)
			}
			rw.ops = []v1alpha1.Operation{v1alpha1.OperationRotate}
			rw.now = rw.now.Add(25 * time.Hour) // past the day's pace
			adds := rw.adds
			if _, err := rw.reconcile(); err != nil {
				t.Fatal(err)
			}
			if started := rw.adds > adds; started != tc.starts {
				t.Fatalf("a new rotation started: %v, want %v (Rotating %+v)", started, tc.starts, target.Condition(rw.obj, v1alpha1.ConditionRotating))
			}
		})
	}
}

// A rotation whose identity is gone can still be aborted with the identity the spec names now,
// if that one allows rotating the application: removing the unused secret takes rights away.
func TestRunAbortWithTheSpecsIdentityWhenThePinnedOneIsGone(t *testing.T) {
	for _, specRotates := range []bool{true, false} {
		rw := newRunWorld(t, v1alpha1.RotationApply)
		if _, err := rw.reconcile(); err != nil {
			t.Fatal(err)
		}
		added := rw.obj.Status.Rotation.KeyID
		rw.obj.Status.Rotation.Identity = &v1alpha1.IdentityRef{Kind: v1alpha1.KindAzureIdentity, Name: "deleted"}
		rw.obj.Annotations[v1alpha1.AbortRotationAnnotation] = "1"
		if !specRotates {
			rw.ops = []v1alpha1.Operation{v1alpha1.OperationReadOwners}
		}
		if _, err := rw.reconcile(); err != nil {
			t.Fatal(err)
		}
		if withdrawn := !rw.listed(added) && rw.abandoned; withdrawn != specRotates {
			t.Fatalf("the spec's identity allows Rotate: %v; secret %s withdrawn %v (Rotating %+v)",
				specRotates, added, withdrawn, target.Condition(rw.obj, v1alpha1.ConditionRotating))
		}
	}
}

// A rotation an earlier version began, without an identity, is pinned to the spec's at once.
func TestRunPinsTheIdentityOfAnEarlierRotation(t *testing.T) {
	rw := newRunWorld(t, v1alpha1.RotationApply)
	if _, err := rw.reconcile(); err != nil {
		t.Fatal(err)
	}
	rw.obj.Status.Rotation.Identity = nil
	rw.obj.Spec.Rotation.Mode = v1alpha1.RotationDryRun // it writes no step
	if _, err := rw.reconcile(); err != nil {
		t.Fatal(err)
	}
	if got := rw.obj.Status.Rotation.Identity; got == nil || got.Name != "id" {
		t.Fatalf("status.rotation.identity = %+v, want the spec's, id", got)
	}
}

// A watch deleted after its identity lost Rotate still withdraws the secret nothing uses yet,
// rather than letting go of it live.
func TestRunFinalizeRevokedWithdraws(t *testing.T) {
	rw := newRunWorld(t, v1alpha1.RotationApply)
	if _, err := rw.reconcile(); err != nil {
		t.Fatal(err)
	}
	added := rw.obj.Status.Rotation.KeyID
	rw.ops = nil
	run, _ := NewRun(rw.obj, rw.now, rw.edges())
	if _, err := run.Finalize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rw.listed(added) || !rw.abandoned || rw.finalizer[len(rw.finalizer)-1] {
		t.Fatalf("secret %s listed %v, abandoned %v, finalizer %v; want the secret removed and the watch let go", added, rw.listed(added), rw.abandoned, rw.finalizer)
	}
}

// A deleted watch whose rotation added a secret no cluster uses withdraws it, then lets go.
func TestRunFinalize(t *testing.T) {
	rw := newRunWorld(t, v1alpha1.RotationApply)
	if _, err := rw.reconcile(); err != nil {
		t.Fatal(err)
	}
	added := rw.obj.Status.Rotation.KeyID
	run, _ := NewRun(rw.obj, rw.now, rw.edges())
	if _, err := run.Finalize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rw.listed(added) || !rw.abandoned || rw.finalizer[len(rw.finalizer)-1] {
		t.Fatalf("secret %s listed %v, abandoned %v, finalizer %v; want the secret removed and the watch let go", added, rw.listed(added), rw.abandoned, rw.finalizer)
	}
}

// A deleted watch whose identity no longer allows the application lets go at once, saying what
// it left.
func TestRunFinalizeNotAllowed(t *testing.T) {
	rw := newRunWorld(t, v1alpha1.RotationApply)
	if _, err := rw.reconcile(); err != nil {
		t.Fatal(err)
	}
	rw.appsAllowed, rw.events = []string{"00000000-0000-0000-0000-00000000beef"}, nil
	run, _ := NewRun(rw.obj, rw.now, rw.edges())
	if _, err := run.Finalize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rw.obj.Status.Rotation.DeletionSeenTime == nil || rw.finalizer[len(rw.finalizer)-1] || len(rw.events) != 1 ||
		!strings.Contains(rw.events[0], "RotationReleased") || !strings.Contains(rw.events[0], "still in Graph") {
		t.Fatalf("events %q, finalizer %v, status %+v", rw.events, rw.finalizer, rw.obj.Status.Rotation)
	}
}

// No rotation of an application starts within a day of the last one, by any watch, nor before a
// released rotation's grace period ends; Rotating says until when, and the run asks to be back
// then.
func TestRunIsPaced(t *testing.T) {
	for _, tc := range []struct {
		name              string
		lastStart, quiet  time.Duration // from now; zero: none
		byThisWatch       bool          // the last start was this watch's
		finished          bool          // and the watch's status tells it ended
		wantPaced         bool
		wantBack          time.Duration
		wantMessageSaying string
	}{
		{name: "never rotated"},
		{name: "rotated a day ago", lastStart: -24 * time.Hour},
		{name: "rotated an hour ago", lastStart: -time.Hour, wantPaced: true, wantBack: 23 * time.Hour, wantMessageSaying: "at most one starts a day"},
		{name: "this watch died after recording its start", lastStart: -time.Hour, byThisWatch: true},
		{name: "this watch rotated two hours ago", lastStart: -2 * time.Hour, byThisWatch: true, finished: true, wantPaced: true, wantBack: 22 * time.Hour,
			wantMessageSaying: "at most one starts a day"},
		{name: "a released rotation's grace runs", lastStart: -48 * time.Hour, quiet: 2 * time.Hour, wantPaced: true, wantBack: 2 * time.Hour,
			wantMessageSaying: "keeps its old secrets until"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rw := newRunWorld(t, v1alpha1.RotationApply)
			if tc.lastStart != 0 {
				rw.pace.LastStart = rw.now.Add(tc.lastStart)
			}
			if tc.quiet != 0 {
				rw.pace.QuietUntil = rw.now.Add(tc.quiet)
			}
			if tc.byThisWatch {
				rw.pace.LastUID = string(rw.obj.UID)
			}
			if tc.finished {
				rw.obj.Status.LastRotation = &v1alpha1.LastRotation{Time: metav1.NewTime(rw.now.Add(-90 * time.Minute)), KeyID: "k-old"}
			}
			next, err := rw.reconcile()
			if err != nil {
				t.Fatal(err)
			}
			c := target.Condition(rw.obj, v1alpha1.ConditionRotating)
			if paced := c.Reason == v1alpha1.ReasonRotationPaced; paced != tc.wantPaced {
				t.Fatalf("Rotating %s (%s); want paced %v", c.Reason, c.Message, tc.wantPaced)
			}
			if !tc.wantPaced {
				// A restart keeps the day its first start began, so that withdrawing and asking
				// again does not hold the application's other watches day after day.
				start := rw.now
				if tc.byThisWatch {
					start = rw.now.Add(tc.lastStart)
				}
				if rw.adds != 1 || len(rw.paceLog) != 1 || rw.paceLog[0] != "started" || !rw.pace.LastStart.Equal(start) {
					t.Fatalf("%d adds, pace %v at %v; want the start recorded at %v and a secret added", rw.adds, rw.paceLog, rw.pace.LastStart, start)
				}
				return
			}
			if rw.adds != 0 || len(rw.paceLog) != 0 || !next.Equal(rw.now.Add(tc.wantBack)) || !strings.Contains(c.Message, tc.wantMessageSaying) ||
				!strings.Contains(c.Message, v1alpha1.LiftPacingAnnotation) {
				t.Fatalf("%d adds, pace %v, back at %v, Rotating %q; want nothing made, back in %v, saying why and how to lift it",
					rw.adds, rw.paceLog, next, c.Message, tc.wantBack)
			}
		})
	}
}

// A deleted watch that lets go of its rotation at Retiring records its retirement and grace;
// the watch created again under its name takes the retirement on, the record first, so that it
// is never done twice.
func TestRunReleasedRetirementIsAdopted(t *testing.T) {
	rw := newRunWorld(t, v1alpha1.RotationApply)
	rw.secrets = append(rw.secrets, Secret{KeyID: "k-ours", DisplayName: "credwatch-2b9c0c1e-20251201T000000Z", End: rw.now.Add(5 * 24 * time.Hour)})
	now := rw.now
	retire := metav1.NewTime(now.Add(7 * 24 * time.Hour))
	if _, err := rw.reconcile(); err != nil {
		t.Fatal(err)
	}
	st := rw.obj.Status.Rotation.DeepCopy()
	st.Step, st.Resets, st.RetireTime = v1alpha1.StepRetiring, 1, &retire
	rw.obj.Status.Rotation = st
	rw.ops = nil // the identity no longer allows it: the watch lets go at once
	run, _ := NewRun(rw.obj, rw.now, rw.edges())
	if _, err := run.Finalize(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := rw.pace.Pending
	if p == nil || p.Namespace != "team-a" || p.Watch != "payments" || p.Status.KeyID != st.KeyID || p.Status.DeletionSeenTime != nil ||
		!rw.pace.QuietUntil.Equal(retire.Time) {
		t.Fatalf("pace %+v, pending %+v; want the retirement and its grace recorded", rw.pace, p)
	}
	last := rw.events[len(rw.events)-1]
	if !strings.Contains(last, "RotationReleased") || !strings.Contains(last, "retires the old secrets then") {
		t.Fatalf("event %q; want the release to say who finishes the retirement", last)
	}

	// Created again: the same name, a new object.
	rw.ops = []v1alpha1.Operation{v1alpha1.OperationRotate}
	rw.obj.UID, rw.obj.Status.Rotation, rw.obj.Status.LastRotation = "uid-2", nil, nil
	rw.paceLog = nil
	rw.saved = nil
	if _, err := rw.reconcile(); err != nil {
		t.Fatal(err)
	}
	if got := rw.obj.Status.Rotation; got == nil || got.Step != v1alpha1.StepRetiring || got.KeyID != st.KeyID || rw.pace.Pending != nil ||
		len(rw.paceLog) != 1 || rw.paceLog[0] != "adopted (0 saved before)" {
		t.Fatalf("rotation %+v, pace log %v; want the retirement adopted, the record let go of first", got, rw.paceLog)
	}
	if rw.adds != 1 {
		t.Fatalf("%d secrets added; adopting adds none", rw.adds)
	}
}

// A secret named under the watch's UID, as earlier versions named them, was made for the target
// the watch named then: only a watch never edited since is sure to name the same one.
func TestRunClaimsEarlierNamingOnlyUnedited(t *testing.T) {
	for _, tc := range []struct {
		generation int64
		claims     bool
	}{{1, true}, {2, false}} {
		rw := newRunWorld(t, v1alpha1.RotationApply)
		rw.obj.Generation = tc.generation
		run, err := NewRun(rw.obj, rw.now, rw.edges())
		if err != nil {
			t.Fatal(err)
		}
		got := run.prefixes()
		if claims := slices.Contains(got, policy.WatchPrefix("uid")); claims != tc.claims {
			t.Errorf("generation %d: prefixes %q claim the earlier naming: %v, want %v", tc.generation, got, claims, tc.claims)
		}
		if got[0] != policy.SecretPrefix("cluster", "team-a", "payments", "") {
			t.Errorf("generation %d: prefixes %q do not start with today's", tc.generation, got)
		}
	}
}
