package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/secret"
)

// Keys of the Secret a rotation writes.
const (
	rotatedKeyTenantID     = "tenantID"
	rotatedKeyClientID     = "clientID"
	rotatedKeyClientSecret = "clientSecret"
	rotatedKeyKeyID        = "keyID"
	rotatedKeyExpiry       = "expiry"
)

// Event reasons of rotation.
const (
	eventRotationStarted        = "RotationStarted"
	eventRotationPlanned        = "RotationPlanned"
	eventRotationOrphanRemoved  = "RotationOrphanRemoved"
	eventRotationClusterFailed  = "RotationClusterFailed"
	eventRotationStepFailed     = "RotationStepFailed"
	eventRotationSecretVanished = "RotationSecretVanished"
	eventRotated                = "Rotated"
)

// rotationTimeout bounds the Azure calls of one reconcile's rotation steps.
const rotationTimeout = 2 * time.Minute

// storeTimeout bounds writing a new secret to its Secret, which a stopping operator still does.
const storeTimeout = 15 * time.Second

// clusterPollInterval is how often an AKS reset in progress is looked at; resets take minutes.
const clusterPollInterval = 30 * time.Second

// rotation carries what one reconcile's rotation steps share.
type rotation struct {
	r      *CredentialWatchReconciler
	w      *watchState
	obj    *v1alpha1.CredentialWatch
	stored *v1alpha1.CredentialWatch
	spec   v1alpha1.Rotation
	rs     policy.RotationSettings
	st     v1alpha1.RotationStatus
	// app and aks are the application and, for an AKS target, the cluster, as the watch's
	// identity sees them; set once the rotation acts.
	app     graph.AppClient
	aks     aks.ClusterClient
	appID   string
	appOID  string
	tenant  string
	cluster *v1alpha1.AKSClusterTarget
	now     time.Time
	// stuck: the last failure was one retrying does not mend.
	stuck bool
}

// reconcileRotation starts a rotation when one is due and moves the one in progress on by as
// many steps as it can. Every step is written to status, with an optimistic lock, before the next
// begins: an operator that stops anywhere finds where it was, and one working from a stale copy
// cannot write at all. Secret values go from Graph's answer to the target Secret and to the AKS
// request, and nowhere else.
func (r *CredentialWatchReconciler) reconcileRotation(ctx context.Context, w *watchState) (time.Time, error) {
	obj, stored, now := w.obj, w.stored, w.now
	spec := obj.Spec.Rotation
	if spec == nil || !spec.Enabled {
		if obj.Status.Rotation == nil {
			meta.RemoveStatusCondition(&obj.Status.Conditions, v1alpha1.ConditionRotating)
		} else {
			setCondition(obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, string(obj.Status.Rotation.Step),
				"Rotation is turned off; the rotation in progress resumes where it stopped when it is turned on again", now)
		}
		return time.Time{}, nil
	}
	rs, err := policy.RotationSettingsOf(*spec)
	if err != nil {
		return time.Time{}, reconcile.TerminalError(err)
	}
	ro := &rotation{r: r, w: w, obj: obj, stored: stored, spec: *spec, rs: rs, now: now,
		tenant: obj.Spec.Target.TenantID(), appID: obj.AppID(), cluster: obj.Spec.Target.AKSCluster}
	if sp := obj.Status.ServicePrincipal; sp != nil {
		ro.appOID = sp.ApplicationObjectID
	}
	if obj.Status.Rotation == nil {
		return ro.maybeStart(ctx)
	}
	ro.st = *obj.Status.Rotation.DeepCopy()
	ro.appID, ro.appOID = ro.st.AppID, ro.st.ApplicationObjectID
	if pinned := ro.st.Cluster; pinned != nil && (ro.cluster == nil || !sameCluster(*pinned, ro.cluster)) {
		ro.cluster = nil // the cluster steps wait for the pinned cluster to be named again
	}
	if spec.Mode == v1alpha1.RotationDryRun {
		setCondition(obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, string(ro.st.Step),
			"The mode is DryRun: the rotation in progress waits at step "+string(ro.st.Step)+" and writes nothing until the mode is Apply", now)
		return time.Time{}, nil
	}
	if t := ro.st.NextAttemptTime; t != nil && now.Before(t.Time) {
		ro.report()
		return t.Time, nil
	}
	g, err := ro.authorize(ctx)
	if err != nil {
		return ro.paused(err)
	}
	ctx, cancel := context.WithTimeout(ctx, rotationTimeout)
	defer cancel()
	if err := ro.connect(ctx, g); err != nil {
		return ro.fail(err, policy.PropagationBackoff(ro.st.Failures+1))
	}
	return ro.advance(ctx)
}

// maybeStart starts a rotation that has fallen due, or been asked for, when nothing blocks it.
func (ro *rotation) maybeStart(ctx context.Context) (time.Time, error) {
	obj, now := ro.obj, ro.now
	request := obj.Annotations[v1alpha1.RotateAnnotation]
	requested := policy.RotationRequested(request, obj.Status.LastRotation)
	dueAt := policy.RotationDueAt(obj.Status.Credentials, ro.rs.RotateBefore, now)
	if obj.Status.LastCheckTime == nil || (!requested && now.Before(dueAt)) {
		msg := "No rotation due"
		if obj.Status.LastCheckTime != nil {
			msg = "Next rotation due at " + dueAt.UTC().Format(time.RFC3339)
		}
		setCondition(obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonIdle, msg, now)
		if obj.Status.LastCheckTime == nil {
			return time.Time{}, nil
		}
		return dueAt, nil
	}
	if why := ro.blocked(); why != "" {
		setCondition(obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonRotationBlocked, why, now)
		return time.Time{}, nil
	}
	if _, _, err := policy.InWindow(ro.spec.MaintenanceWindow, now); err != nil {
		// Found now, not after a secret was created for a reset that could never be scheduled.
		setCondition(obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonRotationBlocked,
			"A rotation is due, but spec.rotation."+err.Error()+": fix it, and the rotation starts", now)
		return time.Time{}, nil
	}
	g, err := ro.authorize(ctx)
	if err != nil {
		return ro.paused(err)
	}
	if _, err := ro.held(ctx); err != nil {
		return ro.paused(err)
	}
	if ro.spec.Mode == v1alpha1.RotationDryRun {
		plan := ro.plan()
		prev := meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionRotating)
		if prev == nil || prev.Message != plan {
			ro.r.Recorder.Event(obj, corev1.EventTypeNormal, eventRotationPlanned, plan)
		}
		setCondition(obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonDryRun, plan, now)
		return time.Time{}, nil
	}
	ro.st = v1alpha1.RotationStatus{
		Step:                v1alpha1.StepStarted,
		DisplayName:         policy.NewSecretName(string(obj.UID), now),
		AppID:               ro.appID,
		ApplicationObjectID: ro.appOID,
		StartTime:           metav1.NewTime(now),
		Request:             request,
		Message:             "Adding a new secret to the application",
	}
	if c := ro.cluster; c != nil {
		ro.st.Cluster = &v1alpha1.RotationCluster{SubscriptionID: c.SubscriptionID, ResourceGroup: c.ResourceGroup, Name: c.Name}
	}
	if err := ro.save(ctx); err != nil {
		return time.Time{}, err
	}
	ctrl.LoggerFrom(ctx).Info("Starting rotation", "secret", ro.st.DisplayName)
	ro.r.Recorder.Eventf(obj, corev1.EventTypeNormal, eventRotationStarted, "Rotating the client secret of %s: the new one is %q", compose.TargetName(obj), ro.st.DisplayName)
	ctx, cancel := context.WithTimeout(ctx, rotationTimeout)
	defer cancel()
	if err := ro.connect(ctx, g); err != nil {
		return ro.fail(err, policy.PropagationBackoff(1))
	}
	return ro.advance(ctx)
}

// authorize finds the watch's identity and checks that it allows what the rotation does from its
// step on: rotating the application's secrets, and, until the cluster has been moved onto the new
// one, resetting the cluster. It is asked at every reconcile, before any call to Azure, so that
// an identity that no longer allows the rotation stops it at its next step.
func (ro *rotation) authorize(ctx context.Context) (grant, error) {
	g, err := ro.r.grantOnce(ctx, ro.w)
	if err != nil {
		return grant{}, err
	}
	if err := g.allow(access.Request{Operation: v1alpha1.OperationRotate, TenantID: ro.tenant, AppID: ro.appID}); err != nil {
		return grant{}, err
	}
	if ro.cluster != nil && ro.st.Step != v1alpha1.StepRetiring {
		if err := g.allow(access.Request{Operation: v1alpha1.OperationResetCluster, TenantID: ro.tenant, Cluster: accessCluster(clusterRef(ro.cluster))}); err != nil {
			return grant{}, err
		}
	}
	return g, nil
}

// paused shows a rotation that its identity does not allow, or that has no identity, as Rotating
// False with the reason, and does nothing else: whatever step it reached stays as it was, and
// it goes on when the identity allows it again (a change to the identity reconciles the watch).
func (ro *rotation) paused(err error) (time.Time, error) {
	var ke *kubernetesError
	if errors.As(err, &ke) {
		return time.Time{}, ke
	}
	reason := reasonFor(err)
	var fe *foreignSecretError
	if errors.As(err, &fe) {
		reason = v1alpha1.ReasonRotationBlocked
	}
	msg := "A rotation is due, but it does not start: " + err.Error()
	if ro.obj.Status.Rotation != nil {
		msg = fmt.Sprintf("The rotation waits at step %s: %v", ro.st.Step, err)
	}
	if prev := condition(ro.obj, v1alpha1.ConditionRotating); prev.Reason != reason {
		ro.r.Recorder.Event(ro.obj, corev1.EventTypeWarning, reason, msg)
	}
	setCondition(ro.obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, reason, msg, ro.now)
	return time.Time{}, nil
}

// connect binds the rotation's clients to the identity g: the application by the appId and
// object ID pinned when the rotation started, and the target's cluster.
func (ro *rotation) connect(ctx context.Context, g grant) error {
	id, err := ro.r.signIns().identity(ctx, g.id, ro.tenant)
	if err != nil {
		return err
	}
	if ro.app, err = ro.r.Azure.Application(id, graph.AppRef{AppID: ro.appID, ObjectID: ro.appOID}); err != nil {
		return err
	}
	if ro.cluster != nil {
		ro.aks, err = ro.r.Azure.Cluster(id, clusterRef(ro.cluster))
	}
	return err
}

// blocked says why a due rotation cannot start, empty when it can.
func (ro *rotation) blocked() string {
	switch st := ro.obj.Status; {
	case !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady):
		return "A rotation is due, but the last check failed: it waits for a check that succeeds"
	case st.AKSCluster != nil && st.AKSCluster.Identity == v1alpha1.IdentityManagedIdentity:
		return "The AKS cluster uses a managed identity: there is no secret to rotate"
	case ro.appOID == "":
		return "A rotation is due, but this tenant holds no application object for the appId: secrets are added to the application, in its home tenant"
	case st.LastRotation != nil && (st.LastCheckTime == nil || st.LastCheckTime.Before(&st.LastRotation.Time)):
		return "The last rotation is not read back from Graph yet: the next check does that"
	}
	return ""
}

// plan says what a rotation would do, for DryRun.
func (ro *rotation) plan() string {
	steps := []string{
		fmt.Sprintf("add a secret named %s<watch>-<time> valid for %s to application %s", policy.CredwatchPrefix, policy.HumanDuration(ro.rs.Validity), ro.appOID),
		fmt.Sprintf("write it to Secret %s/%s", ro.obj.Namespace, ro.spec.SecretRef.Name),
		"wait until Entra accepts it",
	}
	if c := ro.cluster; c != nil {
		when := "at once"
		if w := ro.spec.MaintenanceWindow; w != nil {
			_, next, _ := policy.InWindow(w, ro.now)
			when = "in the maintenance window (next opening " + next.UTC().Format(time.RFC3339) + ")"
		}
		steps = append(steps, fmt.Sprintf("reset the service principal of AKS cluster %s/%s %s, which restarts its nodes", c.ResourceGroup, c.Name, when))
	}
	retire := "keep every old secret"
	if ro.spec.RemoveOld != v1alpha1.RemoveOldNever {
		n := len(policy.Retirable(ro.obj.Status.Credentials, policy.WatchPrefix(string(ro.obj.UID)), "", ro.now.Add(ro.rs.Validity), ro.spec.RemoveOld))
		retire = fmt.Sprintf("remove %d old secrets credwatch created, after %s", n, policy.HumanDuration(ro.rs.GracePeriod))
	}
	steps = append(steps, retire)
	return "DryRun: a rotation is due; it would " + strings.Join(steps, "; ")
}

// clusterGone: the rotation reached the cluster's step, and the watch no longer names its cluster.
func (ro *rotation) clusterGone() error {
	which := "an AKS cluster"
	if c := ro.st.Cluster; c != nil {
		which = "AKS cluster " + c.ResourceGroup + "/" + c.Name
	}
	return fmt.Errorf("the rotation began for %s, which the watch no longer names: put spec.target.aksCluster back as it was "+
		"and the rotation resumes; no old secret is retired until then", which)
}

// sameCluster reports whether t names the cluster pinned; Azure's names are not case-sensitive.
func sameCluster(pinned v1alpha1.RotationCluster, t *v1alpha1.AKSClusterTarget) bool {
	return strings.EqualFold(pinned.SubscriptionID, t.SubscriptionID) && strings.EqualFold(pinned.ResourceGroup, t.ResourceGroup) &&
		strings.EqualFold(pinned.Name, t.Name)
}

// needsCluster says whether the rotation moves a cluster onto the new secret: the one pinned
// when it started, or, for a rotation started before clusters were pinned, the spec's.
func (ro *rotation) needsCluster() bool { return ro.st.Cluster != nil || ro.cluster != nil }

// advance runs steps until one has to wait.
func (ro *rotation) advance(ctx context.Context) (time.Time, error) {
	for {
		var next time.Time
		var err error
		switch ro.st.Step {
		case v1alpha1.StepStarted:
			next, err = ro.create(ctx)
		case v1alpha1.StepSecretStored:
			next, err = ro.verify(ctx)
		case v1alpha1.StepSecretVerified, v1alpha1.StepClusterUpdating:
			switch {
			case ro.aks == nil:
				// Without the cluster, retiring the old secret could strand it.
				next, err = ro.fail(ro.clusterGone(), policy.ClusterBackoff(ro.st.Failures+1))
			case ro.st.Step == v1alpha1.StepSecretVerified:
				next, err = ro.startReset(ctx)
			default:
				next, err = ro.followReset(ctx)
			}
		case v1alpha1.StepRetiring:
			next, err = ro.retire(ctx)
		default:
			return time.Time{}, reconcile.TerminalError(fmt.Errorf("unknown rotation step %q", ro.st.Step))
		}
		if err != nil || !next.IsZero() || ro.obj.Status.Rotation == nil {
			ro.report()
			return next, err
		}
	}
}

// create makes the new secret and stores it, or adopts the one an earlier attempt stored. The
// target Secret is asked first, as Graph's lists can lag behind its writes; a secret of this
// rotation that the Secret does not hold is an orphan whose text is gone, and is removed before
// another is added, so that at most one spare secret ever exists.
func (ro *rotation) create(ctx context.Context) (time.Time, error) {
	held, err := ro.held(ctx)
	var fe *foreignSecretError
	if errors.As(err, &fe) {
		// Someone else's Secret took the name since the rotation started: nothing is added that
		// could not be stored.
		return ro.fail(err, policy.ClusterBackoff(ro.st.Failures+1))
	}
	if err != nil {
		return time.Time{}, err
	}
	snap, err := ro.app.ReadCredentials(ctx)
	if err != nil {
		return ro.fail(err, policy.PropagationBackoff(ro.st.Failures+1))
	}
	var adopt *graph.Credential
	for _, c := range snap.Credentials {
		if c.Source != graph.Application || c.Type != graph.Password || c.DisplayName != ro.st.DisplayName {
			continue
		}
		if held.displayName == ro.st.DisplayName && held.keyID == c.KeyID {
			adopt = &c
			continue
		}
		if err := ro.app.RemovePassword(ctx, c.KeyID); err != nil {
			return ro.fail(err, policy.PropagationBackoff(ro.st.Failures+1))
		}
		ro.r.Recorder.Eventf(ro.obj, corev1.EventTypeNormal, eventRotationOrphanRemoved,
			"Removed secret %s, created by an earlier attempt whose text was never stored", c.KeyID)
	}
	switch {
	case adopt != nil:
		return ro.secretStored(ctx, adopt.KeyID, adopt.End)
	case held.displayName == ro.st.DisplayName && held.keyID != "":
		// Stored, but not listed yet: Graph's read lags its write. Trust the Secret.
		return ro.secretStored(ctx, held.keyID, held.expiry)
	}

	// The Secret must take the write before a secret exists whose text would have nowhere to go:
	// an immutable or typed Secret, an admission policy or missing rights would otherwise add and
	// remove a secret in Graph at every try.
	if err := ro.writeSecret(ctx, graph.NewSecret{KeyID: "dry-run", End: ro.now}, tryOut); err != nil {
		return ro.fail(err, policy.PropagationBackoff(ro.st.Failures+1))
	}
	if t := ro.st.AddTime; t != nil && ro.now.Before(t.Add(addListLag)) {
		// An earlier addPassword may have made a secret whose answer was lost; Graph's list may not
		// show it yet. Adding now could leave two: the list is read again until it has had time.
		ro.st.Message = "Waiting for Graph to list a secret an earlier attempt may have added, before adding another"
		at := metav1.NewTime(policy.Earliest(t.Add(addListLag), ro.now.Add(addListPoll)))
		ro.st.NextAttemptTime = &at
		ro.keep()
		return at.Time, nil
	}
	addTime := metav1.NewTime(ro.now)
	ro.st.AddTime = &addTime
	if err := ro.save(ctx); err != nil {
		return time.Time{}, err
	}
	secret, err := ro.app.AddPassword(ctx, ro.st.DisplayName, ro.now.Add(ro.rs.Validity))
	if err != nil {
		return ro.fail(err, policy.PropagationBackoff(ro.st.Failures+1))
	}
	// From here the text exists only in memory: storing it must not be cut short by the
	// operator stopping, or the secret is orphaned (and removed at the next start).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := ro.writeSecret(ctx, secret, write); err != nil {
		// The write may have landed though it reported failure (a timeout); only a secret the
		// Secret does not hold is unusable, and must not stay.
		if now, rerr := ro.held(ctx); rerr == nil && now.keyID == secret.KeyID {
			return ro.secretStored(ctx, secret.KeyID, secret.End)
		}
		if rmErr := ro.app.RemovePassword(ctx, secret.KeyID); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("and removing the unusable secret: %w", rmErr))
		}
		return ro.fail(err, policy.PropagationBackoff(ro.st.Failures+1))
	}
	return ro.secretStored(ctx, secret.KeyID, secret.End)
}

func (ro *rotation) secretStored(ctx context.Context, keyID string, end time.Time) (time.Time, error) {
	expiry := metav1.NewTime(end.Truncate(time.Second))
	ro.st.Step, ro.st.KeyID, ro.st.Expiry = v1alpha1.StepSecretStored, keyID, &expiry
	ro.st.Message = "Waiting for Entra to accept the new secret"
	return time.Time{}, ro.next(ctx)
}

// verify asks Entra whether it accepts the new secret yet: it takes seconds to replicate.
func (ro *rotation) verify(ctx context.Context) (time.Time, error) {
	text, err := ro.secretText(ctx)
	if err != nil {
		return ro.fail(err, policy.PropagationBackoff(ro.st.Failures+1))
	}
	if err := ro.r.Azure.SignIn(ctx, azure.ClientSecret(ro.tenant, ro.appID, text)); err != nil {
		if ro.st.Failures >= verifyTriesBeforeRecheck && ro.secretGone(ctx) {
			return time.Time{}, ro.startOver(ctx, "The new secret disappeared from Graph before it was accepted; adding another")
		}
		ro.st.Failures++
		wait := policy.PropagationBackoff(ro.st.Failures)
		ro.st.Message = fmt.Sprintf("Waiting for Entra to accept the new secret (%d tries): %v", ro.st.Failures, err)
		at := metav1.NewTime(ro.now.Add(wait))
		ro.st.NextAttemptTime = &at
		ro.keep()
		return at.Time, nil
	}
	// Replicas that have not learnt of the secret refuse it for a while after one accepted it: a
	// consumer or a cluster handed it too soon would fail where the check succeeded.
	if ro.st.Acceptances == 0 {
		first := metav1.NewTime(ro.now)
		ro.st.FirstAcceptedTime = &first
	}
	ro.st.Acceptances++
	if since := ro.now.Sub(ro.st.FirstAcceptedTime.Time); ro.st.Acceptances < acceptancesNeeded || since < acceptanceSpan {
		ro.st.Message = fmt.Sprintf("Entra accepted the new secret %d times in %s; waiting for %d over %s before it is used",
			ro.st.Acceptances, since.Round(time.Second), acceptancesNeeded, acceptanceSpan)
		at := metav1.NewTime(ro.now.Add(acceptanceSpan / (acceptancesNeeded - 1)))
		ro.st.NextAttemptTime = &at
		ro.keep()
		return at.Time, nil
	}
	if !ro.needsCluster() {
		ro.retireAfterGrace()
	} else {
		ro.st.Step, ro.st.Message = v1alpha1.StepSecretVerified, "Moving the AKS cluster onto the new secret"
	}
	return time.Time{}, ro.next(ctx)
}

// An addPassword whose answer was lost is given addListLag to show in Graph's list, read every
// addListPoll, before another is sent.
const (
	addListLag  = 2 * time.Minute
	addListPoll = 20 * time.Second
)

// A new secret is used once Entra accepted it acceptancesNeeded times over at least acceptanceSpan.
const (
	acceptancesNeeded = 3
	acceptanceSpan    = time.Minute
)

// verifyTriesBeforeRecheck is how many refusals of a new secret pass before Graph is asked
// whether it still exists: replication takes seconds, so many refusals mean something else.
const verifyTriesBeforeRecheck = 10

// secretGone reports whether the new secret is no longer among the application's secrets.
func (ro *rotation) secretGone(ctx context.Context) bool {
	snap, err := ro.app.ReadCredentials(ctx)
	if err != nil {
		return false
	}
	for _, c := range snap.Credentials {
		if c.KeyID == ro.st.KeyID {
			return false
		}
	}
	return true
}

// startReset moves the AKS cluster onto the new secret, in the maintenance window. The step is
// written before the call: an operator stopped in between finds it and does not start a second
// reset blindly, but reads the cluster first.
func (ro *rotation) startReset(ctx context.Context) (time.Time, error) {
	in, opens, err := policy.InWindow(ro.spec.MaintenanceWindow, ro.now)
	if err != nil {
		return ro.fail(err, policy.ClusterBackoff(ro.st.Failures+1))
	}
	if !in {
		ro.st.Message = "Waiting for the maintenance window, which opens at " + opens.UTC().Format(time.RFC3339)
		ro.keep()
		return opens, nil
	}
	c, err := ro.readCluster(ctx)
	if err != nil {
		return ro.fail(err, clusterPollInterval)
	}
	if c.ClientID != ro.appID {
		ro.st.Message = fmt.Sprintf("The AKS cluster no longer signs in with %s; it is left as it is", ro.appID)
		return ro.fail(errors.New(ro.st.Message), policy.ClusterBackoff(ro.st.Failures+1))
	}
	if strings.EqualFold(c.PowerState, "Stopped") {
		return ro.fail(errors.New("the AKS cluster is stopped, and a stopped cluster's service principal cannot be reset"), policy.ClusterBackoff(1))
	}
	// Days may have passed since the secret was verified (a window, a backoff): someone may have
	// removed it meanwhile (az ad app credential reset without --append). A cluster moved onto a
	// dead secret loses Azure; it is checked again right before.
	if err := ro.usable(ctx); err != nil {
		if errors.Is(err, errSecretGone) {
			ro.r.Recorder.Event(ro.obj, corev1.EventTypeWarning, eventRotationSecretVanished,
				"The new secret "+ro.st.KeyID+" is no longer in Graph; a new one is added before the cluster is moved")
			return time.Time{}, ro.startOver(ctx, "The new secret disappeared from Graph before the cluster was moved onto it; adding another")
		}
		return ro.fail(err, policy.PropagationBackoff(ro.st.Failures+1))
	}
	ro.st.Step, ro.st.ResumeToken, ro.st.Message = v1alpha1.StepClusterUpdating, "", "Resetting the AKS cluster's service principal: its nodes restart"
	ro.st.Resets++
	if err := ro.save(ctx); err != nil {
		return time.Time{}, err
	}
	return ro.reset(ctx)
}

// errSecretGone: the rotation's new secret is no longer among the application's.
var errSecretGone = errors.New("the new secret is no longer in Graph")

// usable checks that the new secret still exists in Graph and that Entra accepts it.
func (ro *rotation) usable(ctx context.Context) error {
	if ro.secretGone(ctx) {
		return errSecretGone
	}
	text, err := ro.secretText(ctx)
	if err != nil {
		return err
	}
	if err := ro.r.Azure.SignIn(ctx, azure.ClientSecret(ro.tenant, ro.appID, text)); err != nil {
		return fmt.Errorf("the new secret no longer signs in: %w", err)
	}
	return nil
}

// startOver begins the rotation again with a new secret, when the one it made is gone. What was
// pinned stays pinned: the application, and the cluster the old secret serves.
func (ro *rotation) startOver(ctx context.Context, why string) error {
	ro.st = v1alpha1.RotationStatus{Step: v1alpha1.StepStarted, DisplayName: policy.NewSecretName(string(ro.obj.UID), ro.now),
		AppID: ro.appID, ApplicationObjectID: ro.appOID, Cluster: ro.st.Cluster, StartTime: ro.st.StartTime, Request: ro.st.Request,
		Message: why}
	return ro.save(ctx)
}

func (ro *rotation) reset(ctx context.Context) (time.Time, error) {
	text, err := ro.secretText(ctx)
	if err != nil {
		return ro.fail(err, clusterPollInterval)
	}
	token, done, err := ro.aks.StartReset(ctx, aks.ServicePrincipal{ClientID: ro.appID, Secret: secret.New(text)})
	if err != nil {
		return ro.clusterFailed(ctx, err)
	}
	if done {
		return ro.readBack(ctx, nil)
	}
	ro.st.ResumeToken = token
	if err := ro.save(ctx); err != nil {
		return time.Time{}, err
	}
	return ro.now.Add(clusterPollInterval), nil
}

// followReset polls the reset operation and, once it ends either way, reads the cluster back.
func (ro *rotation) followReset(ctx context.Context) (time.Time, error) {
	if ro.st.ResumeToken == "" {
		// The operator stopped after writing this step but before it kept the operation's token,
		// maybe before the reset began. A reset under way shows as a cluster not yet settled;
		// otherwise the reset is made again, through the window and the cluster's checks.
		c, err := ro.readCluster(ctx)
		if err != nil {
			return ro.fail(err, clusterPollInterval)
		}
		if !terminalProvisioningState(c.ProvisioningState) {
			return ro.waitForCluster(c)
		}
		ro.st.Step, ro.st.Message = v1alpha1.StepSecretVerified, "Resetting the AKS cluster again: the first reset's outcome is not known"
		return time.Time{}, ro.save(ctx)
	}
	done, err := ro.aks.PollReset(ctx, ro.st.ResumeToken)
	if err == nil && !done {
		return ro.waitForCluster(aks.Cluster{ProvisioningState: "Updating"})
	}
	return ro.readBack(ctx, err)
}

// clusterStuckAfter is how long a reset may run before people are told: resets of large
// clusters take long, but hours without an end are worth a look.
const clusterStuckAfter = 3 * time.Hour

// waitForCluster waits for a reset under way, and counts it as a failure, which alerts, once it
// has gone on longer than clusterStuckAfter.
func (ro *rotation) waitForCluster(c aks.Cluster) (time.Time, error) {
	ro.st.Message = "The AKS cluster is " + c.ProvisioningState + "; waiting for it to finish"
	if t := ro.st.StepTime; t != nil && ro.now.Sub(t.Time) > clusterStuckAfter {
		ro.st.Message = fmt.Sprintf("The AKS cluster has been %s for %s since the reset began; it may need a look", c.ProvisioningState, policy.HumanDuration(ro.now.Sub(t.Time)))
		if ro.st.Failures == 0 {
			ro.st.Failures = 1
			ro.r.Recorder.Event(ro.obj, corev1.EventTypeWarning, eventRotationClusterFailed, ro.st.Message)
		}
	}
	ro.keep()
	return ro.now.Add(clusterPollInterval), nil
}

// readBack decides from the cluster itself whether the reset took: resets have been seen to
// report failure after applying the change, and to leave a cluster Failed. Resource Manager does
// not show which secret a cluster holds, so a reset that reported failure is made once more
// before its secret counts as in use; the old one goes only after that.
func (ro *rotation) readBack(ctx context.Context, opErr error) (time.Time, error) {
	c, err := ro.readCluster(ctx)
	if err != nil {
		return ro.fail(err, clusterPollInterval)
	}
	switch {
	case !terminalProvisioningState(c.ProvisioningState):
		return ro.waitForCluster(c)
	case c.ProvisioningState == "Succeeded" && c.ClientID == ro.appID && (opErr == nil || ro.st.Resets >= 2):
		if opErr != nil {
			ctrl.LoggerFrom(ctx).Info("The AKS reset reported a failure again, but the cluster runs and signs in as the application", "error", opErr.Error())
		}
		ro.st.ResumeToken = ""
		ro.retireAfterGrace()
		return time.Time{}, ro.next(ctx)
	case c.ProvisioningState == "Succeeded" && c.ClientID == ro.appID:
		ro.st.Step, ro.st.ResumeToken = v1alpha1.StepSecretVerified, ""
		ro.st.Message = fmt.Sprintf("The reset reported a failure (%v) though the cluster is Succeeded; resetting once more to be sure it holds the new secret", opErr)
		return time.Time{}, ro.save(ctx)
	default:
		if opErr == nil {
			opErr = fmt.Errorf("the AKS cluster is %s", c.ProvisioningState)
		}
		return ro.clusterFailed(ctx, opErr)
	}
}

// clusterFailed records a reset that failed, with the command that recovers the cluster by hand,
// and retries as cert-manager retries issuance: 1h, 2h, ... 24h.
func (ro *rotation) clusterFailed(ctx context.Context, err error) (time.Time, error) {
	c := ro.cluster
	recovery := fmt.Sprintf("az aks update-credentials -g %s -n %s --reset-service-principal --service-principal %s --client-secret \"$(kubectl get secret -n %s %s -o jsonpath='{.data.clientSecret}' | base64 -d)\"",
		c.ResourceGroup, c.Name, ro.appID, ro.obj.Namespace, ro.spec.SecretRef.Name)
	if ro.st.Failures == 0 {
		ro.r.Recorder.Eventf(ro.obj, corev1.EventTypeWarning, eventRotationClusterFailed,
			"Moving the AKS cluster onto the new secret failed: %v; credwatch retries with backoff, or recover by hand with: %s", err, recovery)
	}
	ro.st.Step, ro.st.ResumeToken = v1alpha1.StepSecretVerified, ""
	next, ferr := ro.fail(err, policy.ClusterBackoff(ro.st.Failures+1))
	ro.st.Message += "; recover by hand with: " + recovery
	ro.keep()
	return next, ferr
}

// retire removes the old secrets that removeOld allows once the grace period is over, and
// completes the rotation.
func (ro *rotation) retire(ctx context.Context) (time.Time, error) {
	if t := ro.st.RetireTime; t != nil && ro.now.Before(t.Time) {
		ro.st.Message = "The new secret is in use; old secrets go at " + t.UTC().Format(time.RFC3339)
		ro.keep()
		return t.Time, nil
	}
	snap, err := ro.app.ReadCredentials(ctx)
	if err != nil {
		return ro.fail(err, policy.PropagationBackoff(ro.st.Failures+1))
	}
	var removed []string
	for _, c := range policy.Retirable(credentialsOf(snap), policy.WatchPrefix(string(ro.obj.UID)), ro.st.KeyID, ro.st.Expiry.Time, ro.spec.RemoveOld) {
		if err := ro.app.RemovePassword(ctx, c.KeyID); err != nil {
			return ro.fail(err, policy.PropagationBackoff(ro.st.Failures+1))
		}
		removed = append(removed, c.KeyID)
	}
	done := &v1alpha1.LastRotation{Time: metav1.NewTime(ro.now), KeyID: ro.st.KeyID, Request: ro.st.Request}
	// The check reads the new secret in at once, so that expiry and the next rotation are
	// reckoned from it rather than from the credentials read before.
	checkNow := metav1.NewTime(ro.now)
	if err := ro.r.writeNow(ctx, ro.obj, ro.stored, func(s *v1alpha1.CredentialWatchStatus) {
		s.Rotation, s.LastRotation, s.NextCheckTime = nil, done.DeepCopy(), checkNow.DeepCopy()
	}); err != nil {
		return time.Time{}, err
	}
	msg := fmt.Sprintf("Rotated the client secret of %s: secret %s is in use until %s", compose.TargetName(ro.obj), ro.st.KeyID, ro.st.Expiry.UTC().Format(time.RFC3339))
	if len(removed) > 0 {
		msg += fmt.Sprintf("; removed %d old secrets (%s)", len(removed), strings.Join(removed, ", "))
	}
	ctrl.LoggerFrom(ctx).Info("Rotation completed", "keyID", ro.st.KeyID, "removed", len(removed))
	ro.r.Recorder.Event(ro.obj, corev1.EventTypeNormal, eventRotated, msg)
	setCondition(ro.obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonIdle, msg, ro.now)
	return ro.now.Add(time.Second), nil
}

func (ro *rotation) retireAfterGrace() {
	t := metav1.NewTime(ro.now.Add(ro.rs.GracePeriod))
	ro.st.Step, ro.st.RetireTime = v1alpha1.StepRetiring, &t
	ro.st.Message = "The new secret is in use; old secrets go at " + t.UTC().Format(time.RFC3339)
}

func terminalProvisioningState(s string) bool {
	return s == "Succeeded" || s == "Failed" || s == "Canceled"
}

func (ro *rotation) readCluster(ctx context.Context) (aks.Cluster, error) {
	return ro.aks.Read(ctx)
}

// next records that the step moved on: failures reset, written before anything else is done.
func (ro *rotation) next(ctx context.Context) error {
	ro.st.Failures, ro.st.NextAttemptTime = 0, nil
	return ro.save(ctx)
}

// fail records a failed attempt at the current step and when it is tried again. It returns no
// error: the failure is the step's, shown in status, not the reconcile's.
func (ro *rotation) fail(err error, wait time.Duration) (time.Time, error) {
	ro.st.Failures++
	// Azure's Retry-After is a floor; a refusal that retrying cannot mend (a 4xx other than a
	// conflict or throttling, the API server refusing the Secret) waits as long as a cluster does,
	// and says it is blocked, rather than trying every few minutes.
	wait = max(wait, azerr.RetryAfterOf(err))
	if permanent(err) {
		wait = max(wait, policy.ClusterBackoff(ro.st.Failures))
		ro.stuck = true
	}
	ro.st.Message = oneLine(err.Error())
	at := metav1.NewTime(ro.now.Add(wait))
	ro.st.NextAttemptTime = &at
	if ro.st.Failures == 1 {
		ro.r.Recorder.Eventf(ro.obj, corev1.EventTypeWarning, eventRotationStepFailed, "Rotation step %s failed, retrying at %s: %v",
			ro.st.Step, at.UTC().Format(time.RFC3339), err)
	}
	ro.keep()
	return at.Time, nil
}

// keep puts the step's progress into the status the deferred patch writes: waiting and failures
// need no write before the next action, as nothing outside has changed.
func (ro *rotation) keep() {
	st := ro.st
	ro.obj.Status.Rotation = &st
}

// save writes the step now, with an optimistic lock.
func (ro *rotation) save(ctx context.Context) error {
	if prev := ro.obj.Status.Rotation; prev == nil || prev.Step != ro.st.Step || ro.st.StepTime == nil {
		t := metav1.NewTime(ro.now)
		ro.st.StepTime = &t
	}
	st := ro.st
	if err := ro.r.writeNow(ctx, ro.obj, ro.stored, func(s *v1alpha1.CredentialWatchStatus) {
		s.Rotation = st.DeepCopy()
	}); err != nil {
		return fmt.Errorf("recording rotation step %s: %w", st.Step, err)
	}
	return nil
}

// report shows the rotation in progress in the Rotating condition.
func (ro *rotation) report() {
	st := ro.obj.Status.Rotation
	switch {
	case st == nil:
	case ro.stuck:
		setCondition(ro.obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonRotationBlocked,
			fmt.Sprintf("The rotation is blocked at step %s until this is fixed (tried again at %s): %s", st.Step, st.NextAttemptTime.UTC().Format(time.RFC3339), st.Message), ro.now)
	default:
		setCondition(ro.obj, v1alpha1.ConditionRotating, metav1.ConditionTrue, string(st.Step), st.Message, ro.now)
	}
}

// permanent reports whether err is a refusal that retrying does not mend: Azure's 4xx other than
// a conflict or throttling, or the API server refusing the Secret as invalid or forbidden.
func permanent(err error) bool {
	if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) {
		return true
	}
	var ae *azerr.Error
	if !errors.As(err, &ae) || ae.Status < 400 || ae.Status >= 500 {
		return false
	}
	return ae.Status != http.StatusConflict && ae.Status != http.StatusTooManyRequests && ae.Status != http.StatusRequestTimeout
}

func (ro *rotation) secretKey() types.NamespacedName {
	return types.NamespacedName{Namespace: ro.obj.Namespace, Name: ro.spec.SecretRef.Name}
}

// heldSecret is what the target Secret says it holds.
type heldSecret struct {
	keyID, displayName string
	expiry             time.Time
}

// held reads what the target Secret holds; nothing when it does not exist or holds no secret,
// and a *foreignSecretError when it is someone else's.
func (ro *rotation) held(ctx context.Context) (heldSecret, error) {
	var s corev1.Secret
	if err := ro.r.SecretReader.Get(ctx, ro.secretKey(), &s); err != nil {
		if apierrors.IsNotFound(err) {
			return heldSecret{}, nil
		}
		return heldSecret{}, &kubernetesError{fmt.Errorf("reading Secret %s: %w", ro.secretKey(), err)}
	}
	if !policy.SecretOwned(s.Labels, s.Annotations, ro.obj.Name, string(ro.obj.UID)) {
		return heldSecret{}, ro.foreign()
	}
	if len(s.Data[rotatedKeyClientSecret]) == 0 || string(s.Data[rotatedKeyClientID]) != ro.appID {
		return heldSecret{}, nil
	}
	expiry, _ := time.Parse(time.RFC3339, string(s.Data[rotatedKeyExpiry]))
	return heldSecret{keyID: string(s.Data[rotatedKeyKeyID]), displayName: s.Annotations[annotationSecretName], expiry: expiry}, nil
}

// secretText reads the new secret back from the target Secret, checking it is still this
// rotation's, of this application.
func (ro *rotation) secretText(ctx context.Context) (string, error) {
	var s corev1.Secret
	if err := ro.r.SecretReader.Get(ctx, ro.secretKey(), &s); err != nil {
		return "", fmt.Errorf("reading Secret %s: %w", ro.secretKey(), err)
	}
	if string(s.Data[rotatedKeyKeyID]) != ro.st.KeyID || string(s.Data[rotatedKeyClientID]) != ro.appID || len(s.Data[rotatedKeyClientSecret]) == 0 {
		//nolint:staticcheck // ST1005: the message starts with the kind, Secret, as people read it in status
		return "", fmt.Errorf("Secret %s no longer holds the new secret %s of %s: it was changed by someone else", ro.secretKey(), ro.st.KeyID, ro.appID)
	}
	return string(s.Data[rotatedKeyClientSecret]), nil
}

// annotationSecretName, on the target Secret, names the Graph secret it holds: the rotation
// that made it finds it there even before Graph lists it.
const annotationSecretName = policy.AnnotationSecretOld

// foreignSecretError: the target Secret exists and credwatch did not create it for this watch.
// Writing it would let anyone who may create a watch overwrite any Secret of the namespace.
type foreignSecretError struct{ key types.NamespacedName }

func (e *foreignSecretError) Error() string {
	return fmt.Sprintf("Secret %s exists and credwatch did not create it for this watch, so a rotation does not write it: name another "+
		"spec.rotation.secretRef, or, to let this watch write it on purpose, "+
		"kubectl label secret -n %s %s %s=%s && kubectl annotate secret -n %s %s %s=<the watch's name>",
		e.key, e.key.Namespace, e.key.Name, policy.LabelManagedBy, policy.ManagedByCredwatch, e.key.Namespace, e.key.Name, policy.AnnotationWatch)
}

func (ro *rotation) foreign() error { return &foreignSecretError{ro.secretKey()} }

// writeMode says whether a write is made or only tried by the API server (dry run).
type writeMode bool

const (
	write  writeMode = false
	tryOut writeMode = true
)

func (m writeMode) create() []client.CreateOption {
	if m == tryOut {
		return []client.CreateOption{client.DryRunAll}
	}
	return nil
}

func (m writeMode) update() []client.UpdateOption {
	if m == tryOut {
		return []client.UpdateOption{client.DryRunAll}
	}
	return nil
}

// markOwned marks s as this watch's, adopting one an earlier version wrote, and merges data in.
func markOwned(s *corev1.Secret, watch, displayName string, data map[string][]byte) {
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Labels[policy.LabelManagedBy] = policy.ManagedByCredwatch
	s.Annotations[policy.AnnotationWatch] = watch
	s.Annotations[annotationSecretName] = displayName
	for k, v := range data {
		s.Data[k] = v
	}
}

// writeSecret puts the new secret in the target Secret, creating it if need be. It reads through
// SecretReader, not the cache, which would hold every Secret in the cluster.
func (ro *rotation) writeSecret(ctx context.Context, secret graph.NewSecret, mode writeMode) error {
	data := map[string][]byte{
		rotatedKeyTenantID:     []byte(ro.tenant),
		rotatedKeyClientID:     []byte(ro.appID),
		rotatedKeyClientSecret: []byte(secret.Text),
		rotatedKeyKeyID:        []byte(secret.KeyID),
		rotatedKeyExpiry:       []byte(secret.End.UTC().Format(time.RFC3339)),
	}
	var s corev1.Secret
	err := ro.r.SecretReader.Get(ctx, ro.secretKey(), &s)
	switch {
	case apierrors.IsNotFound(err):
		s = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: ro.spec.SecretRef.Name, Namespace: ro.obj.Namespace},
			Type:       corev1.SecretTypeOpaque,
		}
		markOwned(&s, ro.obj.Name, ro.st.DisplayName, data)
		err = ro.r.Create(ctx, &s, mode.create()...)
	case err == nil && !policy.SecretOwned(s.Labels, s.Annotations, ro.obj.Name, string(ro.obj.UID)):
		return ro.foreign()
	case err == nil:
		// Keys the rotation does not write stay: whoever consumes the Secret may keep more in it.
		markOwned(&s, ro.obj.Name, ro.st.DisplayName, data)
		err = ro.r.Update(ctx, &s, mode.update()...)
	}
	if err != nil {
		return fmt.Errorf("writing the new secret to Secret %s: %w", ro.secretKey(), err)
	}
	return nil
}
