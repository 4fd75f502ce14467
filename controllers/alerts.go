package controllers

import (
	"context"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/alerting"
	"github.com/credwatch/credwatch/internal/alerting/delivery"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/notify/email"
)

// ChannelSource builds the alert channels of a watch.
type ChannelSource interface {
	// For builds the watch's channels; id is its identity, which decides whether the default
	// channels mail the application's owners.
	For(ctx context.Context, obj *v1alpha1.CredentialWatch, id access.Identity) (channels.Set, error)
	// NotifiesOwners reports whether the watch's alerts mail the application's owners.
	NotifiesOwners(obj *v1alpha1.CredentialWatch, id access.Identity) bool
	// Digests is the relay of a tenant scan's owner digests.
	Digests(ctx context.Context, obj *v1alpha1.CredentialWatch, e *v1alpha1.DigestEmail) (*email.Channel, error)
}

// reconcileAlerts sends the alerts that have fallen due on each channel (delivery.Sender),
// and returns when alerts next need attention, zero for never. Claims are written into w.stored
// too, the base of the reconcile's deferred status patch, so that patch does not mistake them
// for its own.
func (r *CredentialWatchReconciler) reconcileAlerts(ctx context.Context, w *watchState) (time.Time, error) {
	// An identity that cannot be found now mails no owner through the default channels.
	g, _ := r.grantOnce(ctx, w)
	set, cfgErr := r.Channels.For(ctx, w.obj, g.Identity)
	return r.sender(w).Watch(ctx, set, cfgErr, w.settings)
}

// sender sends the watch's alerts, claiming each in its status first.
func (r *CredentialWatchReconciler) sender(w *watchState) delivery.Sender {
	return delivery.Sender{Obj: w.obj, Events: r.Recorder, Now: w.now,
		Claim: func(ctx context.Context, ledger *v1alpha1.AlertsStatus) error {
			return r.writeNow(ctx, w.obj, w.stored, func(s *v1alpha1.CredentialWatchStatus) { s.Alerts = ledger.DeepCopy() })
		},
		Compose: func(p alerting.Planned) notify.Alert { return compose.Alert(w.obj, p, w.now) },
	}
}
