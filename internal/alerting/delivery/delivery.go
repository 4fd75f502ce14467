// Package delivery sends a watch's alerts on its channels: it claims each in the ledger of
// status.alerts before it goes out, gives the claim back when sending fails, backs a failing
// channel off, and says in AlertsDelivered whether alerts arrive.
package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alerting"
	"github.com/credwatch/credwatch/internal/egress"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// Event reasons of alert delivery.
const (
	eventAlertSent            = "AlertSent"
	eventAlertDeliveryFailed  = "AlertDeliveryFailed"
	eventChannelMisconfigured = "AlertChannelMisconfigured"
)

// Sender sends one watch's alerts on its channels. Each send is claimed in the watch's ledger
// first, with an optimistic lock: a reconcile working from a stale copy of the watch (a lagging
// cache, a deposed leader) fails the claim and sends nothing, so no step reaches a channel twice;
// a send that fails gives its claim back. A channel that fails is retried with backoff while the
// others go on.
type Sender struct {
	Obj    *v1alpha1.CredentialWatch
	Events target.Events
	// Claim writes ledger to the watch's status.alerts at once, with an optimistic lock.
	Claim func(ctx context.Context, ledger *v1alpha1.AlertsStatus) error
	// Compose words a planned alert.
	Compose func(alerting.Planned) notify.Alert
	Now     time.Time
}

// Watch sends the alerts of a watch of a single application (a service principal, a cluster's,
// an issuer) that have fallen due on its channels, set, and says in AlertsDelivered whether they
// arrive; cfgErr is why a channel could not be built. It returns when alerts next need
// attention, zero for never; an error is a claim that could not be written.
func (d Sender) Watch(ctx context.Context, set channels.Set, cfgErr error, s target.Settings) (time.Time, error) {
	obj, now := d.Obj, d.Now
	ledger, keep := LedgerOf(obj, set)
	defer keep()
	if len(set) == 0 {
		target.SetCondition(obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, v1alpha1.ReasonNoChannels,
			"No alert channel: set spec.alerts, or the operator's default channels", now)
		return time.Time{}, nil
	}
	plan := alerting.Decide(inputsOf(obj, ledger, set, s, now), now)
	for _, stale := range plan.Stale {
		alerting.Forget(ledger, stale.Channel, stale.Subject)
	}
	next, err := d.due(ctx, set, ledger, plan)
	if err != nil {
		return next, err
	}
	return d.Delivered(set, ledger, cfgErr, next), nil
}

// LedgerOf is a copy of the watch's alerts status, without channels no longer configured,
// for a reconcile of its alerts to change (claims are written from the difference between the
// watch and it); keep puts it back into the watch, as none when it holds nothing.
func LedgerOf(obj *v1alpha1.CredentialWatch, set channels.Set) (ledger *v1alpha1.AlertsStatus, keep func()) {
	ledger = obj.Status.Alerts.DeepCopy()
	if ledger == nil {
		ledger = &v1alpha1.AlertsStatus{}
	}
	alerting.KeepChannels(ledger, set.IDs())
	return ledger, func() {
		obj.Status.Alerts = ledger
		if len(ledger.Sent) == 0 && len(ledger.Failing) == 0 {
			obj.Status.Alerts = nil
		}
	}
}

// Delivered sets AlertsDelivered from the channels and their failures, tells a channel
// that cannot be built by event once, and returns next, sooner when such a channel is to be
// looked at again.
func (d Sender) Delivered(set channels.Set, ledger *v1alpha1.AlertsStatus, cfgErr error, next time.Time) time.Time {
	obj, now := d.Obj, d.Now
	prev := meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionAlertsDelivered)
	cond := condition(set, ledger, cfgErr)
	if cond.Reason == v1alpha1.ReasonChannelMisconfigured && (prev == nil || prev.Message != cond.Message) {
		d.Events.Eventf(obj, corev1.EventTypeWarning, eventChannelMisconfigured, "An alert channel cannot be used: %s", cond.Message)
	}
	if cfgErr != nil {
		next = policy.Earliest(next, now.Add(target.MisconfiguredRecheck))
	}
	target.SetCondition(obj, v1alpha1.ConditionAlertsDelivered, cond.Status, cond.Reason, cond.Message, now)
	return next
}

// inputsOf is what deciding a watch's due alerts takes, from its spec and status: the ledger
// and channels as LedgerOf and the channels give them, its settings parsed.
func inputsOf(obj *v1alpha1.CredentialWatch, ledger *v1alpha1.AlertsStatus, set channels.Set, s target.Settings, now time.Time) alerting.Inputs {
	in := alerting.Inputs{
		Credentials:       obj.Status.Credentials,
		Checked:           obj.Status.LastCheckTime != nil,
		Ready:             meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionReady),
		Sent:              ledger.Sent,
		Channels:          set.IDs(),
		RemindBefore:      s.RemindBefore,
		CheckFailureAfter: s.CheckFailureAfter,
		Rotation:          obj.Status.Rotation,
		LastRotation:      obj.Status.LastRotation,
		Pulls:             obj.Status.ImagePulls,
		Drift:             meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionSigningKeyDrift),
		IssuerChanged:     issuerChanged(obj),
	}
	if s.Usage.On() && policy.WatchSignInsKnown(obj, now) {
		in.Usage = &s.Usage
	}
	return in
}

// due sends each channel its due alerts in order, skipping a channel whose backoff runs,
// and stopping at a channel's first failure. It returns when alerts next need attention.
func (d Sender) due(ctx context.Context, set channels.Set, ledger *v1alpha1.AlertsStatus, plan alerting.Plan) (time.Time, error) {
	next := plan.Next
	for _, ch := range set {
		if ch.Notifier == nil {
			continue
		}
		if f := alerting.Failure(ledger, ch.ID); f != nil && d.Now.Before(f.NextAttemptTime.Time) {
			next = policy.Earliest(next, f.NextAttemptTime.Time)
			continue
		}
		for _, p := range plan.Due {
			if p.Channel != ch.ID {
				continue
			}
			sent, err := d.deliver(ctx, ledger, ch, p)
			if err != nil {
				return next, err
			}
			if !sent {
				next = policy.Earliest(next, alerting.Failure(ledger, ch.ID).NextAttemptTime.Time)
				break // keep this channel's alerts in order: the rest wait for the retry
			}
		}
	}
	return next, nil
}

// deliver claims p in the ledger, sends it, and gives the claim back if sending fails. It
// returns whether the alert went out; an error means the claim could not be written, and
// nothing was sent.
func (d Sender) deliver(ctx context.Context, ledger *v1alpha1.AlertsStatus, ch channels.Channel, p alerting.Planned) (bool, error) {
	previous := alerting.Sent(ledger, p.Channel, p.Subject)
	if previous != nil {
		p := *previous
		previous = &p
	}
	alerting.RecordDelivery(ledger, p, d.Now)
	if err := d.Claim(ctx, ledger.DeepCopy()); err != nil {
		alerting.Restore(ledger, p.Channel, p.Subject, previous)
		return false, fmt.Errorf("claiming the %s alert on %s before sending it: %w", p.Step.Name, p.Channel, err)
	}

	if d.Send(ctx, ledger, ch, d.Compose(p)) {
		return true, nil
	}
	alerting.Restore(ledger, p.Channel, p.Subject, previous)
	return false, nil
}

// Send delivers a, claimed already, on ch, and reports whether it went out. A failure is kept
// in ledger's failing channels, with the next attempt's time, and told by event when it changed.
func (d Sender) Send(ctx context.Context, ledger *v1alpha1.AlertsStatus, ch channels.Channel, a notify.Alert) bool {
	obj, now, log := d.Obj, d.Now, logr.FromContextOrDiscard(ctx)
	// Claimed, the alert must go out or be given back: a stopping operator still sends it.
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), target.SendTimeout)
	err := ch.Notifier.Send(sendCtx, a)
	cancel()
	if err == nil {
		alerting.ClearFailure(ledger, ch.ID)
		log.Info("Sent alert", "channel", ch.ID, "alert", a.Title())
		d.Events.Eventf(obj, corev1.EventTypeNormal, eventAlertSent, "Sent %q to %s", a.Title(), ch.ID)
		return true
	}
	var de *notify.DeliveryError
	permanent := errors.As(err, &de) && de.Permanent
	before := alerting.Failure(ledger, ch.ID)
	changed := before == nil || before.Message != target.OneLine(err.Error())
	f := alerting.RecordFailure(ledger, ch.ID, failureReason(err), target.OneLine(err.Error()), permanent, notify.RetryAfterOf(err), now)
	log.Info("Sending alert failed", "channel", ch.ID, "alert", a.Title(), "error", err.Error(), "failures", f.Failures, "permanent", permanent)
	if changed {
		d.Events.Eventf(obj, corev1.EventTypeWarning, eventAlertDeliveryFailed, "Sending %q to %s failed, retrying with backoff: %v", a.Title(), ch.ID, err)
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
func condition(set channels.Set, ledger *v1alpha1.AlertsStatus, cfgErr error) metav1.Condition {
	var ce *channels.ConfigError
	if errors.As(cfgErr, &ce) {
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonChannelMisconfigured, Message: target.OneLine(cfgErr.Error())}
	}
	if cfgErr != nil { // the API server did not answer for a Secret: a person need not act
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonDeliveryFailed, Message: target.OneLine(cfgErr.Error())}
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
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: strings.Join(msgs, "; ")}
	}
	return metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonDelivered, Message: "Alerts go to " + strings.Join(set.IDs(), ", ")}
}

func issuerChanged(obj *v1alpha1.CredentialWatch) *metav1.Time {
	if st := obj.Status.ServiceAccountIssuer; st != nil {
		return st.IssuerChangeTime
	}
	return nil
}
