package aksfleet

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/ptr"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
)

// Note is what a channel was last told of a fleet's cluster: the state of its service
// principal's first credential to end, and that end. Kept in the fleet's ledger as "State Unix".
type Note struct {
	State v1alpha1.CredentialState
	End   time.Time
}

func (n Note) String() string {
	return string(n.State) + " " + strconv.FormatInt(n.End.Unix(), 10)
}

// ParseNote reads a note back; false for anything else.
func ParseNote(s string) (Note, bool) {
	state, end, ok := strings.Cut(s, " ")
	unix, err := strconv.ParseInt(end, 10, 64)
	if !ok || err != nil || !policy.KnownState(v1alpha1.CredentialState(state)) {
		return Note{}, false
	}
	return Note{State: v1alpha1.CredentialState(state), End: time.Unix(unix, 0).UTC()}, true
}

// LedgerKey is the ledger's key for what channel was told of the cluster clusterID.
func LedgerKey(channel, clusterID string) string { return channel + "." + fleetHash(clusterID) }

// baseline is the key, per channel, that says the channel's ledger was started: before it,
// a fleet's clusters are recorded as they are, without a message each.
func baseline(channel string) string { return channel + ".baseline" }

// AlertKind is what a fleet's message tells of one cluster.
type AlertKind int

const (
	// StateWorsened: the cluster's service principal entered Warning, Critical or Expired.
	StateWorsened AlertKind = iota + 1
	// MovedToManagedIdentity: the cluster signs in with a managed identity now.
	MovedToManagedIdentity
)

// Alert is one message to one channel about one cluster, and what the ledger holds once it
// is sent: Note, or no entry when Note is nil.
type Alert struct {
	Channel string
	Key     string
	Kind    AlertKind
	Cluster ClusterView
	Note    *string
}

// AlertPlan is what a fleet's channels are due to be told, most urgent first, and what its
// ledger records without a message: clusters as they were when a channel began, states that got
// better or moved on to a new end, clusters gone.
type AlertPlan struct {
	Send   []Alert
	Record map[string]*string
}

// AlertInputs are what deciding a fleet's messages takes.
type AlertInputs struct {
	Channels []string
	// Views are the clusters on a service principal as of now, most in need of attention first.
	Views []ClusterView
	// Found are the clusters of the last check the identity lets the fleet show; Known all it
	// found, whatever the identity shows; Complete the subscriptions it listed whole.
	Found    []Cluster
	Known    []Cluster
	Complete map[string]bool
	// AllComplete is true when every subscription searched was listed whole, and no cluster was
	// left uncounted: only then is an entry whose cluster was not found known to be gone.
	AllComplete bool
	// Ledger is the entry of a key, and Entries every entry.
	Ledger  func(key string) (string, bool)
	Entries func(f func(key, value string))
	Now     time.Time
}

// PlanAlerts decides, per channel, one message per cluster and step: when its service
// principal's first credential enters a worse state than the channel was last told (Warning,
// then Critical, then Expired; a renewal that makes it better is recorded, and a later decline
// told again), and when a cluster the channel was told of signs in with a managed identity, as a
// complete listing of its subscription shows. A channel's first plan records every cluster as
// it is, without a message each: a new fleet or channel does not flood anyone.
func PlanAlerts(in AlertInputs) AlertPlan {
	plan := AlertPlan{Record: map[string]*string{}}
	// An entry is forgotten only for a cluster no longer found at all: one the identity hides
	// now is still there, and told again nothing when it shows again.
	found := map[string]bool{}
	for _, c := range in.Known {
		found[fleetHash(c.ID)] = true
	}
	channels := map[string]bool{}
	for _, ch := range in.Channels {
		channels[ch] = true
	}
	// What a channel no longer configured was told goes: the ledger holds configured channels only.
	in.Entries(func(key, _ string) {
		if ch, _, _ := strings.Cut(key, "."); !channels[ch] {
			plan.Record[key] = nil
		}
	})
	for _, ch := range in.Channels {
		_, started := in.Ledger(baseline(ch))
		if !started {
			plan.Record[baseline(ch)] = ptr.To(in.Now.UTC().Format(time.RFC3339))
		}
		plan.states(in, ch, started)
		for i := range in.Found {
			c := &in.Found[i]
			key := LedgerKey(ch, c.ID)
			if _, ok := in.Ledger(key); !ok || c.AppID != "" || !ListedWhole(in.Complete, c.ID) {
				continue
			}
			if started {
				plan.Send = append(plan.Send, Alert{Channel: ch, Key: key, Kind: MovedToManagedIdentity, Cluster: ClusterView{Cluster: c}})
			} else {
				plan.Record[key] = nil
			}
		}
		if !in.AllComplete {
			continue
		}
		prefix := ch + "."
		in.Entries(func(key, _ string) {
			if h, ok := strings.CutPrefix(key, prefix); ok && key != baseline(ch) && !found[h] {
				plan.Record[key] = nil
			}
		})
	}
	return plan
}

// states plans, on channel ch, a message for each cluster whose service principal got worse
// than the channel was last told, and records the others as they are; before the channel
// started, every cluster is recorded and none told.
func (plan *AlertPlan) states(in AlertInputs, ch string, started bool) {
	for _, v := range in.Views {
		if v.Earliest == nil {
			continue // not read: nothing known to tell
		}
		key := LedgerKey(ch, v.ID)
		note := Note{State: v.State, End: v.Earliest.Time.Truncate(time.Second).UTC()}
		text := note.String()
		old, ok := in.Ledger(key)
		was, parsed := ParseNote(old)
		switch {
		case !started:
			plan.Record[key] = &text
		case (!ok || !parsed) && v.State == v1alpha1.StateValid:
			plan.Record[key] = &text
		case !ok || !parsed || policy.Worse(v.State, was.State):
			plan.Send = append(plan.Send, Alert{Channel: ch, Key: key, Kind: StateWorsened, Cluster: v, Note: &text})
		case old != text:
			plan.Record[key] = &text
		}
	}
}

// SendsPerReconcile bounds the messages one reconcile sends a channel: each may take
// seconds, and a worker is held meanwhile. The rest go at the next reconcile, in a minute.
const SendsPerReconcile = 10

// AlertSubject names a fleet alert for its ID: the cluster, the step and its end.
func AlertSubject(a Alert) string {
	if a.Kind == MovedToManagedIdentity {
		return fmt.Sprintf("cluster:%s/managedIdentity", strings.ToLower(a.Cluster.ID))
	}
	return fmt.Sprintf("cluster:%s/%s", strings.ToLower(a.Cluster.ID), *a.Note)
}
