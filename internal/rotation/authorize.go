package rotation

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/target"
)

// authorize finds the watch's identity and checks that it allows what the rotation does from its
// step on: rotating the application's secrets, and, with reset (a rotation going on), publishing
// them to the Key Vaults and GitHub repositories the spec names and, until the cluster has been moved onto the new one,
// resetting the cluster. It is asked at every reconcile, before any call to Azure, so that an
// identity that no longer allows the rotation stops it at its next step.
func (ro *Run) authorize(ctx context.Context, reset bool) (access.Grant, error) {
	g, err := ro.e.Grant(ctx, ro.pin.Identity)
	if err != nil {
		return access.Grant{}, err
	}
	if err := g.Allow(access.Request{Operation: v1alpha1.OperationRotate, TenantID: ro.pin.TenantID, AppID: ro.pin.AppID}); err != nil {
		return access.Grant{}, err
	}
	for _, sink := range ro.spec.Publish {
		// Only a rotation going on publishes: an abort or a release must not wait on a sink.
		if !reset {
			break
		}
		if kv := sink.KeyVault; kv != nil {
			if _, err := ro.sinkGrant(ctx, g, kv); err != nil {
				return access.Grant{}, err
			}
		}
		if gh := sink.GitHubActions; gh != nil {
			if err := g.Allow(access.Request{Operation: v1alpha1.OperationPublishGitHub, TenantID: ro.pin.TenantID, AppID: ro.pin.AppID, GitHubRepository: gh.RepositoryURL()}); err != nil {
				return access.Grant{}, err
			}
		}
	}
	if c := ro.pin.Cluster; c != nil && reset && !ro.retiring() {
		where := &access.Cluster{SubscriptionID: c.SubscriptionID, ResourceGroup: c.ResourceGroup}
		if err := g.Allow(access.Request{Operation: v1alpha1.OperationResetCluster, TenantID: ro.pin.TenantID, Cluster: where}); err != nil {
			return access.Grant{}, err
		}
	}
	return g, nil
}

// sinkGrant is the identity that writes kv, as it allows that: kv's identityRef, found as the
// watch may use it, or else g, the rotation's.
func (ro *Run) sinkGrant(ctx context.Context, g access.Grant, kv *v1alpha1.KeyVaultSink) (access.Grant, error) {
	req := access.Request{Operation: v1alpha1.OperationPublishKeyVault, TenantID: ro.pin.TenantID, AppID: ro.pin.AppID, KeyVault: kv.VaultURL}
	if kv.IdentityRef == nil {
		return g, g.Allow(req)
	}
	sg, err := ro.e.Grant(ctx, kv.IdentityRef)
	if err == nil {
		err = sg.Allow(req)
	}
	if err != nil {
		return access.Grant{}, fmt.Errorf("the identityRef of %s: %w", kv.Name(), err)
	}
	return sg, nil
}

func (ro *Run) retiring() bool {
	st := ro.obj.Status.Rotation
	return st != nil && st.Step == v1alpha1.StepRetiring
}

// paused shows a rotation that its identity does not allow, or that has no identity, as Rotating
// False with the reason, and does nothing else: whatever step it reached stays as it was, and
// it goes on when the identity allows it again (a change to the identity reconciles the watch).
func (ro *Run) paused(err error) (time.Time, error) {
	var ke *target.KubernetesError
	if errors.As(err, &ke) {
		return time.Time{}, ke
	}
	reason, msg := Paused(err, ro.obj.Status.Rotation)
	if prev := target.Condition(ro.obj, v1alpha1.ConditionRotating); prev.Reason != reason {
		ro.e.Events.Event(corev1.EventTypeWarning, reason, msg)
	}
	ro.condition(metav1.ConditionFalse, reason, msg)
	return time.Time{}, nil
}
