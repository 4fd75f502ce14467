package tenantscan

import (
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// Evaluate holds what this process's last scan of the tenant found to the clock and to the
// hygiene policy h: the credentials status lists (the most urgent of all), the counts of each
// state, the summary, Expiring and Expired, an event for each credential that got worse since the
// scan was last evaluated, and status.findings. A scan this process has not run keeps the list,
// counts and findings its status holds, and is evaluated from them. It returns when the clock
// alone next changes any of it; before is the watch as stored.
func (s Scan) Evaluate(obj, before *v1alpha1.CredentialWatch, t policy.Thresholds, h policy.Hygiene, now time.Time) time.Time {
	st := &obj.Status
	key := target.KeyOf(obj)
	found, scanned := s.Store.Get(key)
	var e target.Expiry
	u, _ := policy.UsageOf(obj.Spec.Usage) // the API server validated it
	h.SignInsKnown = target.SignInsRead(obj)
	var inUseChanges time.Time
	if scanned {
		all := found.Credentials
		if u.On() {
			inUseChanges = policy.MarkInUse(all, u.ActiveWithin, now)
		}
		if since := s.Store.Viewed(key, now); !since.IsZero() {
			e.Worse, e.Compared = policy.WorsenedSince(all, since, now, t), true
		}
		view := policy.ViewScan(all, now, t, policy.MaxListed)
		e.Summary, st.Credentials = view.Summary, view.Listed
		if st.TenantScan == nil { // the status write of the scan failed; the counts come with the next
			st.TenantScan = &v1alpha1.TenantScanStatus{}
		}
		st.TenantScan.Renewed, st.TenantScan.Unlisted = view.Renewed, view.Unlisted
		st.TenantScan.Warning, st.TenantScan.Critical, st.TenantScan.Expired =
			view.Counts[v1alpha1.StateWarning], view.Counts[v1alpha1.StateCritical], view.Counts[v1alpha1.StateExpired]
		e.Groups, e.Total = view.Groups, int(st.TenantScan.Credentials-view.Renewed)
	} else {
		e.Summary = policy.Evaluate(st.Credentials, now, t)
		e.Groups, e.Total = policy.GroupsOf(st.Credentials), len(st.Credentials)
		if ts := st.TenantScan; ts != nil {
			e.Groups.Expired, e.Groups.Critical, e.Groups.Warning, e.Total = int(ts.Expired), int(ts.Critical), int(ts.Warning), int(ts.Credentials-ts.Renewed)
		}
	}
	target.ShowExpiry(obj, before, e, s.Events, t, now)
	next := policy.Earliest(e.Summary.NextTransition, e.Summary.NextDisplayChange, inUseChanges)
	if st.LastCheckTime == nil || !scanned {
		return next
	}
	f := policy.FindingsOf(found.Credentials, func(appID string) bool { return found.SAML[appID] }, now, h, policy.MaxListedFindings)
	st.Findings = target.FindingsStatus(obj, f, h)
	return policy.Earliest(next, f.NextChange)
}
