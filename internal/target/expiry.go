package target

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/policy"
)

// Expiry is what a watch's credentials come to as of now, for the kinds that hold credentials
// (servicePrincipal, aksCluster, tenantScan): the summary, and what the Expiring and Expired
// conditions speak of.
type Expiry struct {
	Summary policy.Summary
	Groups  policy.Groups
	// Total is how many credentials the watch has in all.
	Total int
	// Worse are the credentials worth an event, once Compared; otherwise the list status held is
	// compared with the one it holds now.
	Worse    []v1alpha1.Credential
	Compared bool
}

const eventMoreCredentialsWorsened = "MoreCredentialsWorsened"

// ShowExpiry sets the summary fields and the Expiring and Expired conditions from e, and raises
// an event for each credential that got worse since before, the watch as stored. Before a first
// check nothing is shown: nothing is known to be fine or expiring.
func ShowExpiry(obj, before *v1alpha1.CredentialWatch, e Expiry, events Events, t policy.Thresholds, now time.Time) {
	st := &obj.Status
	if st.LastCheckTime == nil {
		return
	}
	st.State = e.Summary.State
	st.EarliestExpiry, st.ExpiresIn = nil, ""
	if c := e.Summary.Earliest; c != nil {
		end := c.EndTime
		st.EarliestExpiry = &end
		st.ExpiresIn = policy.HumanDuration(end.Sub(now))
	}
	expiring, expired := compose.ExpiryConditions(e.Groups, e.Total, t, policy.WatchSignInsKnown(obj, now), now)
	SetCondition(obj, v1alpha1.ConditionExpiring, expiring.Status, expiring.Reason, expiring.Message, now)
	SetCondition(obj, v1alpha1.ConditionExpired, expired.Status, expired.Reason, expired.Message, now)

	worse := e.Worse
	if !e.Compared {
		worse = policy.Worsened(before.Status.Credentials, st.Credentials)
	}
	for i, c := range worse {
		if i == MaxStateEvents {
			// A first scan of a tenant can find hundreds: status and metrics list them all.
			events.Eventf(obj, corev1.EventTypeWarning, eventMoreCredentialsWorsened,
				"%d more credentials turned Warning, Critical or Expired: see status.credentials", len(worse)-MaxStateEvents)
			break
		}
		events.Event(obj, corev1.EventTypeWarning, StateEventReasons[c.State], compose.StateChange(obj, c, now))
	}
}

// FindingsStatus is f, what a watch's credentials break of its hygiene policy h, as status
// records it; nil when nothing was found.
func FindingsStatus(obj *v1alpha1.CredentialWatch, f policy.Findings, h policy.Hygiene) *v1alpha1.FindingsStatus {
	if f.Total() == 0 {
		return nil
	}
	out := &v1alpha1.FindingsStatus{Unlisted: f.Unlisted, Items: make([]v1alpha1.Finding, 0, len(f.Listed))}
	for kind, n := range f.Counts {
		out.SetCount(kind, n)
	}
	for _, fd := range f.Listed {
		c := fd.Credential
		item := v1alpha1.Finding{Kind: fd.Kind, AppID: c.AppID, AppDisplayName: c.AppDisplayName, Message: compose.Finding(obj, fd, h)}
		if fd.Kind != v1alpha1.FindingManySecrets {
			item.KeyID, item.Type, item.Source = c.KeyID, c.Type, c.Source
		}
		out.Items = append(out.Items, item)
	}
	return out
}

// ForgetCredentials drops what was known of a service principal or cluster that no longer
// exists, so that neither status nor metrics go on reporting credentials that are gone.
func ForgetCredentials(obj *v1alpha1.CredentialWatch) {
	st := &obj.Status
	st.ServicePrincipal, st.AKSCluster, st.Credentials, st.LastCheckTime = nil, nil, nil, nil
	st.State, st.EarliestExpiry, st.ExpiresIn = "", nil, ""
	meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionExpiring)
	meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionExpired)
}
