package controllers

import (
	"context"
	"time"

	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
)

// scan is the tenantScan kind on this reconciler's edges.
func (r *CredentialWatchReconciler) scan() tenantscan.Scan {
	return tenantscan.Scan{Events: r.Recorder, Store: r.Scans, Digests: r.Digests, Pace: r.DigestPace, Ledger: r.Ledger, Relays: r.Channels,
		Own: r.Paces, Added: r.CredentialsAdded}
}

// reconcileDigests mails a tenant scan's owner digests (tenantscan.Scan.Digest), reading the
// owners through the watch's identity.
func (r *CredentialWatchReconciler) reconcileDigests(ctx context.Context, w *watchState) (time.Time, error) {
	obj := w.obj
	if obj.Spec.Target.TenantScan.OwnerDigests == nil {
		r.forgetDigests(w)
		return time.Time{}, nil
	}
	owners := tenantscan.Owners{
		Grant: func() (access.Grant, error) { return r.grantOnce(ctx, w) },
		Tenant: func(ctx context.Context, g access.Grant) (graph.TenantClient, error) {
			id, err := r.signIns().Identity(ctx, g.Identity, obj.Spec.Target.TenantID())
			if err != nil {
				return nil, nil // the check says why
			}
			return r.Azure.Tenant(id)
		},
	}
	return r.scan().Digest(ctx, obj, owners, w.settings.Thresholds, w.settings.Hygiene, w.now)
}

// forgetDigests forgets the owner digests of a watch that mails none.
func (r *CredentialWatchReconciler) forgetDigests(w *watchState) {
	w.obj.Status.OwnerDigests = nil
	r.Digests.Forget(target.KeyOf(w.obj))
}
