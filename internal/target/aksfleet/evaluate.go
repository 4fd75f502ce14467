package aksfleet

import (
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// Event reasons of a fleet's checks.
const (
	eventFleetTruncated       = "FleetTruncated"
	eventMoreClustersWorsened = "MoreClustersWorsened"
	eventSubscriptionsUnread  = "SubscriptionsUnread"
	eventSubscriptionsRead    = "SubscriptionsRead"
	eventAppsUnread           = "ServicePrincipalsUnread"
	eventAppsRead             = "ServicePrincipalsRead"
)

// Record keeps what a fleet's check found for its next reconciles and the metrics, with the
// sign-ins read beside it and the credential each cluster signs in with, and says in status and
// events which subscriptions could not be read.
func (f Fleet) Record(obj *v1alpha1.CredentialWatch, found Found, signIns target.TenantSignIns, now time.Time) {
	f.recordSignIns(obj, found, signIns, now)
	f.Store.Put(target.KeyOf(obj), found)
	prev := obj.Status.Fleet
	var before []v1alpha1.UnreadSubscription
	if prev != nil {
		before = prev.Unread
	}
	obj.Status.Fleet = &v1alpha1.FleetStatus{Subscriptions: int32(found.Subscriptions), Unread: found.Unread, Uncounted: int32(found.Uncounted),
		UnreadServicePrincipals: int32(found.UnreadApps)}
	obj.Status.ServicePrincipal, obj.Status.AKSCluster, obj.Status.TenantScan, obj.Status.Credentials = nil, nil, nil, nil
	msg := fmt.Sprintf("Searched %d subscriptions: %d clusters", found.Subscriptions, len(found.Clusters))
	if n := found.Uncounted; n > 0 {
		msg += fmt.Sprintf(", and %d more beyond the %d a fleet holds (narrow it with subscriptions, resourceGroups or tags)", n, len(found.Clusters))
		if prev == nil || prev.Uncounted == 0 {
			f.Events.Eventf(obj, corev1.EventTypeWarning, eventFleetTruncated,
				"The fleet holds %d clusters: %d more were found and are in no count or metric; narrow it with subscriptions, resourceGroups or tags, or split it", len(found.Clusters), n)
		}
	}
	if n := len(found.Unread); n > 0 {
		msg += fmt.Sprintf("; %d subscriptions could not be read (status.fleet.unread)", n)
	}
	if n := found.UnreadApps; n > 0 {
		msg += fmt.Sprintf("; the credentials of %d service principals could not be read, such as %s", n, found.UnreadApp)
	}
	target.SetCondition(obj, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked, msg, now)
	f.tellUnreadApps(obj, prev, found)
	switch unread := unreadSet(found.Unread); {
	case len(unread) > 0 && unread != unreadSet(before):
		first := found.Unread[0]
		f.Events.Eventf(obj, corev1.EventTypeWarning, eventSubscriptionsUnread,
			"%d subscriptions could not be read, such as %s: %s", len(found.Unread), first.SubscriptionID, first.Message)
	case len(unread) == 0 && len(before) > 0:
		f.Events.Event(obj, corev1.EventTypeNormal, eventSubscriptionsRead, "Every subscription of the fleet could be read again")
	}
}

// recordSignIns puts the sign-ins read on the credentials of found's clusters, or, when none
// could be read, those the last check knew, and marks the credential each cluster signs in with.
func (f Fleet) recordSignIns(obj *v1alpha1.CredentialWatch, found Found, signIns target.TenantSignIns, now time.Time) {
	var known target.LastSignIns
	if prev, ok := f.Store.Get(target.KeyOf(obj)); ok {
		known = target.LastSignIns{}
		for _, c := range prev.Clusters {
			maps.Copy(known, target.LastSignInsOf(c.Credentials, c.AppID))
		}
	}
	last := signIns.Show(obj, f.Events, known, now)
	if last == nil {
		return
	}
	for _, c := range found.Clusters {
		last.Apply(c.Credentials, c.AppID)
	}
	if signIns.Last == nil && !signIns.Kept {
		// Not read now: what was known is shown, but narrows no cluster's expiry.
		return
	}
	u, _ := policy.UsageOf(obj.Spec.Usage) // the API server validated it
	markKeysInUse(found.Clusters, len(found.Unread) == 0 && found.Uncounted == 0, u.ActiveWithin, now)
}

// unreadSet names the subscriptions unread and why, to tell a change from a repeat.
func unreadSet(u []v1alpha1.UnreadSubscription) string {
	var b strings.Builder
	for _, s := range u {
		b.WriteString(s.SubscriptionID + "=" + s.Reason + ";")
	}
	return b.String()
}

// Evaluate sets a fleet's counts, its list of clusters needing attention, its state and the
// Expiring and Expired conditions as of now, from what this process's last check found, as g
// still lets it show; stored is the fleet's status as the API server holds it. A fleet this
// process has not checked yet keeps what status holds until its check, which is due: it
// returns nil then. It returns when a cluster next changes state too.
func (f Fleet) Evaluate(obj *v1alpha1.CredentialWatch, stored *v1alpha1.FleetStatus, g access.Grant, t policy.Thresholds, now time.Time) (*Now, time.Time) {
	key := target.KeyOf(obj)
	all, ok := f.Store.Get(key)
	if !ok {
		return nil, time.Time{}
	}
	// The metrics read what is shown: no more than status. What the check found is kept, for
	// an identity widened again.
	found := visible(all, g, obj.Spec.Target.AKSFleet.TenantID)
	f.Store.Show(key, found)
	v := ViewAt(found.Clusters, now, t, MaxListed)
	st := &obj.Status
	fs := v.Status
	fs.Subscriptions, fs.Unread, fs.Uncounted = int32(found.Subscriptions), found.Unread, int32(found.Uncounted)
	st.Fleet = &fs
	st.State, st.EarliestExpiry, st.ExpiresIn = v.State, v.Earliest, ""
	if v.Earliest != nil {
		st.ExpiresIn = policy.HumanDuration(v.Earliest.Sub(now))
	}
	setConditions(obj, v, t, now)
	f.tellWorsened(obj, stored, v, f.Store.Viewed(key, now), t, now)
	return &Now{Found: all, Shown: found, Views: v.Clusters}, v.NextTransition
}

// visible is what found shows that g still allows: an identity narrowed since the check shows
// at once, not at the next check. found is left as it is: the metrics read it.
func visible(found Found, g access.Grant, tenant string) Found {
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

// tellWorsened raises an event for each cluster whose state got worse since the fleet was last
// evaluated in this process, or, on its first evaluation here, since status listed it: a
// restart repeats nothing, and a cluster beyond the status's list that worsened while the
// operator was down goes untold (its metrics and counts still show it).
func (f Fleet) tellWorsened(obj *v1alpha1.CredentialWatch, stored *v1alpha1.FleetStatus, v View, since time.Time, t policy.Thresholds, now time.Time) {
	listed := map[string]v1alpha1.CredentialState{}
	if stored != nil && since.IsZero() {
		for _, c := range stored.Attention {
			listed[c.ID] = c.State
		}
	}
	var worse []ClusterView
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
		if i == target.MaxStateEvents {
			f.Events.Eventf(obj, corev1.EventTypeWarning, eventMoreClustersWorsened,
				"%d more clusters' service principals turned Warning, Critical or Expired: see status.fleet and the metrics", len(worse)-target.MaxStateEvents)
			break
		}
		when := "expires in " + policy.HumanDuration(c.Earliest.Sub(now))
		if c.State == v1alpha1.StateExpired {
			when = "expired " + policy.HumanDuration(now.Sub(c.Earliest.Time)) + " ago"
		}
		f.Events.Eventf(obj, corev1.EventTypeWarning, target.StateEventReasons[c.State],
			"AKS cluster %s signs in with service principal %s, whose first credential %s (%s): renew it, or move the cluster to a managed identity",
			c.ID, c.AppID, when, c.Earliest.UTC().Format(time.RFC3339))
	}
}

func setConditions(obj *v1alpha1.CredentialWatch, v View, t policy.Thresholds, now time.Time) {
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

// tellUnreadApps says in an event when some of the clusters' service principals could not be read
// where all could before, and when all can be again.
func (f Fleet) tellUnreadApps(obj *v1alpha1.CredentialWatch, prev *v1alpha1.FleetStatus, found Found) {
	var before int32
	if prev != nil {
		before = prev.UnreadServicePrincipals
	}
	switch {
	case found.UnreadApps > 0 && before == 0:
		f.Events.Eventf(obj, corev1.EventTypeWarning, eventAppsUnread,
			"The credentials of %d service principals of the fleet's clusters could not be read, such as %s", found.UnreadApps, found.UnreadApp)
	case found.UnreadApps == 0 && before > 0:
		f.Events.Event(obj, corev1.EventTypeNormal, eventAppsRead, "The credentials of every service principal of the fleet's clusters could be read again")
	}
}
