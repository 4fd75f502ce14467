package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/ledger"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// fleetSendsAgain is how soon a fleet comes back for the messages one reconcile left.
const fleetSendsAgain = time.Minute

// fleetSendBudget bounds the time one reconcile of a fleet spends sending, shared out among its
// channels: ten messages on four channels to relays that answer slowly would hold a worker for
// ten minutes otherwise, and one slow channel would leave the others nothing.
const fleetSendBudget = time.Minute

const eventLedgerRefused = "LedgerRefused"

// The ledger of a fleet's messages lives in ConfigMaps of its namespace that the fleet owns.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create;update

// reconcileFleetAlerts tells a fleet's channels of its clusters, one message per cluster and
// step, as policy.PlanFleetAlerts decides. What each channel was told is kept in the fleet's
// ledger (ConfigMaps it owns: a thousand clusters on four channels outgrow a status), claimed
// with an optimistic lock before the messages go out and given back for those that fail, so a
// restarted operator or a new leader tells nothing twice. Failing channels back off as a
// watch's do, in status.alerts.
func (r *CredentialWatchReconciler) reconcileFleetAlerts(ctx context.Context, w *watchState) (time.Time, error) {
	obj, now := w.obj, w.now
	if w.fleet == nil {
		// Until this process checks the fleet it knows no cluster to tell of.
		return time.Time{}, nil
	}
	found, shown := w.fleet.found, w.fleet.shown
	if obj.Spec.Alerts == nil {
		return time.Time{}, nil
	}
	set, cfgErr := r.fleetChannels(ctx, obj)
	failing, keep := alertsLedger(obj, set)
	defer keep()
	if len(set) == 0 {
		target.SetCondition(obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, v1alpha1.ReasonNoChannels,
			"No alert channel: a fleet tells only the channels its spec.alerts names (slack, email, teams or webhook), not the operator's defaults", now)
		return time.Time{}, nil
	}
	book, err := r.Ledger.Load(ctx, ledgerOwner(obj))
	if err != nil {
		return r.ledgerRefused(obj, err, now)
	}
	plan := policy.PlanFleetAlerts(policy.FleetAlertInputs{Channels: set.IDs(), Views: w.fleet.views, Found: shown.Clusters, Known: found.Clusters, Complete: shown.Complete,
		AllComplete: len(found.Unread) == 0 && found.Complete != nil, Ledger: book.Get, Entries: book.Entries, Now: now})
	if len(plan.Record) > 0 {
		if _, err := r.Ledger.Write(ctx, book, plan.Record); err != nil {
			return time.Time{}, fmt.Errorf("recording the fleet's clusters in its ledger: %w", err)
		}
	}
	next, err := r.sendDueFleetAlerts(ctx, obj, book, failing, set, plan.Send, now)
	if err != nil {
		return time.Time{}, err
	}
	return r.alertsDelivered(obj, set, failing, cfgErr, next, now), nil
}

// sendDueFleetAlerts sends each channel the messages due on it, skipping a channel whose backoff
// runs, within the reconcile's sending budget. It returns when messages next need attention.
func (r *CredentialWatchReconciler) sendDueFleetAlerts(ctx context.Context, obj *v1alpha1.CredentialWatch, book *ledger.Book, failing *v1alpha1.AlertsStatus,
	set channels.Set, send []policy.FleetAlert, now time.Time) (time.Time, error) {
	var next time.Time
	for _, ch := range set {
		if ch.Notifier == nil {
			continue
		}
		if f := policy.Failure(failing, ch.ID); f != nil && now.Before(f.NextAttemptTime.Time) {
			next = policy.Earliest(next, f.NextAttemptTime.Time)
			continue
		}
		var due []policy.FleetAlert
		for _, a := range send {
			if a.Channel == ch.ID {
				due = append(due, a)
			}
		}
		if len(due) > policy.FleetSendsPerReconcile {
			due, next = due[:policy.FleetSendsPerReconcile], policy.Earliest(next, now.Add(fleetSendsAgain))
		}
		// A slow relay holds this worker for its share of the budget at most, and leaves the
		// other channels theirs; what is left goes in a minute.
		budget, cancel := context.WithTimeout(ctx, fleetSendBudget/time.Duration(len(set)))
		err := r.sendFleetAlerts(ctx, budget, obj, book, failing, ch, due, now)
		if budget.Err() != nil {
			next = policy.Earliest(next, now.Add(fleetSendsAgain))
		}
		cancel()
		if err != nil {
			return next, err
		}
		if f := policy.Failure(failing, ch.ID); f != nil {
			next = policy.Earliest(next, f.NextAttemptTime.Time)
		}
	}
	return next, nil
}

// fleetChannels are the channels a fleet names. Never the operator's defaults: a fleet's
// messages number its clusters, and its ledger is ConfigMaps its namespace may write.
func (r *CredentialWatchReconciler) fleetChannels(ctx context.Context, obj *v1alpha1.CredentialWatch) (channels.Set, error) {
	own := *obj
	alerts := *obj.Spec.Alerts
	alerts.UseDefaultChannels = ptr.To(false)
	own.Spec.Alerts = &alerts
	return r.Channels.For(ctx, &own)
}

// sendFleetAlerts claims due in the ledger, all at once, sends them in order, and gives back
// the claims of the one that failed and those after it, or those the budget left unsent. A claim that could not be written is
// not sent: another writer holds the ledger.
func (r *CredentialWatchReconciler) sendFleetAlerts(ctx, budget context.Context, obj *v1alpha1.CredentialWatch, book *ledger.Book, failing *v1alpha1.AlertsStatus,
	ch channels.Channel, due []policy.FleetAlert, now time.Time) error {
	if len(due) == 0 {
		return nil
	}
	claims, previous := map[string]*string{}, map[string]*string{}
	for _, a := range due {
		claims[a.Key] = a.Note
		if v, ok := book.Get(a.Key); ok {
			previous[a.Key] = &v
		} else {
			previous[a.Key] = nil
		}
	}
	written, claimErr := r.Ledger.Write(ctx, book, claims)
	claimed := map[string]bool{}
	for _, k := range written {
		claimed[k] = true
	}
	giveBack := map[string]*string{}
	for _, a := range due {
		if !claimed[a.Key] {
			continue
		}
		if len(giveBack) > 0 || budget.Err() != nil || !r.send(ctx, obj, failing, ch, compose.FleetAlert(obj, a, now), now) {
			giveBack[a.Key] = previous[a.Key]
		}
	}
	if len(giveBack) > 0 {
		if _, err := r.Ledger.Write(ctx, book, giveBack); err != nil {
			return fmt.Errorf("giving back the claims of messages not sent on %s: %w", ch.ID, err)
		}
	}
	if claimErr != nil {
		return fmt.Errorf("claiming messages on %s in the fleet's ledger before sending them: %w", ch.ID, claimErr)
	}
	return nil
}

// ledgerRefused reports a ledger that cannot be read: a ConfigMap of its name the watch does not
// own, or the API server failing.
func (r *CredentialWatchReconciler) ledgerRefused(obj *v1alpha1.CredentialWatch, err error, now time.Time) (time.Time, error) {
	var foreign *ledger.ForeignError
	if !errors.As(err, &foreign) {
		return time.Time{}, err
	}
	if c := target.Condition(obj, v1alpha1.ConditionAlertsDelivered); c.Message != foreign.Error() {
		r.Recorder.Event(obj, corev1.EventTypeWarning, eventLedgerRefused, foreign.Error())
	}
	target.SetCondition(obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonDeliveryFailed, foreign.Error(), now)
	return now.Add(misconfiguredRecheck), nil
}

func ledgerOwner(obj *v1alpha1.CredentialWatch) ledger.Owner {
	return ledger.Owner{Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID, APIVersion: v1alpha1.GroupVersion.String(), Kind: "CredentialWatch"}
}
