package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/policy"
)

// ChannelSource builds the alert channels of a watch.
type ChannelSource interface {
	For(ctx context.Context, obj *v1alpha1.CredentialWatch) (channels.Set, error)
}

// sendTimeout bounds one delivery, so that a dead SMTP relay delays a watch by seconds, not hours.
const sendTimeout = 30 * time.Second

// Event reasons of alert delivery.
const (
	eventAlertSent            = "AlertSent"
	eventAlertDeliveryFailed  = "AlertDeliveryFailed"
	eventChannelMisconfigured = "AlertChannelMisconfigured"
)

// reconcileAlerts sends the alerts that have fallen due on each channel and records them in the
// status ledger, which the deferred patch writes before the next reconcile can plan again. A
// channel that fails is retried with backoff; the others go on. It returns when alerts next
// need attention, zero for never.
func (r *CredentialWatchReconciler) reconcileAlerts(ctx context.Context, obj *v1alpha1.CredentialWatch, s settings, now time.Time) time.Time {
	log := ctrl.LoggerFrom(ctx)
	set, cfgErr := r.Channels.For(ctx, obj)
	if len(set.Configured) == 0 {
		setCondition(obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, v1alpha1.ReasonNoChannels,
			"No alert channel: set spec.alerts, or the operator's default channels", now)
		return time.Time{}
	}

	ledger := obj.Status.Alerts
	if ledger == nil {
		ledger = &v1alpha1.AlertsStatus{}
	}
	plan := policy.PlanAlerts(policy.AlertInputs{
		Credentials:       obj.Status.Credentials,
		Checked:           obj.Status.LastCheckTime != nil,
		Ready:             meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionReady),
		Sent:              ledger.Sent,
		Channels:          set.Configured,
		RemindBefore:      s.remindBefore,
		CheckFailureAfter: s.checkFailureAfter,
	}, now)
	for _, stale := range plan.Stale {
		policy.Forget(ledger, stale.Channel, stale.Subject)
	}
	policy.KeepChannels(ledger, set.Configured)

	next := plan.Next
	later := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, ch := range set.Built {
		name := ch.Name()
		if f := policy.Failure(ledger, name); f != nil && now.Before(f.NextAttemptTime.Time) {
			later(f.NextAttemptTime.Time)
			continue
		}
		for _, p := range plan.Due {
			if p.Channel != name {
				continue
			}
			a := r.alertFor(obj, p, now)
			sendCtx, cancel := context.WithTimeout(ctx, sendTimeout)
			err := ch.Send(sendCtx, a)
			cancel()
			if err != nil {
				f := policy.RecordFailure(ledger, name, oneLine(err.Error()), notify.RetryAfterOf(err), now)
				later(f.NextAttemptTime.Time)
				log.Info("Sending alert failed", "channel", name, "alert", a.Title(), "error", err.Error(), "failures", f.Failures)
				if f.Failures == 1 {
					r.Recorder.Eventf(obj, corev1.EventTypeWarning, eventAlertDeliveryFailed, "Sending %q to %s failed, retrying with backoff: %v", a.Title(), name, err)
				}
				break // keep this channel's alerts in order: the rest wait for the retry
			}
			policy.RecordDelivery(ledger, p, now)
			log.Info("Sent alert", "channel", name, "alert", a.Title())
			r.Recorder.Eventf(obj, corev1.EventTypeNormal, eventAlertSent, "Sent %q to %s", a.Title(), name)
		}
	}
	obj.Status.Alerts = ledger
	if len(ledger.Sent) == 0 && len(ledger.Failing) == 0 {
		obj.Status.Alerts = nil
	}

	switch {
	case cfgErr != nil:
		if !meta.IsStatusConditionPresentAndEqual(obj.Status.Conditions, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse) {
			r.Recorder.Eventf(obj, corev1.EventTypeWarning, eventChannelMisconfigured, "An alert channel cannot be used: %v", cfgErr)
		}
		setCondition(obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonChannelMisconfigured, oneLine(cfgErr.Error()), now)
		// Someone has to fix a Secret; look again in a while rather than only at the next step.
		later(now.Add(policy.DeliveryBackoff(1, 0) * 5))
	case len(ledger.Failing) > 0:
		var msgs []string
		for _, f := range ledger.Failing {
			msgs = append(msgs, fmt.Sprintf("%s: %s (%d failures, next try at %s)", f.Channel, f.Message, f.Failures, f.NextAttemptTime.UTC().Format(time.RFC3339)))
		}
		setCondition(obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonDeliveryFailed, strings.Join(msgs, "; "), now)
	default:
		setCondition(obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, v1alpha1.ReasonDelivered,
			"Alerts go to "+strings.Join(set.Configured, ", "), now)
	}
	return next
}

// alertFor words a planned alert for people.
func (r *CredentialWatchReconciler) alertFor(obj *v1alpha1.CredentialWatch, p policy.PlannedAlert, now time.Time) notify.Alert {
	sp := obj.Spec.Target.ServicePrincipal
	a := notify.Alert{
		ID:        notify.AlertID(string(obj.UID), p.Subject, p.Step.Name+"@"+p.Step.Due.UTC().Format(time.RFC3339)),
		Kind:      notify.Kind(p.Kind),
		Severity:  notify.SeverityInfo,
		Namespace: obj.Namespace,
		Name:      obj.Name,
		AppID:     sp.ClientID,
		TenantID:  sp.TenantID,
		At:        now,
	}
	if obj.Status.ServicePrincipal != nil {
		a.DisplayName = obj.Status.ServicePrincipal.DisplayName
	}
	switch p.Kind {
	case policy.AlertReminder, policy.AlertExpired:
		c := p.Credential
		a.Credential = &notify.Credential{KeyID: c.KeyID, Type: string(c.Type), Source: string(c.Source),
			DisplayName: c.DisplayName, Hint: c.Hint, End: c.EndTime.Time}
		a.Severity = severities[c.State]
		a.Fix = renewCommand(obj, *c)
	case policy.AlertResolved:
		source, keyID, _ := strings.Cut(p.Subject, "/")
		a.Credential = &notify.Credential{KeyID: keyID, Source: source}
		a.Fix = "Nothing: the credential no longer exists on the " + source + " object."
	case policy.AlertCheckFailing:
		a.Severity = notify.SeverityWarning
		if ready := meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionReady); ready != nil {
			a.Problem = ready.Reason + ": " + ready.Message
			a.Fix = checkFixes[ready.Reason]
		}
	case policy.AlertCheckRecovered:
		a.Fix = "Nothing: checks work again."
	}
	return a
}

var severities = map[v1alpha1.CredentialState]notify.Severity{
	v1alpha1.StateValid:    notify.SeverityInfo,
	v1alpha1.StateWarning:  notify.SeverityWarning,
	v1alpha1.StateCritical: notify.SeverityCritical,
	v1alpha1.StateExpired:  notify.SeverityCritical,
}

// checkFixes says what a person can do about each reason checks fail.
var checkFixes = map[string]string{
	v1alpha1.ReasonServicePrincipalNotFound: "Check spec.target: no application or service principal in the tenant has this appId.",
	v1alpha1.ReasonAccessDenied:             "Grant the identity credwatch signs in with Application.Read.All, or make it an owner of the application.",
	v1alpha1.ReasonAuthenticationFailed:     "Check the identity credwatch signs in with: the Secret in azureCredentialRef, or the operator's workload identity.",
	v1alpha1.ReasonCredentialSecretInvalid:  "Create or fix the Secret named by azureCredentialRef, with keys clientID and clientSecret.",
	v1alpha1.ReasonThrottled:                "Nothing yet: Microsoft Graph is throttling and credwatch retries after the wait it asks for.",
	v1alpha1.ReasonGraphUnreachable:         "Check that the operator can reach Microsoft Graph and the login endpoint (egress, proxy, DNS).",
	v1alpha1.ReasonGraphError:               "See the Ready condition of the CredentialWatch for Graph's answer.",
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
