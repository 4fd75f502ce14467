package rotation

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/target"
)

// whyRevoked says who withdrew a rotation whose identity no longer allows Rotate.
const whyRevoked = "its identity no longer allows Rotate: the new secret, which nothing used yet, is removed, as removing it takes away rights rather than using them"

// revoked reports whether the rotation st is withdrawn because its identity no longer allows
// Rotate, with the grant that removes its secret. Until its secret may be in use (Abortable),
// removing it leaves Azure as it was before the rotation, and a secret left live in Graph and in
// the staging Secret is what the admin's revocation meant to end; the identity must still allow
// watching the application. Later, the rotation waits for Rotate to be allowed again, since
// only finishing it retires the old secrets safely. It is asked of the identity the rotation
// started with, before anything the watch's author may change (an abort, the mode, the target,
// the identityRef, deletion) could hold the rotation where it is.
func (ro *Run) revoked(ctx context.Context, st v1alpha1.RotationStatus) (access.Grant, bool, error) {
	// A rotation an earlier version began (a secret made, no digest kept) may have written its
	// secret to the target Secret already, where consumers read it: not withdrawn unasked.
	if Abortable(st) != nil || (st.KeyID != "" && st.SecretDigest == "") {
		return access.Grant{}, false, nil
	}
	g, err := ro.e.Grant(ctx, ro.pin.Identity)
	var ke *target.KubernetesError
	if errors.As(err, &ke) {
		return access.Grant{}, false, err
	}
	if err != nil {
		return access.Grant{}, false, nil // the identity is gone or does not sign in: nothing can remove it
	}
	var refusal *access.Refusal
	if err := g.Allow(access.Request{Operation: v1alpha1.OperationRotate, TenantID: ro.pin.TenantID, AppID: ro.pin.AppID}); !errors.As(err, &refusal) {
		return access.Grant{}, false, nil
	}
	return g, g.Allow(access.Request{Operation: v1alpha1.OperationWatch, TenantID: ro.pin.TenantID, AppID: ro.pin.AppID}) == nil, nil
}

// abort withdraws the rotation st: only the identity's right to rotate the application is needed
// to remove the secret the rotation added. Should the identity it started with not allow that
// (gone, or narrowed), the one the spec names now may remove it, if it allows rotating the
// application: removing the secret takes rights away, and the rotation would otherwise be stuck.
func (ro *Run) abort(ctx context.Context, st v1alpha1.RotationStatus, why string) (time.Time, error) {
	g, err := ro.authorize(ctx, false)
	if err != nil && !equality.Semantic.DeepEqual(ro.e.Identity, ro.pin.Identity) {
		if sg, serr := ro.e.Grant(ctx, ro.e.Identity); serr == nil &&
			sg.Allow(access.Request{Operation: v1alpha1.OperationRotate, TenantID: ro.pin.TenantID, AppID: ro.pin.AppID}) == nil {
			g, err = sg, nil
		}
	}
	if err != nil {
		return ro.paused(err)
	}
	return ro.drive(ctx, st, g, "", func(ctx context.Context, m *Machine) (Result, error) {
		return m.Abort(ctx, st, why)
	})
}
