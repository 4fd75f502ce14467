package controllers

import (
	"context"

	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/identity"
)

// identities finds the identities of watches, in the cache.
func (r *CredentialWatchReconciler) identities() identity.Finder {
	return identity.Finder{Client: r.Client, Default: r.DefaultIdentity}
}

// signIns reads how the identities of watches sign in, from their Secrets and ServiceAccounts.
func (r *CredentialWatchReconciler) signIns() identity.SignIns {
	return identity.SignIns{Secrets: r.SecretReader, OperatorNamespace: r.OperatorNamespace}
}

// grantOnce is the watch's identity, found at most once a reconcile: the check and the rotation
// ask the same question of the same cache, and would get the same answer.
func (r *CredentialWatchReconciler) grantOnce(ctx context.Context, w *watchState) (access.Grant, error) {
	if !w.granted {
		w.grant, w.grantErr = r.identities().Grant(ctx, w.obj)
		w.granted = true
	}
	return w.grant, w.grantErr
}
