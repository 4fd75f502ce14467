package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// reconcileExpiry sets every known credential's state as of now, the Expiring and Expired
// conditions and the summary fields, and raises an event for each credential that got worse
// since the status was last written. It runs whether or not Graph was read: expiry is a matter
// of the clock, so a watch whose Graph is unreachable still turns Expired on time.
func (r *CredentialWatchReconciler) reconcileExpiry(ctx context.Context, w *watchState) (time.Time, error) {
	if w.obj.Spec.Target.ServiceAccountIssuer != nil { // an issuer has keys, not credentials that expire
		return time.Time{}, nil
	}
	if w.obj.Spec.Target.AKSFleet != nil {
		return r.evaluateFleet(ctx, w), nil
	}
	summary := r.evaluateExpiry(w.obj, w.stored, w.settings, w.now)
	next := r.evaluateFindings(w.obj, w.settings.hygiene, w.now)
	return policy.Earliest(summary.NextTransition, policy.Earliest(summary.NextDisplayChange, next)), nil
}

// evaluateExpiry sets the states, conditions and summary fields, and raises the events.
func (r *CredentialWatchReconciler) evaluateExpiry(obj *v1alpha1.CredentialWatch, before *v1alpha1.CredentialWatch, s settings, now time.Time) policy.Summary {
	st := &obj.Status
	var summary policy.Summary
	var groups expiryGroups
	// worse are the credentials worth an event; nil until known, then compared with the list
	// status held, as a scan's are on its first view in this process.
	var worse []v1alpha1.Credential
	compared := false
	key := client.ObjectKeyFromObject(obj)
	if found, ok := r.Scans.Get(key); ok && obj.Spec.Target.TenantScan != nil {
		all := found.Credentials
		if since := r.Scans.Viewed(key, now); !since.IsZero() {
			worse, compared = policy.WorsenedSince(all, since, now, s.thresholds), true
		}
		view := policy.ViewScan(all, now, s.thresholds, policy.MaxListed)
		summary, st.Credentials = view.Summary, view.Listed
		if st.TenantScan == nil { // the status write of the scan failed; the counts come with the next
			st.TenantScan = &v1alpha1.TenantScanStatus{}
		}
		st.TenantScan.Renewed, st.TenantScan.Unlisted = view.Renewed, view.Unlisted
		st.TenantScan.Warning, st.TenantScan.Critical, st.TenantScan.Expired =
			view.Counts[v1alpha1.StateWarning], view.Counts[v1alpha1.StateCritical], view.Counts[v1alpha1.StateExpired]
		groups = expiryGroups{Groups: view.Groups, total: int(st.TenantScan.Credentials - view.Renewed)}
	} else {
		// A tenant scan this process has not run yet keeps the list its status holds.
		summary = policy.Evaluate(st.Credentials, now, s.thresholds)
		groups = expiryGroups{Groups: policy.GroupsOf(st.Credentials), total: len(st.Credentials)}
		if ts := st.TenantScan; ts != nil && obj.Spec.Target.TenantScan != nil {
			groups.Expired, groups.Critical, groups.Warning, groups.total = int(ts.Expired), int(ts.Critical), int(ts.Warning), int(ts.Credentials-ts.Renewed)
		}
	}
	if st.LastCheckTime == nil {
		// Nothing has been read yet: nothing is known to be fine or expiring.
		return summary
	}

	st.State = summary.State
	st.EarliestExpiry, st.ExpiresIn = nil, ""
	if e := summary.Earliest; e != nil {
		end := e.EndTime
		st.EarliestExpiry = &end
		st.ExpiresIn = policy.HumanDuration(end.Sub(now))
	}
	setExpiryConditions(obj, groups, s.thresholds, now)

	if !compared {
		worse = policy.Worsened(before.Status.Credentials, st.Credentials)
	}
	for i, c := range worse {
		if i == target.MaxStateEvents {
			// A first scan of a tenant can find hundreds: status and metrics list them all.
			r.Recorder.Eventf(obj, corev1.EventTypeWarning, eventMoreCredentialsWorsened,
				"%d more credentials turned Warning, Critical or Expired: see status.credentials", len(worse)-target.MaxStateEvents)
			break
		}
		r.Recorder.Event(obj, corev1.EventTypeWarning, target.StateEventReasons[c.State], compose.StateChange(obj, c, now))
	}
	return summary
}

const eventMoreCredentialsWorsened = "MoreCredentialsWorsened"

// expiryGroups are the credentials the Expiring and Expired conditions speak of, and how many
// the watch has in all.
type expiryGroups struct {
	policy.Groups
	total int
}

func setExpiryConditions(obj *v1alpha1.CredentialWatch, g expiryGroups, t policy.Thresholds, now time.Time) {
	expiring, expired := compose.ExpiryConditions(g.Groups, g.total, t, now)
	target.SetCondition(obj, v1alpha1.ConditionExpiring, expiring.Status, expiring.Reason, expiring.Message, now)
	target.SetCondition(obj, v1alpha1.ConditionExpired, expired.Status, expired.Reason, expired.Message, now)
}
