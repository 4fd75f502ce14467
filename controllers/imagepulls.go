package controllers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/pullauth"
)

// PullIncidents gives the registries refusing the cluster's image pulls now, once it has read what
// the cluster holds, and why it cannot read it, while it cannot.
type PullIncidents interface {
	Synced() (bool, error)
	Incidents(now time.Time) []pullauth.Incident
}

// Event reasons of image pulls.
const (
	eventImagePullsRefused   = "ImagePullsRefused"
	eventImagePullsRecovered = "ImagePullsRecovered"
)

// reasonPullsNotWatched: the watch asks for image pulls, and this operator does not watch them.
// reasonPullsListing: the operator has not listed the cluster's pulls yet; reasonPullsListFailed:
// it cannot.
const (
	reasonPullsNotWatched = "NotWatched"
	reasonPullsListing    = "Listing"
	reasonPullsListFailed = "ListFailed"
)

// listingRetry is how soon a watch looks again while the operator lists the cluster's pulls, and
// listFailedRetry while listing fails, which its reflectors retry with their own backoff.
const (
	listingRetry    = 5 * time.Second
	listFailedRetry = time.Minute
)

// maxListedNodes is how many refused nodes an incident names; it counts them all.
const maxListedNodes = 10

// reconcileImagePulls records the incidents of the registries spec.imagePulls covers, raises an
// event for each that opens, changes scope or ends, and returns when one may change next (a
// refusal leaving the window), zero for never. The alerts follow from status.imagePulls.
func (r *CredentialWatchReconciler) reconcileImagePulls(obj *v1alpha1.CredentialWatch, now time.Time) time.Time {
	spec := obj.Spec.ImagePulls
	previous := obj.Status.ImagePulls
	obj.Status.ImagePulls = nil
	if spec == nil {
		meta.RemoveStatusCondition(&obj.Status.Conditions, v1alpha1.ConditionImagePullsAuthorized)
		return time.Time{}
	}
	if r.ImagePulls == nil {
		setCondition(obj, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionUnknown, reasonPullsNotWatched,
			"The operator does not watch image pulls: it runs with --image-pulls=false", now)
		return time.Time{}
	}

	if synced, listErr := r.ImagePulls.Synced(); !synced || listErr != nil {
		// The incidents in status stay as last seen until the cluster's pulls are read again.
		obj.Status.ImagePulls = previous
		if listErr != nil {
			hint := ""
			if apierrors.IsForbidden(listErr) {
				hint = " (it needs list and watch on them cluster-wide)"
			}
			setCondition(obj, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionUnknown, reasonPullsListFailed,
				oneLine(fmt.Sprintf("The operator cannot list or watch the cluster's pull events, pending pods and nodes%s, "+
					"so image pulls are as last seen: %v", hint, listErr)), now)
			return now.Add(listFailedRetry)
		}
		// A condition from before is left for the few seconds listing takes: it is likely still true.
		if c := meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionImagePullsAuthorized); c == nil || c.Reason == reasonPullsNotWatched {
			setCondition(obj, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionUnknown, reasonPullsListing,
				"The operator is listing the cluster's pull events, pending pods and nodes", now)
		}
		return now.Add(listingRetry)
	}

	was := map[string]v1alpha1.PullIncident{}
	for _, p := range previous {
		was[p.Registry] = p
	}
	var all []v1alpha1.PullIncident
	var next time.Time
	for _, in := range r.ImagePulls.Incidents(now) {
		if !covers(spec, in) {
			continue
		}
		p := v1alpha1.PullIncident{
			Registry:     in.Registry,
			Scope:        in.Scope,
			Nodes:        in.Failing[:min(len(in.Failing), maxListedNodes)],
			FailingNodes: int32(len(in.Failing)),
			PullingNodes: int32(in.Pulling),
			Since:        metav1.NewTime(in.Since),
		}
		// A restarted operator knows only the refusals still in the window.
		if before, ok := was[in.Registry]; ok && before.Since.Before(&p.Since) {
			p.Since = before.Since
		}
		all = append(all, p)
		if next.IsZero() || in.Changes.Before(next) {
			next = in.Changes
		}
	}
	obj.Status.ImagePulls = all
	if len(all) > maxPullIncidents {
		// The incidents told of already stay: one must not seem to end because others began.
		// The rest fill what is left, the most serious first. Status lists them by registry.
		kept := slices.Clone(all)
		slices.SortStableFunc(kept, func(a, b v1alpha1.PullIncident) int {
			_, aTold := was[a.Registry]
			_, bTold := was[b.Registry]
			if aTold != bTold {
				if aTold {
					return -1
				}
				return 1
			}
			return cmp.Compare(scopeRank[b.Scope], scopeRank[a.Scope])
		})
		kept = kept[:maxPullIncidents]
		slices.SortFunc(kept, func(a, b v1alpha1.PullIncident) int { return cmp.Compare(a.Registry, b.Registry) })
		obj.Status.ImagePulls = kept
	}

	for _, p := range obj.Status.ImagePulls {
		if before, ok := was[p.Registry]; !ok || before.Scope != p.Scope {
			r.Recorder.Event(obj, corev1.EventTypeWarning, eventImagePullsRefused, pullProblem(obj, p, now))
		}
	}
	for _, p := range all {
		delete(was, p.Registry)
	}
	for registry := range was {
		r.Recorder.Eventf(obj, corev1.EventTypeNormal, eventImagePullsRecovered, "%s refuses no image pull any more", registry)
	}

	if len(all) == 0 {
		covered := strings.Join(spec.Registries, ", ")
		if spec.CoversPodRegistries() {
			covered += ", or by any registry pods pull from with the node's credential"
		}
		setCondition(obj, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionTrue, v1alpha1.ReasonNoPullFailures,
			"No pull refused for want of credentials by "+covered, now)
		return next
	}
	// The condition tells the worst of all, also of one status has no room for.
	worst := all[0]
	for _, p := range all[1:] {
		if scopeRank[p.Scope] > scopeRank[worst.Scope] {
			worst = p
		}
	}
	setCondition(obj, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionFalse, scopeReasons[worst.Scope], pullProblem(obj, worst, now), now)
	return next
}

// covers says whether a watch of spec hears of incident.
func covers(spec *v1alpha1.ImagePulls, in pullauth.Incident) bool {
	return pullauth.Matches(spec.Registries, in.Registry) || (spec.CoversPodRegistries() && in.NodeCredential)
}

// maxPullIncidents bounds status.imagePulls, as the CRD does.
const maxPullIncidents = 16

var scopeRank = map[v1alpha1.PullScope]int{v1alpha1.PullScopeUndetermined: 0, v1alpha1.PullScopeNodeLocal: 1, v1alpha1.PullScopeClusterWide: 2}

var scopeReasons = map[v1alpha1.PullScope]string{
	v1alpha1.PullScopeClusterWide:  v1alpha1.ReasonClusterWidePullFailures,
	v1alpha1.PullScopeNodeLocal:    v1alpha1.ReasonNodeLocalPullFailures,
	v1alpha1.PullScopeUndetermined: v1alpha1.ReasonPullFailures,
}

// pullProblem says what an incident is and, for the whole cluster, what the watched service
// principal's credentials have to do with it.
func pullProblem(obj *v1alpha1.CredentialWatch, p v1alpha1.PullIncident, now time.Time) string {
	nodes := notify.Some(p.Nodes, int(p.FailingNodes))
	switch p.Scope {
	case v1alpha1.PullScopeClusterWide:
		return fmt.Sprintf("%s refuses image pulls for want of credentials on %s (%s): the cluster's credential. %s",
			p.Registry, notify.Plural(int(p.FailingNodes), "node"), nodes, credentialCause(obj, now))
	case v1alpha1.PullScopeNodeLocal:
		return fmt.Sprintf("%s refuses image pulls for want of credentials on %s only (%s), while %s pull from it: "+
			"the kubelet there presents no credential, typically because its credential provider was disabled at start-up, "+
			"when the managed-identity endpoint was not reachable yet", p.Registry, notify.Plural(int(p.FailingNodes), "node"), nodes, notify.Plural(int(p.PullingNodes), "other node"))
	default:
		return fmt.Sprintf("%s refuses image pulls for want of credentials on %s (%s); no other node pulled from it lately, "+
			"so it is too early to tell the cluster's credential from a node's kubelet", p.Registry, notify.Plural(int(p.FailingNodes), "node"), nodes)
	}
}

// credentialCause relates a cluster-wide refusal to the state of the watched credentials.
func credentialCause(obj *v1alpha1.CredentialWatch, now time.Time) string {
	if obj.Status.LastCheckTime == nil {
		return "credwatch has not read the service principal's credentials yet."
	}
	var latest *v1alpha1.Credential
	for i, c := range obj.Status.Credentials {
		if c.Type == v1alpha1.CredentialTypePassword && !c.EndTime.After(now) && (latest == nil || c.EndTime.After(latest.EndTime.Time)) {
			latest = &obj.Status.Credentials[i]
		}
	}
	if latest != nil {
		return fmt.Sprintf("The client secret %s of the service principal expired %s ago: this is why.",
			describeSecret(*latest), policy.HumanDuration(now.Sub(latest.EndTime.Time)))
	}
	return "The service principal's credentials are all valid: look at the registry's AcrPull role assignment and at the cluster's servicePrincipalProfile."
}

func describeSecret(c v1alpha1.Credential) string {
	switch {
	case c.DisplayName != "":
		return fmt.Sprintf("%q", c.DisplayName)
	case c.Hint != "":
		return fmt.Sprintf("%s...", c.Hint)
	}
	return c.KeyID
}

// pullFix says what a person should do about an incident.
func pullFix(obj *v1alpha1.CredentialWatch, p v1alpha1.PullIncident) string {
	if p.Scope == v1alpha1.PullScopeNodeLocal {
		node := p.Nodes[0]
		return fmt.Sprintf("Restart kubelet on %s (kubectl debug node/%s -it --image=mcr.microsoft.com/azurelinux/busybox:1.36 -- chroot /host systemctl restart kubelet), "+
			"or reimage the node; make kubelet start after network-online.target and cloud-init so it does not happen again.", notify.Some(p.Nodes, int(p.FailingNodes)), node)
	}
	cmd := "az ad app credential reset --id " + obj.AppID() + " --append"
	if c := obj.Spec.Target.AKSCluster; c != nil {
		cmd += fmt.Sprintf(", then az aks update-credentials --resource-group %s --name %s --reset-service-principal --service-principal %s --client-secret <the new secret>",
			c.ResourceGroup, c.Name, obj.AppID())
	}
	return cmd
}

// watchesOfRegistry maps a registry whose incident changed to the watches whose spec.imagePulls
// covers it.
func watchesOfRegistry(c client.Reader) func(ctx context.Context, registry string) []reconcile.Request {
	return func(ctx context.Context, registry string) []reconcile.Request {
		var list v1alpha1.CredentialWatchList
		if err := c.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
			// Only before the cache syncs; the watches' own reconciles catch up after.
			ctrl.LoggerFrom(ctx).Error(err, "Listing the watches of a registry whose image pulls changed", "registry", registry)
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			w := &list.Items[i]
			// A registry that turned into a pods' registry may concern any watch that covers them.
			if p := w.Spec.ImagePulls; p != nil && (p.CoversPodRegistries() || pullauth.Matches(p.Registries, registry)) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
			}
		}
		return out
	}
}
