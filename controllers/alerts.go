package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/egress"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/notify/email"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// ChannelSource builds the alert channels of a watch.
type ChannelSource interface {
	For(ctx context.Context, obj *v1alpha1.CredentialWatch) (channels.Set, error)
	// NotifiesOwners reports whether the watch's alerts mail the application's owners.
	NotifiesOwners(obj *v1alpha1.CredentialWatch) bool
	// Digests is the relay of a tenant scan's owner digests.
	Digests(ctx context.Context, obj *v1alpha1.CredentialWatch, e *v1alpha1.DigestEmail) (*email.Channel, error)
}

// Event reasons of alert delivery.
const (
	eventAlertSent            = "AlertSent"
	eventAlertDeliveryFailed  = "AlertDeliveryFailed"
	eventChannelMisconfigured = "AlertChannelMisconfigured"
)

// reconcileAlerts sends the alerts that have fallen due on each channel. Each send is claimed in
// the status ledger first, with an optimistic lock: a reconcile working from a stale copy of the
// watch (a lagging cache, a deposed leader) fails the claim and sends nothing, so no step reaches
// a channel twice; a send that fails gives its claim back. A channel that fails is retried with
// backoff while the others go on. It returns when alerts next need attention, zero for never.
// Claims are written into w.stored too, the base of the reconcile's deferred status patch, so
// that patch does not mistake them for its own.
func (r *CredentialWatchReconciler) reconcileAlerts(ctx context.Context, w *watchState) (time.Time, error) {
	if w.obj.Spec.Target.TenantScan != nil { // reports through status, events and metrics; see the CRD's rules
		return time.Time{}, nil
	}
	if w.obj.Spec.Target.AKSFleet != nil {
		return r.reconcileFleetAlerts(ctx, w)
	}
	obj, s, now := w.obj, w.settings, w.now
	set, cfgErr := r.Channels.For(ctx, obj)
	ledger, keep := alertsLedger(obj, set)
	defer keep()
	if len(set) == 0 {
		target.SetCondition(obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, v1alpha1.ReasonNoChannels,
			"No alert channel: set spec.alerts, or the operator's default channels", now)
		return time.Time{}, nil
	}

	plan := policy.PlanAlerts(alertInputs(obj, ledger, set, s), now)
	for _, stale := range plan.Stale {
		policy.Forget(ledger, stale.Channel, stale.Subject)
	}
	next, err := r.deliverDue(ctx, w, set, ledger, plan)
	if err != nil {
		return next, err
	}
	return r.alertsDelivered(obj, set, ledger, cfgErr, next, now), nil
}

// alertsLedger is a copy of the watch's alerts status, without channels no longer configured,
// for a reconcile of its alerts to change (claims are written from the difference between the
// watch and it); keep puts it back into the watch, as none when it holds nothing.
func alertsLedger(obj *v1alpha1.CredentialWatch, set channels.Set) (ledger *v1alpha1.AlertsStatus, keep func()) {
	ledger = obj.Status.Alerts.DeepCopy()
	if ledger == nil {
		ledger = &v1alpha1.AlertsStatus{}
	}
	policy.KeepChannels(ledger, set.IDs())
	return ledger, func() {
		obj.Status.Alerts = ledger
		if len(ledger.Sent) == 0 && len(ledger.Failing) == 0 {
			obj.Status.Alerts = nil
		}
	}
}

// alertsDelivered sets AlertsDelivered from the channels and their failures, tells a channel
// that cannot be built by event once, and returns next, sooner when such a channel is to be
// looked at again.
func (r *CredentialWatchReconciler) alertsDelivered(obj *v1alpha1.CredentialWatch, set channels.Set, ledger *v1alpha1.AlertsStatus, cfgErr error, next, now time.Time) time.Time {
	prev := meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionAlertsDelivered)
	cond := alertsCondition(set, ledger, cfgErr)
	if cond.Reason == v1alpha1.ReasonChannelMisconfigured && (prev == nil || prev.Message != cond.Message) {
		r.Recorder.Eventf(obj, corev1.EventTypeWarning, eventChannelMisconfigured, "An alert channel cannot be used: %s", cond.Message)
	}
	if cfgErr != nil {
		next = policy.Earliest(next, now.Add(target.MisconfiguredRecheck))
	}
	target.SetCondition(obj, v1alpha1.ConditionAlertsDelivered, cond.Status, cond.Reason, cond.Message, now)
	return next
}

// alertInputs is what deciding a watch's due alerts takes, from its spec and status.
func alertInputs(obj *v1alpha1.CredentialWatch, ledger *v1alpha1.AlertsStatus, set channels.Set, s settings) policy.AlertInputs {
	return policy.AlertInputs{
		Credentials:       obj.Status.Credentials,
		Checked:           obj.Status.LastCheckTime != nil,
		Ready:             meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionReady),
		Sent:              ledger.Sent,
		Channels:          set.IDs(),
		RemindBefore:      s.remindBefore,
		CheckFailureAfter: s.checkFailureAfter,
		Rotation:          obj.Status.Rotation,
		LastRotation:      obj.Status.LastRotation,
		Pulls:             obj.Status.ImagePulls,
		Drift:             meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionSigningKeyDrift),
		IssuerChanged:     issuerChanged(obj),
	}
}

// deliverDue sends each channel its due alerts in order, skipping a channel whose backoff runs,
// and stopping at a channel's first failure. It returns when alerts next need attention.
func (r *CredentialWatchReconciler) deliverDue(ctx context.Context, w *watchState, set channels.Set, ledger *v1alpha1.AlertsStatus, plan policy.AlertPlan) (time.Time, error) {
	next := plan.Next
	for _, ch := range set {
		if ch.Notifier == nil {
			continue
		}
		if f := policy.Failure(ledger, ch.ID); f != nil && w.now.Before(f.NextAttemptTime.Time) {
			next = policy.Earliest(next, f.NextAttemptTime.Time)
			continue
		}
		for _, p := range plan.Due {
			if p.Channel != ch.ID {
				continue
			}
			sent, err := r.deliver(ctx, w.obj, w.stored, ledger, ch, p, w.now)
			if err != nil {
				return next, err
			}
			if !sent {
				next = policy.Earliest(next, policy.Failure(ledger, ch.ID).NextAttemptTime.Time)
				break // keep this channel's alerts in order: the rest wait for the retry
			}
		}
	}
	return next, nil
}

// deliver claims p in the ledger, sends it, and gives the claim back if sending fails. It
// returns whether the alert went out; an error means the claim could not be written, and
// nothing was sent.
func (r *CredentialWatchReconciler) deliver(ctx context.Context, obj, stored *v1alpha1.CredentialWatch, ledger *v1alpha1.AlertsStatus, ch channels.Channel, p policy.PlannedAlert, now time.Time) (bool, error) {
	previous := policy.Sent(ledger, p.Channel, p.Subject)
	if previous != nil {
		p := *previous
		previous = &p
	}
	policy.RecordDelivery(ledger, p, now)
	claimed := ledger.DeepCopy()
	if err := r.writeNow(ctx, obj, stored, func(s *v1alpha1.CredentialWatchStatus) { s.Alerts = claimed.DeepCopy() }); err != nil {
		policy.Restore(ledger, p.Channel, p.Subject, previous)
		return false, fmt.Errorf("claiming the %s alert on %s before sending it: %w", p.Step.Name, p.Channel, err)
	}

	if r.send(ctx, obj, ledger, ch, compose.Alert(obj, p, now), now) {
		return true, nil
	}
	policy.Restore(ledger, p.Channel, p.Subject, previous)
	return false, nil
}

// send delivers a, claimed already, on ch, and reports whether it went out. A failure is kept
// in ledger's failing channels, with the next attempt's time, and told by event when it changed.
func (r *CredentialWatchReconciler) send(ctx context.Context, obj *v1alpha1.CredentialWatch, ledger *v1alpha1.AlertsStatus, ch channels.Channel, a notify.Alert, now time.Time) bool {
	log := ctrl.LoggerFrom(ctx)
	// Claimed, the alert must go out or be given back: a stopping operator still sends it.
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), target.SendTimeout)
	err := ch.Notifier.Send(sendCtx, a)
	cancel()
	if err == nil {
		policy.ClearFailure(ledger, ch.ID)
		log.Info("Sent alert", "channel", ch.ID, "alert", a.Title())
		r.Recorder.Eventf(obj, corev1.EventTypeNormal, eventAlertSent, "Sent %q to %s", a.Title(), ch.ID)
		return true
	}
	var de *notify.DeliveryError
	permanent := errors.As(err, &de) && de.Permanent
	before := policy.Failure(ledger, ch.ID)
	changed := before == nil || before.Message != target.OneLine(err.Error())
	f := policy.RecordFailure(ledger, ch.ID, failureReason(err), target.OneLine(err.Error()), permanent, notify.RetryAfterOf(err), now)
	log.Info("Sending alert failed", "channel", ch.ID, "alert", a.Title(), "error", err.Error(), "failures", f.Failures, "permanent", permanent)
	if changed {
		r.Recorder.Eventf(obj, corev1.EventTypeWarning, eventAlertDeliveryFailed, "Sending %q to %s failed, retrying with backoff: %v", a.Title(), ch.ID, err)
	}
	return false
}

// failureReason is the AlertsDelivered reason a failed send gives. It is kept in the ledger with
// the failure, so the condition says the same while the channel waits for its next attempt.
func failureReason(err error) string {
	var refused *egress.RefusedError
	if errors.As(err, &refused) {
		return v1alpha1.ReasonDestinationRefused
	}
	return v1alpha1.ReasonDeliveryFailed
}

// alertsCondition says whether alerts reach their channels: a channel that cannot be built comes
// first (a person must act), then destinations the operator refuses (the watch's author must
// act), then channels that fail to deliver, else all is well.
func alertsCondition(set channels.Set, ledger *v1alpha1.AlertsStatus, cfgErr error) compose.Condition {
	var ce *channels.ConfigError
	if errors.As(cfgErr, &ce) {
		return compose.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonChannelMisconfigured, Message: target.OneLine(cfgErr.Error())}
	}
	if cfgErr != nil { // the API server did not answer for a Secret: a person need not act
		return compose.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonDeliveryFailed, Message: target.OneLine(cfgErr.Error())}
	}
	if len(ledger.Failing) > 0 {
		reason := v1alpha1.ReasonDeliveryFailed
		var msgs []string
		for _, f := range ledger.Failing {
			if f.Reason == v1alpha1.ReasonDestinationRefused {
				reason = f.Reason
			}
			msgs = append(msgs, fmt.Sprintf("%s: %s (%d failures, next try at %s)", f.Channel, f.Message, f.Failures, f.NextAttemptTime.UTC().Format(time.RFC3339)))
		}
		return compose.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: strings.Join(msgs, "; ")}
	}
	return compose.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonDelivered, Message: "Alerts go to " + strings.Join(set.IDs(), ", ")}
}

func issuerChanged(obj *v1alpha1.CredentialWatch) *metav1.Time {
	if st := obj.Status.ServiceAccountIssuer; st != nil {
		return st.IssuerChangeTime
	}
	return nil
}
