package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/fleets"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/scans"
)

const (
	// fleetListings bounds the subscriptions a fleet's check lists at once: Resource Manager
	// counts reads per identity and subscription, and a listing is a page a second or so.
	fleetListings = 4
	// fleetReads bounds the service principals a fleet's check reads at once. The read planner
	// packs concurrent reads of one identity into lists of appIds, so the bound is what one
	// batch of lists reads, not one.
	fleetReads = graph.MaxListedAppIDs
)

const (
	eventSubscriptionsUnread = "SubscriptionsUnread"
	eventSubscriptionsRead   = "SubscriptionsRead"
)

// readFleet lists the clusters of the fleet's subscriptions and reads the credentials of the
// service principals they sign in with. A subscription that cannot be listed is reported with
// the reason, and the others are read; the check fails only when none could be.
func (r *CredentialWatchReconciler) readFleet(ctx context.Context, g grant, id azure.Identity, t *v1alpha1.AKSFleetTarget) (fleets.Found, error) {
	fc, err := r.Azure.Fleet(id, t.TenantID)
	if err != nil {
		return fleets.Found{}, err
	}
	subs, explicit := t.Subscriptions, len(t.Subscriptions) > 0
	if !explicit {
		listed, err := fc.Subscriptions(ctx)
		if err != nil {
			return fleets.Found{}, &clusterError{err}
		}
		subs = nil
		for _, s := range listed {
			subs = append(subs, s.ID)
		}
	}
	listings := r.listFleet(ctx, fc, g, t, subs, explicit)
	var found fleets.Found
	var firstErr error
	for _, l := range listings {
		found.Subscriptions++
		if l.err != nil {
			if firstErr == nil {
				firstErr = l.err
			}
			found.Unread = append(found.Unread, v1alpha1.UnreadSubscription{SubscriptionID: l.sub, Reason: unreadReason(l.err), Message: l.err.Error()})
		}
		// What a failed listing found before it failed is reported too: those clusters exist.
		for _, c := range l.clusters {
			if !tagged(c.Tags, t.Tags) {
				continue
			}
			found.Clusters = append(found.Clusters, policy.FleetCluster{ID: c.ID, SubscriptionID: c.Ref.SubscriptionID, AppID: strings.ToLower(c.ClientID)})
		}
	}
	if found.Subscriptions > 0 && len(found.Unread) == found.Subscriptions {
		return fleets.Found{}, &clusterError{firstErr}
	}
	r.readFleetCredentials(ctx, g, id, t.TenantID, found.Clusters)
	if err := ctx.Err(); err != nil {
		if ue := azerr.Unanswered(err); ue != nil {
			return fleets.Found{}, ue
		}
		return fleets.Found{}, err
	}
	return found, nil
}

type fleetListing struct {
	sub      string
	clusters []aks.ListedCluster
	err      error
}

// listFleet lists the clusters of each subscription where the identity allows it. A
// subscription the watch names that the identity does not cover is reported; one that only the
// list of subscriptions showed is not the fleet's, and is left out.
func (r *CredentialWatchReconciler) listFleet(ctx context.Context, fc aks.FleetClient, g grant, t *v1alpha1.AKSFleetTarget, subs []string, explicit bool) []fleetListing {
	out := make([]fleetListing, 0, len(subs))
	var wg sync.WaitGroup
	var mu sync.Mutex
	slots := make(chan struct{}, fleetListings)
	for _, sub := range subs {
		groups, err := access.ListedGroups(g.id, g.ns, t.TenantID, sub, t.ResourceGroups)
		if err != nil {
			if explicit {
				out = append(out, fleetListing{sub: sub, err: err})
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			clusters, err := fc.Clusters(ctx, sub, groups)
			mu.Lock()
			defer mu.Unlock()
			out = append(out, fleetListing{sub: sub, clusters: clusters, err: err})
		}()
	}
	wg.Wait()
	return out
}

// readFleetCredentials reads the credentials of each service principal the clusters sign in
// with, once however many clusters share it, into the clusters; a cluster whose service
// principal the identity does not cover, or that could not be read, says why instead.
func (r *CredentialWatchReconciler) readFleetCredentials(ctx context.Context, g grant, id azure.Identity, tenant string, clusters []policy.FleetCluster) {
	type answer struct {
		creds  []v1alpha1.Credential
		reason string
	}
	answers := map[string]*answer{}
	for _, c := range clusters {
		if c.AppID != "" && answers[c.AppID] == nil {
			answers[c.AppID] = &answer{}
		}
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, fleetReads)
	for appID, a := range answers {
		if err := g.allow(access.Request{Operation: v1alpha1.OperationWatch, TenantID: tenant, AppID: appID}); err != nil {
			a.reason = v1alpha1.ReasonIdentityNotAllowed
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			app, err := r.Azure.Application(id, graph.AppRef{AppID: appID})
			if err != nil {
				a.reason = reasonFor(err)
				return
			}
			snap, err := app.ReadCredentials(ctx)
			if err != nil {
				a.reason = reasonFor(err)
				return
			}
			a.creds = scans.Credentials(snap)
		}()
	}
	wg.Wait()
	for i := range clusters {
		if a := answers[clusters[i].AppID]; a != nil {
			clusters[i].Credentials, clusters[i].Reason = a.creds, a.reason
		}
	}
}

// tagged reports whether tags carry every tag wanted, with its value, or any value where the
// wanted value is empty.
func tagged(tags, wanted map[string]string) bool {
	for k, v := range wanted {
		got, ok := tags[k]
		if !ok || (v != "" && got != v) {
			return false
		}
	}
	return true
}

// unreadReason is why a subscription could not be listed, in a word.
func unreadReason(err error) string {
	var refusal *access.Refusal
	if errors.As(err, &refusal) {
		return v1alpha1.ReasonIdentityNotAllowed
	}
	switch azerr.KindOf(err) {
	case azerr.KindForbidden:
		return "Forbidden"
	case azerr.KindNotFound:
		return "NotFound"
	case azerr.KindThrottled:
		return v1alpha1.ReasonThrottled
	case azerr.KindUnavailable:
		return "Unavailable"
	case azerr.KindUnauthenticated:
		return v1alpha1.ReasonAuthenticationFailed
	}
	return "Error"
}

// recordFleet keeps what a fleet's check found for its next reconciles and the metrics, and says
// in status and events which subscriptions could not be read.
func (r *CredentialWatchReconciler) recordFleet(obj *v1alpha1.CredentialWatch, found fleets.Found, now time.Time) {
	r.Fleets.Put(client.ObjectKeyFromObject(obj), found)
	var before []v1alpha1.UnreadSubscription
	if obj.Status.Fleet != nil {
		before = obj.Status.Fleet.Unread
	}
	obj.Status.Fleet = &v1alpha1.FleetStatus{Subscriptions: int32(found.Subscriptions), Unread: found.Unread}
	obj.Status.ServicePrincipal, obj.Status.AKSCluster, obj.Status.TenantScan, obj.Status.Credentials = nil, nil, nil, nil
	msg := fmt.Sprintf("Searched %d subscriptions: %d clusters", found.Subscriptions, len(found.Clusters))
	if n := len(found.Unread); n > 0 {
		msg += fmt.Sprintf("; %d subscriptions could not be read (status.fleet.unread)", n)
	}
	setCondition(obj, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked, msg, now)
	switch unread := unreadSet(found.Unread); {
	case len(unread) > 0 && unread != unreadSet(before):
		first := found.Unread[0]
		r.Recorder.Eventf(obj, corev1.EventTypeWarning, eventSubscriptionsUnread,
			"%d subscriptions could not be read, such as %s: %s", len(found.Unread), first.SubscriptionID, first.Message)
	case len(unread) == 0 && len(before) > 0:
		r.Recorder.Event(obj, corev1.EventTypeNormal, eventSubscriptionsRead, "Every subscription of the fleet could be read again")
	}
}

// unreadSet names the subscriptions unread and why, to tell a change from a repeat.
func unreadSet(u []v1alpha1.UnreadSubscription) string {
	var b strings.Builder
	for _, s := range u {
		b.WriteString(s.SubscriptionID + "=" + s.Reason + ";")
	}
	return b.String()
}

// evaluateFleet sets a fleet's counts, its list of clusters needing attention, its state and
// the Expiring and Expired conditions as of now, from what this process's last check found; a
// fleet it has not checked yet keeps what status holds until its check, which is due. It
// returns when a cluster next changes state.
func (r *CredentialWatchReconciler) evaluateFleet(obj *v1alpha1.CredentialWatch, s settings, now time.Time) time.Time {
	found, ok := r.Fleets.Get(client.ObjectKeyFromObject(obj))
	if !ok {
		return time.Time{}
	}
	v := policy.ViewFleet(found.Clusters, now, s.thresholds, policy.MaxFleetListed)
	st := &obj.Status
	fs := v.Status
	fs.Subscriptions, fs.Unread = int32(found.Subscriptions), found.Unread
	st.Fleet = &fs
	st.State, st.EarliestExpiry, st.ExpiresIn = v.State, v.Earliest, ""
	if v.Earliest != nil {
		st.ExpiresIn = policy.HumanDuration(v.Earliest.Sub(now))
	}
	setFleetConditions(obj, v, s.thresholds, now)
	return v.NextTransition
}

func setFleetConditions(obj *v1alpha1.CredentialWatch, v policy.FleetView, t policy.Thresholds, now time.Time) {
	first := func(state ...v1alpha1.CredentialState) string {
		for _, c := range v.Clusters {
			for _, s := range state {
				if c.State == s {
					return fmt.Sprintf("%s (appId %s) at %s", c.ID, c.AppID, c.Earliest.UTC().Format(time.RFC3339))
				}
			}
		}
		return ""
	}
	switch st := v.Status; {
	case st.Critical > 0:
		setCondition(obj, v1alpha1.ConditionExpiring, metav1.ConditionTrue, v1alpha1.ReasonWithinCritical,
			fmt.Sprintf("%d clusters' service principals have a credential ending within %s, %d more within %s; first %s",
				st.Critical, policy.HumanDuration(t.Critical), st.Warning, policy.HumanDuration(t.Warning), first(v1alpha1.StateCritical)), now)
	case st.Warning > 0:
		setCondition(obj, v1alpha1.ConditionExpiring, metav1.ConditionTrue, v1alpha1.ReasonWithinWarning,
			fmt.Sprintf("%d clusters' service principals have a credential ending within %s; first %s", st.Warning, policy.HumanDuration(t.Warning), first(v1alpha1.StateWarning)), now)
	default:
		setCondition(obj, v1alpha1.ConditionExpiring, metav1.ConditionFalse, v1alpha1.ReasonNoneExpiring,
			fmt.Sprintf("No cluster's service principal has a credential ending within %s", policy.HumanDuration(t.Warning)), now)
	}
	if n := v.Status.Expired; n > 0 {
		setCondition(obj, v1alpha1.ConditionExpired, metav1.ConditionTrue, v1alpha1.ReasonCredentialExpired,
			fmt.Sprintf("%d clusters' service principals have an expired credential, such as %s: move each cluster onto a new secret, or onto a managed identity", n, first(v1alpha1.StateExpired)), now)
	} else {
		setCondition(obj, v1alpha1.ConditionExpired, metav1.ConditionFalse, v1alpha1.ReasonNoneExpired, "No cluster's service principal has an expired credential", now)
	}
}
