// Package imagepulls is what a watch's spec.imagePulls shows of the cluster's image pulls refused
// for want of credentials (found by internal/pullauth): the incidents of the registries it covers
// in status.imagePulls, the ImagePullsAuthorized condition, and an event when one opens, changes
// scope or ends. Any kind whose watch names one service principal may ask for it.
package imagepulls

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/pullauth"
	"github.com/credwatch/credwatch/internal/target"
)

// Incidents gives the registries refusing the cluster's image pulls now, once it has read what
// the cluster holds, and why it cannot read it, while it cannot.
type Incidents interface {
	Synced() (bool, error)
	Incidents(now time.Time) []pullauth.Incident
}

// Event reasons of image pulls.
const (
	EventRefused   = "ImagePullsRefused"
	EventRecovered = "ImagePullsRecovered"
)

// ListingRetry is how soon a watch looks again while the operator lists the cluster's pulls, and
// ListFailedRetry while listing fails, which its reflectors retry with their own backoff.
const (
	ListingRetry    = 5 * time.Second
	ListFailedRetry = time.Minute
)

// maxListedNodes is how many refused nodes an incident names; it counts them all.
const maxListedNodes = 10

// Show records in obj's status the incidents of the registries its spec.imagePulls covers, of
// those src knows (nil: the operator does not watch pulls), raises an event for each that opens,
// changes scope or ends, and returns when one may change next (a refusal leaving the window),
// zero for never. The alerts follow from status.imagePulls.
func Show(obj *v1alpha1.CredentialWatch, src Incidents, events target.Events, now time.Time) time.Time {
	spec := obj.Spec.ImagePulls
	previous := obj.Status.ImagePulls
	obj.Status.ImagePulls = nil
	if spec == nil {
		meta.RemoveStatusCondition(&obj.Status.Conditions, v1alpha1.ConditionImagePullsAuthorized)
		return time.Time{}
	}
	if src == nil {
		target.SetCondition(obj, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionUnknown, v1alpha1.ReasonPullsNotWatched,
			"The operator does not watch image pulls: it runs with --image-pulls=false", now)
		return time.Time{}
	}
	if synced, listErr := src.Synced(); !synced || listErr != nil {
		// The incidents in status stay as last seen until the cluster's pulls are read again.
		obj.Status.ImagePulls = previous
		return pullsNotListed(obj, listErr, now)
	}

	all, next := coveredIncidents(spec, previous, src.Incidents(now))
	obj.Status.ImagePulls = KeepIncidents(all, previous, MaxIncidents)
	next = policy.Earliest(next, tellChanges(obj, events, previous, all, now))
	if len(all) == 0 {
		covered := strings.Join(spec.Registries, ", ")
		if spec.CoversPodRegistries() {
			covered += ", or by any registry pods pull from with the node's credential"
		}
		target.SetCondition(obj, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionTrue, v1alpha1.ReasonNoPullFailures,
			"No pull refused for want of credentials by "+covered, now)
		return next
	}
	// The condition tells the worst of all, also of one status has no room for.
	worst := WorstIncident(all)
	target.SetCondition(obj, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionFalse, scopeReasons[worst.Scope], compose.PullProblem(obj, worst, now), now)
	return next
}

// pullsNotListed says, while the operator has not listed the cluster's pulls or cannot, that the
// incidents are as last seen, and returns when to look again.
func pullsNotListed(obj *v1alpha1.CredentialWatch, listErr error, now time.Time) time.Time {
	if listErr != nil {
		hint := ""
		if apierrors.IsForbidden(listErr) {
			hint = " (it needs list and watch on them cluster-wide)"
		}
		target.SetCondition(obj, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionUnknown, v1alpha1.ReasonPullsListFailed,
			target.OneLine(fmt.Sprintf("The operator cannot list or watch the cluster's pull events, pods and nodes%s, "+
				"so image pulls are as last seen: %v", hint, listErr)), now)
		return now.Add(ListFailedRetry)
	}
	// A condition from before is left for the few seconds listing takes: it is likely still true.
	if c := meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionImagePullsAuthorized); c == nil || c.Reason == v1alpha1.ReasonPullsNotWatched {
		target.SetCondition(obj, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionUnknown, v1alpha1.ReasonPullsListing,
			"The operator is listing the cluster's pull events, pods and nodes", now)
	}
	return now.Add(ListingRetry)
}

// coveredIncidents are the incidents a watch of spec hears of, as status records them, and when
// one may change next. An incident known before keeps its start: a restarted operator knows
// only the refusals still in the window.
func coveredIncidents(spec *v1alpha1.ImagePulls, previous []v1alpha1.PullIncident, incidents []pullauth.Incident) ([]v1alpha1.PullIncident, time.Time) {
	var all []v1alpha1.PullIncident
	var next time.Time
	for _, in := range incidents {
		if !covers(spec, in) {
			continue
		}
		tell := metav1.NewTime(in.Tell)
		p := v1alpha1.PullIncident{
			Registry:     in.Registry,
			Scope:        in.Scope,
			Nodes:        in.Failing[:min(len(in.Failing), maxListedNodes)],
			FailingNodes: int32(len(in.Failing)),
			PullingNodes: int32(in.Pulling),
			Since:        metav1.NewTime(in.Since),
			TellTime:     &tell,
		}
		if i := slices.IndexFunc(previous, func(b v1alpha1.PullIncident) bool { return b.Registry == in.Registry }); i >= 0 {
			if previous[i].Since.Before(&p.Since) {
				p.Since = previous[i].Since
			}
			p.ToldScope = previous[i].ToldScope
		}
		all = append(all, p)
		next = policy.Earliest(next, in.Changes)
	}
	return all, next
}

// tellChanges raises an event for each incident in status whose scope changed since it was
// last told, once it may be told, and for each told one of previous that ended. It returns when
// one may be told next. Events of one failure come from every node within seconds and are read
// one at a time: told at once, an incident would be told half understood ("Undetermined, 1
// node") and then again.
func tellChanges(obj *v1alpha1.CredentialWatch, events target.Events, previous, all []v1alpha1.PullIncident, now time.Time) time.Time {
	var next time.Time
	for i := range obj.Status.ImagePulls {
		p := &obj.Status.ImagePulls[i]
		switch {
		case p.Scope == p.ToldScope:
		case p.Scope == v1alpha1.PullScopeUndetermined && p.ToldScope != "":
			// Told before, less understood now (no other node pulled lately): no news.
		case p.TellTime != nil && now.Before(p.TellTime.Time):
			next = policy.Earliest(next, p.TellTime.Time)
		default:
			events.Event(obj, corev1.EventTypeWarning, EventRefused, compose.PullProblem(obj, *p, now))
			p.ToldScope = p.Scope
		}
	}
	ended := map[string]bool{}
	for _, p := range previous {
		ended[p.Registry] = p.ToldScope != ""
	}
	for _, p := range all {
		delete(ended, p.Registry)
	}
	for registry, told := range ended {
		if told {
			events.Eventf(obj, corev1.EventTypeNormal, EventRecovered, "%s refuses no image pull any more", registry)
		}
	}
	return next
}

// covers says whether a watch of spec hears of incident.
func covers(spec *v1alpha1.ImagePulls, in pullauth.Incident) bool {
	return pullauth.Matches(spec.Registries, in.Registry) || (spec.CoversPodRegistries() && in.NodeCredential)
}

// MaxIncidents bounds status.imagePulls, as the CRD does.
const MaxIncidents = 16

var scopeReasons = map[v1alpha1.PullScope]string{
	v1alpha1.PullScopeClusterWide:  v1alpha1.ReasonClusterWidePullFailures,
	v1alpha1.PullScopeNodeLocal:    v1alpha1.ReasonNodeLocalPullFailures,
	v1alpha1.PullScopeUndetermined: v1alpha1.ReasonPullFailures,
}
