package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/target"
)

// record puts what a check found into status.
func (r *CredentialWatchReconciler) record(ctx context.Context, w *watchState, res checkResult) {
	obj, now := w.obj, w.now
	if res.issuer != nil {
		r.recordIssuer(obj, *res.issuer, now)
		return
	}
	if res.tenant {
		r.scan().Record(obj, res.scan, now)
		return
	}
	if res.fleet != nil {
		r.fleet().Record(obj, *res.fleet, now)
		return
	}
	obj.Status.TenantScan, obj.Status.Fleet = nil, nil // a watch that scanned a tenant or a fleet before its spec changed
	if res.managedIdentity {
		obj.Status.ServicePrincipal, obj.Status.Credentials = nil, nil
		target.SetCondition(obj, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonManagedIdentity,
			"The AKS cluster signs in with a managed identity: it has no secret to expire", now)
		return
	}
	snap := res.snap
	var owners []string
	if obj.Status.ServicePrincipal != nil {
		owners = obj.Status.ServicePrincipal.OwnerEmails
	}
	obj.Status.ServicePrincipal = &v1alpha1.ServicePrincipalStatus{
		AppID:                    res.appID,
		DisplayName:              snap.DisplayName,
		ApplicationObjectID:      snap.ApplicationObjectID,
		ServicePrincipalObjectID: snap.ServicePrincipalObjectID,
		SingleSignOnMode:         snap.SingleSignOnMode,
		OwnerEmails:              r.ownerEmails(ctx, obj, res, owners),
	}
	obj.Status.Credentials = target.Credentials(snap)
	target.SetCondition(obj, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked, checkedMessage(snap), now)
	ctrl.LoggerFrom(ctx).V(1).Info("Read credentials", "credentials", len(snap.Credentials), "nextCheck", obj.Status.NextCheckTime.UTC().Format(time.RFC3339))
}

// ownerEmails reads the application's owners when the watch mails them, keeping what was known
// when they cannot be read: the credentials were read, and that is what the check is for.
func (r *CredentialWatchReconciler) ownerEmails(ctx context.Context, obj *v1alpha1.CredentialWatch, res checkResult, known []string) []string {
	snap := res.snap
	if !r.Channels.NotifiesOwners(obj) || snap.ApplicationObjectID == "" {
		return nil
	}
	if err := res.grant.Allow(access.Request{Operation: v1alpha1.OperationReadOwners, TenantID: res.id.TenantID, AppID: snap.AppID}); err != nil {
		// Not allowed any more: what was read while it was is not kept either.
		r.Recorder.Eventf(obj, corev1.EventTypeWarning, eventOwnersUnreadable, "The application's owners are not read, so they are not mailed: %v", err)
		return nil
	}
	var owners []string
	app, err := r.Azure.Application(res.id, graph.AppRef{AppID: snap.AppID, ObjectID: snap.ApplicationObjectID})
	if err == nil {
		if owners, err = app.ReadOwnerEmails(ctx); err == nil {
			return owners
		}
	}
	ctrl.LoggerFrom(ctx).Info("Reading the application's owners failed", "error", err.Error())
	r.Recorder.Eventf(obj, corev1.EventTypeWarning, eventOwnersUnreadable, "Reading the application's owners failed, so they are not mailed: %v", err)
	return known
}

// forgetCredentials drops what was known of a service principal that no longer exists, so that
// neither status nor metrics go on reporting credentials that are gone.
func forgetCredentials(obj *v1alpha1.CredentialWatch) {
	st := &obj.Status
	st.ServicePrincipal, st.AKSCluster, st.Credentials, st.LastCheckTime = nil, nil, nil, nil
	st.State, st.EarliestExpiry, st.ExpiresIn = "", nil, ""
	meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionExpiring)
	meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionExpired)
}

// recordCluster notes what Resource Manager said of the cluster, and tells when the identity it
// signs in with changed: the credentials watched from now on are another service principal's.
func (r *CredentialWatchReconciler) recordCluster(obj *v1alpha1.CredentialWatch, c aks.Cluster) {
	now := &v1alpha1.AKSClusterStatus{Identity: v1alpha1.IdentityServicePrincipal, ClientID: c.ClientID,
		ProvisioningState: c.ProvisioningState, PowerState: c.PowerState}
	if c.ClientID == "" {
		now.Identity = v1alpha1.IdentityManagedIdentity
	}
	if prev := obj.Status.AKSCluster; prev != nil && (prev.ClientID != now.ClientID || prev.Identity != now.Identity) {
		r.Recorder.Eventf(obj, corev1.EventTypeNormal, eventServicePrincipalChanged, "The AKS cluster now signs in with %s (it was %s)",
			clusterIdentity(now), clusterIdentity(prev))
	}
	obj.Status.AKSCluster = now
}

func clusterIdentity(s *v1alpha1.AKSClusterStatus) string {
	if s.Identity == v1alpha1.IdentityManagedIdentity {
		return "a managed identity"
	}
	return "service principal " + s.ClientID
}

func checkedMessage(snap graph.Snapshot) string {
	var where string
	switch {
	case snap.ApplicationObjectID != "" && snap.ServicePrincipalObjectID != "":
		where = "the application and its service principal"
	case snap.ApplicationObjectID != "":
		where = "the application; the tenant has no service principal for it"
	default:
		where = "the service principal; the application object is not in this tenant, so credentials on it are not seen"
	}
	return fmt.Sprintf("Read %d credentials of %q from %s", len(snap.Credentials), snap.DisplayName, where)
}
