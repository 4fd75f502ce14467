package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
	"github.com/credwatch/credwatch/internal/target"
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

// defaultFleetClusters bounds the clusters one fleet holds: each costs about a kilobyte of memory
// and two series, and a tenant can hold more clusters than one watch should carry.
const defaultFleetClusters = 10000

const (
	eventFleetTruncated       = "FleetTruncated"
	eventMoreClustersWorsened = "MoreClustersWorsened"
	eventSubscriptionsUnread  = "SubscriptionsUnread"
	eventSubscriptionsRead    = "SubscriptionsRead"
)

// maxFleetsPerNamespace bounds the aksFleet watches a namespace runs: each lists every
// subscription its identity may read at each check, against Resource Manager's limits for that
// identity, which the watches of other namespaces using it share.
const maxFleetsPerNamespace = 3

// fleetLimitError: the namespace runs its most fleets already, all older than this one.
type fleetLimitError struct{ msg string }

func (e *fleetLimitError) Error() string { return e.msg }

// Reason is ReasonTooManyFleets.
func (e *fleetLimitError) Reason() string { return v1alpha1.ReasonTooManyFleets }

// fleetAllowed refuses a fleet beyond the oldest maxFleetsPerNamespace of its namespace.
func (r *CredentialWatchReconciler) fleetAllowed(ctx context.Context, obj *v1alpha1.CredentialWatch) error {
	var list v1alpha1.CredentialWatchList
	if err := r.List(ctx, &list, client.InNamespace(obj.Namespace)); err != nil {
		return fmt.Errorf("listing the namespace's watches: %w", err)
	}
	var older []string
	for i := range list.Items {
		w := &list.Items[i]
		if w.Spec.Target.AKSFleet == nil || w.DeletionTimestamp != nil || w.UID == obj.UID {
			continue
		}
		if c := w.CreationTimestamp.Compare(obj.CreationTimestamp.Time); c < 0 || c == 0 && w.Name < obj.Name {
			older = append(older, w.Name)
		}
	}
	if len(older) < maxFleetsPerNamespace {
		return nil
	}
	slices.Sort(older)
	return &fleetLimitError{msg: fmt.Sprintf("namespace %s runs %d aksFleet watches already (%s), the most a namespace may: this one is not checked; "+
		"delete one, or widen one of them with subscriptions, resourceGroups or tags", obj.Namespace, len(older), strings.Join(older, ", "))}
}

// readFleet lists the clusters of the fleet's subscriptions and reads the credentials of the
// service principals they sign in with. A subscription that cannot be listed is reported with
// the reason, and the others are read; the check fails only when none could be.
func (r *CredentialWatchReconciler) readFleet(ctx context.Context, g access.Grant, id azure.Identity, t *v1alpha1.AKSFleetTarget) (fleets.Found, error) {
	fc, err := r.Azure.Fleet(id, t.TenantID)
	if err != nil {
		return fleets.Found{}, err
	}
	// The tenant's subscriptions, as the identity sees them: a subscription the watch names is
	// searched only if it is one of them, so that an identity allowed several tenants' does not
	// list one under another's name.
	listed, err := fc.Subscriptions(ctx)
	if err != nil {
		return fleets.Found{}, &target.ClusterError{Err: err}
	}
	inTenant := map[string]bool{}
	for _, s := range listed {
		inTenant[strings.ToLower(s.ID)] = true
	}
	subs, explicit := lowerSet(t.Subscriptions), len(t.Subscriptions) > 0
	if !explicit {
		subs = slices.Sorted(maps.Keys(inTenant))
	}
	var found fleets.Found
	var firstErr error
	seen := map[string]bool{}
	limit := r.FleetClusters
	if limit == 0 {
		limit = defaultFleetClusters
	}
	found.Complete = map[string]bool{}
	for _, l := range r.listFleet(ctx, fc, g, t, subs, inTenant, explicit) {
		found.Subscriptions++
		if l.err == nil {
			// Listed one resource group at a time, the subscription is whole only in those.
			for _, g := range l.groups {
				found.Complete[l.sub+"/"+g] = true
			}
			if len(l.groups) == 0 {
				found.Complete[l.sub] = true
			}
		}
		if l.err != nil {
			if firstErr == nil {
				firstErr = l.err
			}
			found.Unread = append(found.Unread, v1alpha1.UnreadSubscription{SubscriptionID: l.sub, Reason: unreadReason(l.err), Message: l.err.Error()})
		}
		// What a failed listing found before it failed is reported too: those clusters exist.
		for _, c := range l.clusters {
			key := strings.ToLower(c.ID)
			if seen[key] || !strings.EqualFold(c.Ref.SubscriptionID, l.sub) || !access.InGroups(c.Ref.ResourceGroup, l.groups) || !tagged(c.Tags, t.Tags) {
				continue
			}
			seen[key] = true
			if len(found.Clusters) == limit {
				found.Uncounted++
				continue
			}
			found.Clusters = append(found.Clusters, policy.FleetCluster{ID: c.ID, SubscriptionID: l.sub, ResourceGroup: c.Ref.ResourceGroup,
				AppID: strings.ToLower(c.ClientID)})
		}
	}
	if found.Uncounted > 0 {
		found.Complete = nil
	}
	if found.Subscriptions > 0 && len(found.Unread) == found.Subscriptions {
		return fleets.Found{}, &target.ClusterError{Err: firstErr}
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
	groups   []string
	clusters []aks.ListedCluster
	err      error
}

// listFleet lists the clusters of each subscription where the identity allows it. A
// subscription the watch names that the identity does not cover, or that is not the tenant's,
// is reported; one that only the list of subscriptions showed is not the fleet's, and is left out.
func (r *CredentialWatchReconciler) listFleet(ctx context.Context, fc aks.FleetClient, g access.Grant, t *v1alpha1.AKSFleetTarget, subs []string, inTenant map[string]bool, explicit bool) []fleetListing {
	out := make([]fleetListing, len(subs))
	wanted := lowerSet(t.ResourceGroups)
	var wg sync.WaitGroup
	slots := make(chan struct{}, fleetListings)
	for i, sub := range subs {
		out[i].sub = sub
		// The identity's scope first: what it does not cover is refused alike, whether or not
		// Resource Manager shows it the subscription.
		groups, err := access.ListedGroups(g.Identity, g.Namespace, t.TenantID, sub, wanted)
		if err != nil {
			out[i].err = err
			continue
		}
		if !inTenant[sub] {
			out[i].err = &azerr.Error{Kind: azerr.KindNotFound, Err: fmt.Errorf("subscription %s is not one of tenant %s's that the identity can see", sub, t.TenantID)}
			continue
		}
		groups = lowerSet(groups)
		out[i].groups = groups
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			out[i].err = ctx.Err()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			out[i].clusters, out[i].err = fc.Clusters(ctx, sub, groups)
		}()
	}
	wg.Wait()
	if explicit {
		return out
	}
	// Of the subscriptions the identity sees, those it does not cover are not the fleet's.
	return slices.DeleteFunc(out, func(l fleetListing) bool {
		var refusal *access.Refusal
		return errors.As(l.err, &refusal)
	})
}

// readFleetCredentials reads the credentials of each service principal the clusters sign in
// with, once however many clusters share it, into the clusters; a cluster whose service
// principal the identity does not cover, or that could not be read, says why instead.
func (r *CredentialWatchReconciler) readFleetCredentials(ctx context.Context, g access.Grant, id azure.Identity, tenant string, clusters []policy.FleetCluster) {
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
		if err := g.Allow(access.Request{Operation: v1alpha1.OperationWatch, TenantID: tenant, AppID: appID}); err != nil {
			a.reason = v1alpha1.ReasonIdentityNotAllowed
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			a.reason = target.ReasonFor(ctx.Err())
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			app, err := r.Azure.Application(id, graph.AppRef{AppID: appID})
			if err != nil {
				a.reason = target.ReasonFor(err)
				return
			}
			snap, err := app.ReadCredentials(ctx)
			if err != nil {
				a.reason = target.ReasonFor(err)
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

// lowerSet is names in lower case, each once: Azure compares subscription IDs and resource group
// names without regard to case, where the CRD's sets do not.
func lowerSet(names []string) []string {
	var out []string
	for _, n := range names {
		if n = strings.ToLower(n); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// visible is what found shows that g still allows: an identity narrowed since the check shows
// at once, not at the next check. found is left as it is: the metrics read it.
func visible(found fleets.Found, g access.Grant, tenant string) fleets.Found {
	out := found
	out.Clusters, out.Unread = nil, nil
	for _, u := range found.Unread {
		// What failed in a subscription the identity no longer covers is not the namespace's
		// to read any more; the refusal of one the watch names still is.
		if _, err := access.ListedGroups(g.Identity, g.Namespace, tenant, u.SubscriptionID, nil); err == nil || u.Reason == v1alpha1.ReasonIdentityNotAllowed {
			out.Unread = append(out.Unread, u)
		}
	}
	for _, c := range found.Clusters {
		if g.Allow(access.Request{Operation: v1alpha1.OperationWatch, TenantID: tenant, Cluster: &access.Cluster{SubscriptionID: c.SubscriptionID, ResourceGroup: c.ResourceGroup}}) != nil {
			continue
		}
		if c.AppID != "" && c.Reason == "" && g.Allow(access.Request{Operation: v1alpha1.OperationWatch, TenantID: tenant, AppID: c.AppID}) != nil {
			c.Credentials, c.Reason = nil, v1alpha1.ReasonIdentityNotAllowed
		}
		out.Clusters = append(out.Clusters, c)
	}
	return out
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
	prev := obj.Status.Fleet
	var before []v1alpha1.UnreadSubscription
	if prev != nil {
		before = prev.Unread
	}
	obj.Status.Fleet = &v1alpha1.FleetStatus{Subscriptions: int32(found.Subscriptions), Unread: found.Unread, Uncounted: int32(found.Uncounted)}
	obj.Status.ServicePrincipal, obj.Status.AKSCluster, obj.Status.TenantScan, obj.Status.Credentials = nil, nil, nil, nil
	msg := fmt.Sprintf("Searched %d subscriptions: %d clusters", found.Subscriptions, len(found.Clusters))
	if n := found.Uncounted; n > 0 {
		msg += fmt.Sprintf(", and %d more beyond the %d a fleet holds (narrow it with subscriptions, resourceGroups or tags)", n, len(found.Clusters))
		if prev == nil || prev.Uncounted == 0 {
			r.Recorder.Eventf(obj, corev1.EventTypeWarning, eventFleetTruncated,
				"The fleet holds %d clusters: %d more were found and are in no count or metric; narrow it with subscriptions, resourceGroups or tags, or split it", len(found.Clusters), n)
		}
	}
	if n := len(found.Unread); n > 0 {
		msg += fmt.Sprintf("; %d subscriptions could not be read (status.fleet.unread)", n)
	}
	target.SetCondition(obj, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked, msg, now)
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
func (r *CredentialWatchReconciler) evaluateFleet(ctx context.Context, w *watchState) time.Time {
	obj, s, now := w.obj, w.settings, w.now
	found, ok := r.Fleets.Get(client.ObjectKeyFromObject(obj))
	if !ok {
		return time.Time{}
	}
	g, err := r.grantOnce(ctx, w)
	if err != nil {
		// The check refused it already, and forgot the fleet; or the API server failed, and
		// the next reconcile sees.
		return time.Time{}
	}
	// The metrics read what is shown: no more than status. What the check found is kept, for
	// an identity widened again.
	all := found
	found = visible(found, g, obj.Spec.Target.AKSFleet.TenantID)
	r.Fleets.Show(client.ObjectKeyFromObject(obj), found)
	v := policy.ViewFleet(found.Clusters, now, s.thresholds, policy.MaxFleetListed)
	st := &obj.Status
	fs := v.Status
	fs.Subscriptions, fs.Unread, fs.Uncounted = int32(found.Subscriptions), found.Unread, int32(found.Uncounted)
	st.Fleet = &fs
	st.State, st.EarliestExpiry, st.ExpiresIn = v.State, v.Earliest, ""
	if v.Earliest != nil {
		st.ExpiresIn = policy.HumanDuration(v.Earliest.Sub(now))
	}
	w.fleet = &fleetNow{found: all, shown: found, views: v.Clusters}
	setFleetConditions(obj, v, s.thresholds, now)
	r.tellWorsenedClusters(obj, w.stored.Status.Fleet, v, r.Fleets.Viewed(client.ObjectKeyFromObject(obj), now), s.thresholds, now)
	return v.NextTransition
}

// tellWorsenedClusters raises an event for each cluster whose state got worse since the fleet was
// last evaluated in this process, or, on its first evaluation here, since status listed it: a
// restart repeats nothing, and a cluster beyond the status's list that worsened while the
// operator was down goes untold (its metrics and counts still show it).
func (r *CredentialWatchReconciler) tellWorsenedClusters(obj *v1alpha1.CredentialWatch, stored *v1alpha1.FleetStatus, v policy.FleetView, since time.Time, t policy.Thresholds, now time.Time) {
	listed := map[string]v1alpha1.CredentialState{}
	if stored != nil && since.IsZero() {
		for _, c := range stored.Attention {
			listed[c.ID] = c.State
		}
	}
	var worse []policy.ClusterView
	for _, c := range v.Clusters {
		if c.Earliest == nil {
			continue
		}
		before, ok := listed[c.ID]
		if !since.IsZero() {
			before, ok = policy.StateAt(c.Earliest.Time, since, t), true
		}
		if ok && before != "" && policy.Worse(c.State, before) {
			worse = append(worse, c)
		}
	}
	for i, c := range worse {
		if i == maxStateEvents {
			r.Recorder.Eventf(obj, corev1.EventTypeWarning, eventMoreClustersWorsened,
				"%d more clusters' service principals turned Warning, Critical or Expired: see status.fleet and the metrics", len(worse)-maxStateEvents)
			break
		}
		when := "expires in " + policy.HumanDuration(c.Earliest.Sub(now))
		if c.State == v1alpha1.StateExpired {
			when = "expired " + policy.HumanDuration(now.Sub(c.Earliest.Time)) + " ago"
		}
		r.Recorder.Eventf(obj, corev1.EventTypeWarning, stateEventReasons[c.State],
			"AKS cluster %s signs in with service principal %s, whose first credential %s (%s): renew it, or move the cluster to a managed identity",
			c.ID, c.AppID, when, c.Earliest.UTC().Format(time.RFC3339))
	}
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
		target.SetCondition(obj, v1alpha1.ConditionExpiring, metav1.ConditionTrue, v1alpha1.ReasonWithinCritical,
			fmt.Sprintf("%d clusters' service principals have a credential ending within %s, %d more within %s; first %s",
				st.Critical, policy.HumanDuration(t.Critical), st.Warning, policy.HumanDuration(t.Warning), first(v1alpha1.StateCritical)), now)
	case st.Warning > 0:
		target.SetCondition(obj, v1alpha1.ConditionExpiring, metav1.ConditionTrue, v1alpha1.ReasonWithinWarning,
			fmt.Sprintf("%d clusters' service principals have a credential ending within %s; first %s", st.Warning, policy.HumanDuration(t.Warning), first(v1alpha1.StateWarning)), now)
	default:
		target.SetCondition(obj, v1alpha1.ConditionExpiring, metav1.ConditionFalse, v1alpha1.ReasonNoneExpiring,
			fmt.Sprintf("No cluster's service principal has a credential ending within %s", policy.HumanDuration(t.Warning)), now)
	}
	if n := v.Status.Expired; n > 0 {
		target.SetCondition(obj, v1alpha1.ConditionExpired, metav1.ConditionTrue, v1alpha1.ReasonCredentialExpired,
			fmt.Sprintf("%d clusters' service principals have an expired credential, such as %s: move each cluster onto a new secret, or onto a managed identity", n, first(v1alpha1.StateExpired)), now)
	} else {
		target.SetCondition(obj, v1alpha1.ConditionExpired, metav1.ConditionFalse, v1alpha1.ReasonNoneExpired, "No cluster's service principal has an expired credential", now)
	}
}
