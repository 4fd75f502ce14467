package aksfleet

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/ptr"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alerting"
	"github.com/credwatch/credwatch/internal/ledger"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// sendsAgain is how soon a fleet comes back for the messages one reconcile left.
const sendsAgain = time.Minute

// sendBudget bounds the time one reconcile of a fleet spends sending, shared out among its
// channels: ten messages on four channels to relays that answer slowly would hold a worker for
// ten minutes otherwise, and one slow channel would leave the others nothing.
const sendBudget = time.Minute

// NoChannels is the AlertsDelivered message of a fleet that names no channel.
const NoChannels = "No alert channel: a fleet tells only the channels its spec.alerts names (slack, email, teams or webhook), not the operator's defaults"

// WithOwnChannels is obj as its channels are built: never with the operator's defaults, since a
// fleet's messages number its clusters and its ledger is ConfigMaps its namespace may write.
func WithOwnChannels(obj *v1alpha1.CredentialWatch) *v1alpha1.CredentialWatch {
	own := *obj
	alerts := *obj.Spec.Alerts
	alerts.UseDefaultChannels = ptr.To(false)
	own.Spec.Alerts = &alerts
	return &own
}

// Outbox is how a fleet's messages leave: its channels, their failures, the ledger of what each
// was told, and the sending itself, which the reconciler shares with every watch.
type Outbox struct {
	Channels channels.Set
	// Failing are the channels' failures and backoff, as status.alerts keeps them.
	Failing *v1alpha1.AlertsStatus
	// Book is the fleet's ledger as loaded, written through Ledger.
	Book   *ledger.Book
	Ledger target.Ledger
	// Send delivers a, claimed already, on ch, and reports whether it went out; a failure is
	// kept in Failing with the next attempt's time.
	Send func(ctx context.Context, ch channels.Channel, a notify.Alert) bool
}

// Tell tells a fleet's channels of its clusters, one message per cluster and step, as PlanAlerts
// decides from what this process's last check found (n). What each channel was told is kept in
// the fleet's ledger (ConfigMaps it owns: a thousand clusters on four channels outgrow a
// status), claimed with an optimistic lock before the messages go out and given back for those
// that fail, so a restarted operator or a new leader tells nothing twice. It returns when
// messages next need attention.
func (f Fleet) Tell(ctx context.Context, obj *v1alpha1.CredentialWatch, n *Now, o Outbox, now time.Time) (time.Time, error) {
	plan := PlanAlerts(AlertInputs{Channels: o.Channels.IDs(), Views: n.Views, Found: n.Shown.Clusters, Known: n.Found.Clusters, Complete: n.Shown.Complete,
		AllComplete: len(n.Found.Unread) == 0 && n.Found.Complete != nil, Ledger: o.Book.Get, Entries: o.Book.Entries, Now: now})
	if len(plan.Record) > 0 {
		if _, err := o.Ledger.Write(ctx, o.Book, plan.Record); err != nil {
			return time.Time{}, fmt.Errorf("recording the fleet's clusters in its ledger: %w", err)
		}
	}
	var next time.Time
	for _, ch := range o.Channels {
		if ch.Notifier == nil {
			continue
		}
		if fl := alerting.Failure(o.Failing, ch.ID); fl != nil && now.Before(fl.NextAttemptTime.Time) {
			next = policy.Earliest(next, fl.NextAttemptTime.Time)
			continue
		}
		var due []Alert
		for _, a := range plan.Send {
			if a.Channel == ch.ID {
				due = append(due, a)
			}
		}
		if len(due) > SendsPerReconcile {
			due, next = due[:SendsPerReconcile], policy.Earliest(next, now.Add(sendsAgain))
		}
		// A slow relay holds this worker for its share of the budget at most, and leaves the
		// other channels theirs; what is left goes in a minute.
		budget, cancel := context.WithTimeout(ctx, sendBudget/time.Duration(len(o.Channels)))
		err := o.send(ctx, budget, obj, ch, due, now)
		if budget.Err() != nil {
			next = policy.Earliest(next, now.Add(sendsAgain))
		}
		cancel()
		if err != nil {
			return next, err
		}
		if fl := alerting.Failure(o.Failing, ch.ID); fl != nil {
			next = policy.Earliest(next, fl.NextAttemptTime.Time)
		}
	}
	return next, nil
}

// send claims due in the ledger, all at once, sends them in order, and gives back the claims of
// the one that failed and those after it, or those the budget left unsent. A claim that could
// not be written is not sent: another writer holds the ledger.
func (o Outbox) send(ctx, budget context.Context, obj *v1alpha1.CredentialWatch, ch channels.Channel, due []Alert, now time.Time) error {
	if len(due) == 0 {
		return nil
	}
	claims, previous := map[string]*string{}, map[string]*string{}
	for _, a := range due {
		claims[a.Key] = a.Note
		if v, ok := o.Book.Get(a.Key); ok {
			previous[a.Key] = &v
		} else {
			previous[a.Key] = nil
		}
	}
	written, claimErr := o.Ledger.Write(ctx, o.Book, claims)
	claimed := map[string]bool{}
	for _, k := range written {
		claimed[k] = true
	}
	giveBack := map[string]*string{}
	for _, a := range due {
		if !claimed[a.Key] {
			continue
		}
		if len(giveBack) > 0 || budget.Err() != nil || !o.Send(ctx, ch, Message(obj, a, now)) {
			giveBack[a.Key] = previous[a.Key]
		}
	}
	if len(giveBack) > 0 {
		if _, err := o.Ledger.Write(ctx, o.Book, giveBack); err != nil {
			return fmt.Errorf("giving back the claims of messages not sent on %s: %w", ch.ID, err)
		}
	}
	if claimErr != nil {
		return fmt.Errorf("claiming messages on %s in the fleet's ledger before sending them: %w", ch.ID, claimErr)
	}
	return nil
}
