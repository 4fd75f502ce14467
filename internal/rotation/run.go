package rotation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/rotation/pacing"
	"github.com/credwatch/credwatch/internal/secret"
	"github.com/credwatch/credwatch/internal/target"
)

// Edges are what one reconcile of a watch's rotation reaches beyond its machine: the watch's
// identity, Azure as that identity sees it, the Secrets of the watch's namespace, the watch's
// status and finalizer, and its events. The controller provides them.
type Edges struct {
	// Identity is the identity the watch's spec names, or the operator's default one; nil: none.
	Identity *v1alpha1.IdentityRef
	// Grant finds the identity ref, as the watch may use it.
	Grant func(ctx context.Context, ref *v1alpha1.IdentityRef) (access.Grant, error)
	// Clients are the pinned application and cluster, as g signs in to pin's tenant. On error
	// the rotation's step is not tried.
	Clients func(ctx context.Context, g access.Grant, pin Pin) (Clients, error)
	// Vaults are the Key Vaults as g signs in to pin's tenant: for a Key Vault sink with an
	// identityRef of its own.
	Vaults func(ctx context.Context, g access.Grant, pin Pin) (KeyVaults, error)
	// Store keeps the new secret of pin's application for the Secret named secretName.
	Store func(secretName string, pin Pin) Store
	// Ledger writes the rotation to the watch's status with an optimistic lock.
	Ledger Ledger
	Events Events
	// Finalizer adds the rotation's finalizer to the watch, or removes it.
	Finalizer func(ctx context.Context, add bool) error
	// ClusterID names this cluster in the secrets a rotation creates (see policy.SecretPrefix).
	ClusterID string
	// Pace keeps each application's record of rotations, beyond any watch.
	Pace Pacer
	// GitHub sets Actions secrets, with the tokens Token reads from the watch's namespace; nil
	// when the operator publishes to no GitHub.
	GitHub GitHubSecrets
	Token  func(ctx context.Context, ref v1alpha1.SecretKeyRef) (secret.Text, error)
}

// Pacer keeps the record of each application's rotations (package pacing): read before a
// rotation starts, written as it starts and when a deleted watch lets go of one.
type Pacer interface {
	Read(ctx context.Context, tenantID, appID string) (pacing.Record, error)
	Started(ctx context.Context, rec pacing.Record, at time.Time, uid string, spendLift bool) error
	Released(ctx context.Context, rec pacing.Record, quietUntil time.Time, p *pacing.Pending) error
	Adopted(ctx context.Context, rec pacing.Record) error
}

// Clients are what a rotation changes in Azure, bound to the watch's identity.
type Clients struct {
	App Application
	// Cluster is the pinned cluster; nil when the rotation has none.
	Cluster Cluster
	// SignIn reports whether Entra accepts the application's secret text now.
	SignIn func(ctx context.Context, text secret.Text) error
	// Vaults reach the Key Vaults of spec.rotation.publish as the identity; nil when it has none.
	Vaults KeyVaults
}

// Timeout bounds the Azure calls of one reconcile's rotation steps.
const Timeout = 2 * time.Minute

// Event reasons of a run besides its machine's.
const (
	eventPlanned      = "RotationPlanned"
	eventAbortRefused = "RotationAbortRefused"
	eventReleased     = "RotationReleased"
	eventAdopted      = "RotationAdopted"
)

// Wanted reports whether the watch has a rotation to start or to finish.
func Wanted(obj *v1alpha1.CredentialWatch) bool {
	spec := obj.Spec.Rotation
	return spec != nil && spec.Enabled || obj.Status.Rotation != nil
}

// Run is one reconcile's rotation of a watch: the watch, its settings, and what the rotation is
// about (pinned when it started, or the spec's when none is in progress). Every step is written
// to status, with an optimistic lock, before the next begins: an operator that stops anywhere
// finds where it was, and one working from a stale copy cannot write at all.
type Run struct {
	e    Edges
	obj  *v1alpha1.CredentialWatch
	spec v1alpha1.Rotation
	rs   policy.RotationSettings
	pin  Pin
	now  time.Time
}

// NewRun is the rotation of obj at now, with its spec's settings; a rotation turned off by
// removing spec.rotation is finished with the defaults. An error names a duration that does not
// parse (the API server validates them), and the run has the settings parsed before it.
func NewRun(obj *v1alpha1.CredentialWatch, now time.Time, e Edges) (*Run, error) {
	var spec v1alpha1.Rotation
	if s := obj.Spec.Rotation; s != nil {
		spec = *s
	}
	rs, err := policy.RotationSettingsOf(spec)
	pin := SpecPin(obj)
	pin.Identity = e.Identity.DeepCopy()
	return &Run{e: e, obj: obj, spec: spec, rs: rs, now: now, pin: pin}, err
}

// Reconcile starts a rotation that is due, or moves the one in progress on.
func (ro *Run) Reconcile(ctx context.Context) (time.Time, error) {
	if ro.obj.Status.Rotation == nil {
		return ro.maybeStart(ctx)
	}
	return ro.resume(ctx, *ro.obj.Status.Rotation.DeepCopy())
}

// pinTo makes the run about the rotation in progress st, filling in what st did not pin (a
// rotation begun before tenants were pinned), and returns the spec's pin, to compare.
func (ro *Run) pinTo(st *v1alpha1.RotationStatus) Pin {
	spec := ro.pin
	ro.pin = PinOf(*st, spec)
	st.TenantID, st.Cluster, st.Identity = ro.pin.TenantID, ro.pin.Cluster, ro.pin.Identity
	if cur := ro.obj.Status.Rotation; cur != nil && cur.Identity == nil && st.Identity != nil {
		// One an earlier version began is pinned now, by the deferred patch, not at its next step.
		cur.Identity = st.Identity.DeepCopy()
	}
	if st.SecretName != "" {
		ro.spec.SecretRef.Name = st.SecretName
	}
	return spec
}

func (ro *Run) condition(status metav1.ConditionStatus, reason, message string) {
	target.SetCondition(ro.obj, v1alpha1.ConditionRotating, status, reason, message, ro.now)
}

// maybeStart starts a rotation that has fallen due, or been asked for, when nothing blocks it.
func (ro *Run) maybeStart(ctx context.Context) (time.Time, error) {
	obj := ro.obj
	if h := WhyNotStart(obj, ro.pin, ro.spec, ro.rs.RotateBefore, ro.now); h != nil {
		ro.condition(metav1.ConditionFalse, h.Reason, h.Message)
		return h.Next, nil
	}
	g, err := ro.authorize(ctx, true)
	if err != nil {
		return ro.paused(err)
	}
	if _, err := ro.store().Held(ctx); err != nil {
		return ro.paused(err)
	}
	rec, err := ro.e.Pace.Read(ctx, ro.pin.TenantID, ro.pin.AppID)
	if errors.Is(err, pacing.ErrNoNamespace) {
		return ro.paused(err)
	}
	if err != nil {
		return time.Time{}, &target.KubernetesError{Err: err}
	}
	// A retirement left is taken on while its grace period runs; later, the cluster may have been
	// moved since, and it is left to people, as the release said.
	if p := rec.Pending; p != nil && ro.now.Before(rec.QuietUntil) && p.Namespace == obj.Namespace && p.Watch == obj.Name &&
		TargetChange(PinOf(p.Status, ro.pin), ro.pin) == "" {
		return ro.adopt(ctx, rec)
	}
	if h := Paced(obj, rec, ro.now); h != nil {
		ro.condition(metav1.ConditionFalse, h.Reason, h.Message)
		return h.Next, nil
	}
	if ro.spec.Mode == v1alpha1.RotationDryRun {
		plan := Plan(obj, ro.pin, ro.spec, ro.rs, ro.prefixes(), ro.now) + ro.trySinks(ctx, g)
		if prev := meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionRotating); prev == nil || prev.Message != plan {
			ro.e.Events.Event(corev1.EventTypeNormal, eventPlanned, plan)
		}
		ro.condition(metav1.ConditionFalse, v1alpha1.ReasonDryRun, plan)
		return time.Time{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	m, err := ro.machine(ctx, g)
	if err != nil {
		// Nothing was made yet: the rotation starts once the identity can reach Azure.
		if _, perr := ro.paused(err); perr != nil {
			return time.Time{}, perr
		}
		return ro.now.Add(policy.PropagationBackoff(1)), nil
	}
	if err := ro.e.Finalizer(ctx, true); err != nil {
		return time.Time{}, err
	}
	// Recorded before anything is made: a conflict means another watch of the application
	// started one meanwhile, and this one reads the record again.
	at, spend := StartOf(obj, rec, ro.now)
	if err := ro.e.Pace.Started(ctx, rec.WithPrefix(ro.prefixes()[0]), at, string(obj.UID), spend); err != nil {
		return time.Time{}, &target.KubernetesError{Err: err}
	}
	logr.FromContextOrDiscard(ctx).Info("Starting rotation")
	res, err := m.Start(ctx, ro.pin, Asked{Rotate: obj.Annotations[v1alpha1.RotateAnnotation], Abort: obj.Annotations[v1alpha1.AbortRotationAnnotation]})
	return ro.apply(res, err, "")
}

// adopt takes on the retirement that the deleted watch of this name left in the record rec: the
// record lets go of it first, so that no crash has two watches, or one twice, retire by it.
func (ro *Run) adopt(ctx context.Context, rec pacing.Record) (time.Time, error) {
	st := *rec.Pending.Status.DeepCopy()
	st.Identity = ro.pin.Identity.DeepCopy() // the watch's own, which allowed taking it on
	if err := ro.e.Finalizer(ctx, true); err != nil {
		return time.Time{}, err
	}
	if err := ro.e.Pace.Adopted(ctx, rec); err != nil {
		return time.Time{}, &target.KubernetesError{Err: err}
	}
	if err := ro.e.Ledger.Save(ctx, st); err != nil {
		return time.Time{}, err
	}
	ro.obj.Status.Rotation = &st
	msg := Adopted(st)
	ro.e.Events.Event(corev1.EventTypeNormal, eventAdopted, msg)
	ro.condition(metav1.ConditionTrue, string(st.Step), msg)
	return ro.now.Add(time.Second), nil
}

// resume moves the rotation in progress st on, or aborts it when asked and it still can be.
func (ro *Run) resume(ctx context.Context, st v1alpha1.RotationStatus) (time.Time, error) {
	obj := ro.obj
	spec := ro.pinTo(&st)
	if s := SignInsOf(obj, st.AppID); s != nil && s.Unavailable == "" && !st.SignInsGated {
		// Readable once, gated for good, even while the step waits (see Machine.quiet).
		st.SignInsGated, obj.Status.Rotation.SignInsGated = true, true
	}
	// Asked first: whatever the spec says now (an abort, DryRun, another target), a secret
	// nothing uses goes once its identity no longer allows Rotate.
	if wg, ok, err := ro.revoked(ctx, st); err != nil || ok {
		if err != nil {
			return time.Time{}, err
		}
		if t := st.NextAttemptTime; t != nil && ro.now.Before(t.Time) {
			return t.Time, nil
		}
		return ro.drive(ctx, st, wg, "", func(ctx context.Context, m *Machine) (Result, error) {
			return m.Abort(ctx, st, whyRevoked)
		})
	}
	if why, value := AbortAsked(obj, st); why != "" {
		if err := Abortable(st); err == nil {
			return ro.abort(ctx, st, why)
		} else if value != st.AbortRequest {
			st.AbortRequest = value
			obj.Status.Rotation.AbortRequest = value // written by the deferred patch: refused once, said once
			ro.e.Events.Event(corev1.EventTypeWarning, eventAbortRefused, AbortRefused(why, err))
		}
	}
	if ro.spec.Mode == v1alpha1.RotationDryRun {
		ro.condition(metav1.ConditionFalse, string(st.Step), DryRunWaits(st.Step))
		return time.Time{}, nil
	}
	changed := TargetChange(ro.pin, spec)
	if changed != "" && st.Resets == 0 {
		msg := TargetChanged(st.Step, changed)
		if prev := target.Condition(obj, v1alpha1.ConditionRotating); prev.Reason != v1alpha1.ReasonRotationTargetChanged {
			ro.e.Events.Event(corev1.EventTypeWarning, v1alpha1.ReasonRotationTargetChanged, msg)
		}
		ro.condition(metav1.ConditionFalse, v1alpha1.ReasonRotationTargetChanged, msg)
		return time.Time{}, nil
	}
	if t := st.NextAttemptTime; t != nil && ro.now.Before(t.Time) {
		return t.Time, nil
	}
	g, err := ro.authorize(ctx, true)
	if err != nil {
		return ro.paused(err)
	}
	return ro.drive(ctx, st, g, changed, func(ctx context.Context, m *Machine) (Result, error) {
		return m.Advance(ctx, st)
	})
}

// drive runs act on a machine for the rotation st with the watch's identity g, which allows it,
// and applies the result.
func (ro *Run) drive(ctx context.Context, st v1alpha1.RotationStatus, g access.Grant, changed string,
	act func(context.Context, *Machine) (Result, error)) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	m, err := ro.machine(ctx, g)
	if err != nil {
		return ro.apply(m.Unreachable(st, err), nil, changed)
	}
	res, err := act(ctx, m)
	return ro.apply(res, err, changed)
}

// apply puts where the machine got to into the watch's status and Rotating condition.
func (ro *Run) apply(res Result, err error, changed string) (time.Time, error) {
	if err != nil {
		return time.Time{}, err
	}
	ro.obj.Status.Rotation = res.Status
	c := res.Condition
	if changed != "" && c.Status == metav1.ConditionTrue {
		c = WithChange(c, changed, res.Status.Step)
	}
	ro.condition(c.Status, c.Reason, c.Message)
	return res.Next, nil
}

// prefixes start the names of every secret of the watch's: under today's naming, which names the
// AKS cluster too, and, for a watch whose spec was never edited (generation 1), under its UID, as
// rotations named them before: only then is the target the one such a secret was made for. An
// edited watch may have moved from an AKS cluster to its service principal, and would retire the
// secret the old cluster still signs in with; its secrets of the earlier naming are left to
// people (docs/upgrading.md).
func (ro *Run) prefixes() []string {
	var cluster string
	if c := ro.pin.Cluster; c != nil {
		cluster = c.SubscriptionID + "/" + c.ResourceGroup + "/" + c.Name
	}
	own := []string{policy.SecretPrefix(ro.e.ClusterID, ro.obj.Namespace, ro.obj.Name, cluster)}
	if ro.obj.Generation == 1 {
		own = append(own, policy.WatchPrefix(string(ro.obj.UID)))
	}
	return own
}

func (ro *Run) store() Store { return ro.e.Store(ro.spec.SecretRef.Name, ro.pin) }

// machine binds a machine to the watch: its identity g, the pinned application and cluster, the
// Secrets and the watch's status. On error the machine has no clients, and serves only to record
// that its step could not be tried.
func (ro *Run) machine(ctx context.Context, g access.Grant) (*Machine, error) {
	prefixes := ro.prefixes()
	m := &Machine{Store: ro.store(), Ledger: ro.e.Ledger, Events: ro.e.Events, Now: ro.now,
		Settings: Settings{
			Validity: ro.rs.Validity, GracePeriod: ro.rs.GracePeriod, Window: ro.spec.MaintenanceWindow, RemoveOld: ro.spec.RemoveOld,
			Prefix: prefixes[0], Prefixes: prefixes[1:], Target: compose.TargetName(ro.obj), Watch: ro.obj.Name,
			SecretNamespace: ro.obj.Namespace, SecretName: ro.spec.SecretRef.Name, StagingName: StagingName(ro.obj.Name),
			ConfirmReset: ro.obj.Annotations[v1alpha1.ConfirmResetAnnotation],
			SignIns:      SignInsOf(ro.obj, ro.pin.AppID),
			Publish:      ro.spec.Publish,
		},
	}
	c, err := ro.e.Clients(ctx, g, ro.pin)
	if err != nil {
		return m, err
	}
	m.App, m.Cluster, m.SignIn = c.App, c.Cluster, c.SignIn
	m.Vaults = func(ctx context.Context, kv *v1alpha1.KeyVaultSink) (KeyVaults, error) {
		sg, err := ro.sinkGrant(ctx, g, kv)
		switch {
		case err != nil:
			return nil, err
		case kv.IdentityRef == nil && c.Vaults != nil:
			return c.Vaults, nil
		case kv.IdentityRef != nil && ro.e.Vaults != nil:
			return ro.e.Vaults(ctx, sg, ro.pin)
		}
		return nil, errNoVaults
	}
	if ro.e.GitHub != nil {
		m.GitHub, m.Token = ro.e.GitHub, ro.e.Token
	}
	return m, nil
}

// StagingName names the staging Secret of the watch called watch.
func StagingName(watch string) string {
	const prefix = "credwatch-rotation-"
	name := prefix + watch
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(watch))
	return name[:validation.DNS1123SubdomainMaxLength-9] + "-" + hex.EncodeToString(sum[:4])
}
