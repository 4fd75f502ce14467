package aksfleet

import (
	"cmp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
)

// MaxListed bounds how many clusters a fleet's status lists, so that a fleet of any size
// fits in one object: metrics carry every cluster.
const MaxListed = 50

// Cluster is a cluster of a fleet as its last check found it.
type Cluster struct {
	ID, SubscriptionID, ResourceGroup string
	// AppID is the service principal the cluster signs in with, empty on a managed identity.
	AppID string
	// Credentials are the service principal's, nil when they were not read; Reason says why.
	Credentials []v1alpha1.Credential
	Reason      string
	// KeyInUse is the keyId of the credential the cluster signs in with, the latest to sign in of
	// those in use, as the sign-ins read with the check showed them (spec.usage.signIns), when its
	// service principal serves it alone; empty otherwise.
	KeyInUse string
}

// Counted are the credentials whose end matters to the cluster: those of its service principal
// in use (signed in within activeWithin) when sign-ins show it serves the cluster alone, or else
// every credential of its service principal.
func (c Cluster) Counted() []v1alpha1.Credential {
	if c.KeyInUse == "" {
		return c.Credentials
	}
	var used []v1alpha1.Credential
	for _, cr := range c.Credentials {
		if cr.InUse {
			used = append(used, cr)
		}
	}
	return used
}

// markKeysInUse marks, on each cluster whose service principal serves it alone, the credentials
// that signed in within activeWithin of now, and names the latest to sign in KeyInUse. A service
// principal that several clusters share says nothing of which one uses which secret; nor does
// one in a fleet whose listing is not complete (a subscription unread, clusters uncounted),
// where another cluster may share it unseen.
func markKeysInUse(clusters []Cluster, complete bool, activeWithin time.Duration, now time.Time) {
	serves := map[string]int{}
	for _, c := range clusters {
		if c.AppID != "" {
			serves[c.AppID]++
		}
	}
	for i := range clusters {
		c := &clusters[i]
		c.KeyInUse = ""
		if !complete || c.AppID == "" || serves[c.AppID] != 1 {
			continue
		}
		policy.MarkInUse(c.Credentials, activeWithin, now)
		var latest *v1alpha1.Credential
		for j := range c.Credentials {
			if cr := &c.Credentials[j]; cr.InUse && (latest == nil || cr.LastSignIn.After(latest.LastSignIn.Time)) {
				latest = cr
			}
		}
		if latest != nil {
			c.KeyInUse = latest.KeyID
		}
	}
}

// ClusterView is a cluster on a service principal at one instant: when its first credential
// ends, and the worst state of its credentials; both empty when they were not read, and the
// state Valid with no end when it has none.
type ClusterView struct {
	*Cluster
	Earliest *metav1.Time
	State    v1alpha1.CredentialState
}

// View is what a fleet amounts to at one instant.
type View struct {
	// Status holds the counts and the clusters that most need attention; the caller adds the
	// subscriptions searched and those unread.
	Status v1alpha1.FleetStatus
	// Clusters are the clusters on a service principal, most in need of attention first.
	Clusters []ClusterView
	// State is the worst state of the clusters' credentials, Valid when none is known.
	State v1alpha1.CredentialState
	// Earliest is the end of the first credential to end among all of them.
	Earliest *metav1.Time
	// NextTransition is the first instant after now at which a cluster changes state.
	NextTransition time.Time
}

// ViewAt evaluates every cluster of a fleet at now, leaving clusters unchanged: they are shared
// with the metrics. Every credential of a cluster's service principal counts, as on an aksCluster
// watch: Resource Manager does not say which secret a cluster signs in with, and one renewed
// with --append may be the one it still uses; only the sign-ins of a service principal serving
// the cluster alone say it (KeyInUse), and then that credential's end is the one that matters.
func ViewAt(clusters []Cluster, now time.Time, t policy.Thresholds, limit int) View {
	v := View{State: v1alpha1.StateValid}
	for i := range clusters {
		c := &clusters[i]
		v.Status.Clusters++
		if c.AppID == "" {
			v.Status.ManagedIdentity++
			continue
		}
		v.Status.ServicePrincipal++
		cv := ClusterView{Cluster: c}
		if c.Reason == "" {
			s := policy.Evaluate(slices.Clone(c.Counted()), now, t)
			cv.State = s.State
			if s.Earliest != nil {
				end := s.Earliest.EndTime
				cv.Earliest = &end
				if v.Earliest == nil || end.Before(v.Earliest) {
					v.Earliest = &end
				}
			}
			if policy.Worse(s.State, v.State) {
				v.State = s.State
			}
			if !s.NextTransition.IsZero() && (v.NextTransition.IsZero() || s.NextTransition.Before(v.NextTransition)) {
				v.NextTransition = s.NextTransition
			}
			switch s.State {
			case v1alpha1.StateWarning:
				v.Status.Warning++
			case v1alpha1.StateCritical:
				v.Status.Critical++
			case v1alpha1.StateExpired:
				v.Status.Expired++
			}
		}
		v.Clusters = append(v.Clusters, cv)
	}
	sortByAttention(v.Clusters)
	for i, cv := range v.Clusters {
		if i == limit {
			v.Status.Unlisted = int32(len(v.Clusters) - limit)
			break
		}
		v.Status.Attention = append(v.Status.Attention, v1alpha1.FleetCluster{ID: cv.ID, SubscriptionID: cv.SubscriptionID,
			AppID: cv.AppID, EarliestExpiry: cv.Earliest, State: cv.State, Reason: cv.Reason, KeyInUse: cv.KeyInUse})
	}
	return v
}

// sortByAttention orders clusters as the fleet lists them: those whose credentials are
// unknown first, then by their first expiry, the past included (a cluster whose secret expired
// yesterday is broken now), then those with none.
func sortByAttention(clusters []ClusterView) {
	rank := func(c ClusterView) int {
		switch {
		case c.Reason != "":
			return 0
		case c.Earliest != nil:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(clusters, func(a, b ClusterView) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return cmp.Compare(ra, rb)
		}
		if a.Earliest != nil && !a.Earliest.Equal(b.Earliest) {
			return a.Earliest.Compare(b.Earliest.Time)
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// EarliestEnd is when the first of creds ends, nil when there are none.
func EarliestEnd(creds []v1alpha1.Credential) *metav1.Time {
	var first *metav1.Time
	for i := range creds {
		if end := &creds[i].EndTime; first == nil || end.Before(first) {
			first = end
		}
	}
	return first
}
