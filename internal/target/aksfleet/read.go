package aksfleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/target"
)

const (
	// listings bounds the subscriptions a fleet's check lists at once: Resource Manager counts
	// reads per identity and subscription, and a listing is a page a second or so.
	listings = 4
	// reads bounds the service principals a fleet's check reads at once. The read planner packs
	// concurrent reads of one identity into lists of appIds, so the bound is what one batch of
	// lists reads, not one.
	reads = graph.MaxListedAppIDs
)

// limit bounds the aksFleet watches a namespace runs: each lists every subscription its identity
// may read at each check, against Resource Manager's limits for that identity, which the watches
// of other namespaces using it share.
var limit = target.Limit{Max: 3, Kind: "aksFleet", Reason: v1alpha1.ReasonTooManyFleets,
	Fix: "delete one, or widen one of them with subscriptions, resourceGroups or tags",
	Is:  func(w *v1alpha1.CredentialWatch) bool { return w.Spec.Target.AKSFleet != nil }}

// Allowed refuses a fleet beyond the oldest three of its namespace.
func (f Fleet) Allowed(ctx context.Context, obj *v1alpha1.CredentialWatch) error {
	return limit.Allows(ctx, f.Watches, obj)
}

// Read lists the clusters of fleet's subscriptions and reads the credentials of the service
// principals they sign in with. A subscription that cannot be listed is reported with the
// reason, and the others are read; the check fails only when none could be.
func (f Fleet) Read(ctx context.Context, fleet types.NamespacedName, g access.Grant, id azure.Identity, t *v1alpha1.AKSFleetTarget) (Found, error) {
	fc, err := f.Azure.Fleet(id, t.TenantID)
	if err != nil {
		return Found{}, err
	}
	// The tenant's subscriptions, as the identity sees them: a subscription the watch names is
	// searched only if it is one of them, so that an identity allowed several tenants' does not
	// list one under another's name.
	listed, err := fc.Subscriptions(ctx)
	if err != nil {
		return Found{}, &target.ClusterError{Err: err}
	}
	inTenant := map[string]bool{}
	for _, s := range listed {
		inTenant[strings.ToLower(s.ID)] = true
	}
	subs, explicit := lowerSet(t.Subscriptions), len(t.Subscriptions) > 0
	if !explicit {
		subs = slices.Sorted(maps.Keys(inTenant))
	}
	found, firstErr := f.gather(listFleet(ctx, fc, g, t, subs, inTenant, explicit), t)
	if found.Subscriptions > 0 && len(found.Unread) == found.Subscriptions {
		return Found{}, &target.ClusterError{Err: firstErr}
	}
	f.readCredentials(ctx, fleet, g, id, t.TenantID, &found)
	if err := ctx.Err(); err != nil {
		if ue := azerr.Unanswered(err); ue != nil {
			return Found{}, ue
		}
		return Found{}, err
	}
	return found, nil
}

// gather is what the listings found: the clusters of the fleet, each once and no more than it
// holds, the subscriptions that could not be listed, and those listed whole. It returns the
// first listing's failure too.
func (f Fleet) gather(listings []listing, t *v1alpha1.AKSFleetTarget) (Found, error) {
	var found Found
	var firstErr error
	seen := map[string]bool{}
	limit := f.MaxClusters
	if limit == 0 {
		limit = DefaultMaxClusters
	}
	found.Complete = map[string]bool{}
	for _, l := range listings {
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
			found.Clusters = append(found.Clusters, Cluster{ID: c.ID, SubscriptionID: l.sub, ResourceGroup: c.Ref.ResourceGroup,
				AppID: strings.ToLower(c.ClientID)})
		}
	}
	if found.Uncounted > 0 {
		found.Complete = nil
	}
	return found, firstErr
}

type listing struct {
	sub      string
	groups   []string
	clusters []aks.ListedCluster
	err      error
}

// listFleet lists the clusters of each subscription where the identity allows it. A
// subscription the watch names that the identity does not cover, or that is not the tenant's,
// is reported; one that only the list of subscriptions showed is not the fleet's, and is left out.
func listFleet(ctx context.Context, fc aks.FleetClient, g access.Grant, t *v1alpha1.AKSFleetTarget, subs []string, inTenant map[string]bool, explicit bool) []listing {
	out := make([]listing, len(subs))
	wanted := lowerSet(t.ResourceGroups)
	var wg sync.WaitGroup
	slots := make(chan struct{}, listings)
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
	return slices.DeleteFunc(out, func(l listing) bool {
		var refusal *access.Refusal
		return errors.As(l.err, &refusal)
	})
}

// readCredentials reads the credentials of each service principal the clusters sign in with,
// once however many clusters share it, into the clusters; a cluster whose service principal the
// identity does not cover, or that could not be read, says why instead. Each is read as a check
// of the fleet (checkOf), with what the fleet's last check took.
func (f Fleet) readCredentials(ctx context.Context, fleet types.NamespacedName, g access.Grant, id azure.Identity, tenant string, found *Found) {
	var before map[string]graph.Snapshot
	if f.Store != nil {
		prev, _ := f.Store.Get(fleet)
		before = prev.Read
	}
	answers := map[string]*spRead{}
	for _, c := range found.Clusters {
		if c.AppID != "" && answers[c.AppID] == nil {
			answers[c.AppID] = &spRead{}
		}
	}
	mayList := g.Allow(access.Request{Operation: v1alpha1.OperationTenantScan, TenantID: tenant}) == nil
	var wg sync.WaitGroup
	slots := make(chan struct{}, reads)
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
		ask := graph.Ask{Asker: fleetAsker(fleet, appID), MayList: mayList, Waits: true}
		if k, ok := before[appID]; ok {
			ask.Known, ask.KnownAt = &k, k.ReadAt
		}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			snap, err := f.check(ctx, id, appID, ask)
			if err != nil {
				a.reason, a.err = target.ReasonFor(err), err
				return
			}
			a.creds, a.snap = target.Credentials(snap), &snap
		}()
	}
	wg.Wait()
	found.keep(answers)
}

// spRead is what reading one service principal's credentials gave.
type spRead struct {
	creds  []v1alpha1.Credential
	snap   *graph.Snapshot
	reason string
	err    error
}

// keep puts the service principals' reads, by appId, in found: in its clusters, its reads for
// the next check, and its count of those that could not be read, naming the first by appId.
func (found *Found) keep(answers map[string]*spRead) {
	found.Read = map[string]graph.Snapshot{}
	for _, appID := range slices.Sorted(maps.Keys(answers)) {
		a := answers[appID]
		if a.snap != nil {
			found.Read[appID] = *a.snap
		}
		if a.err != nil {
			if found.UnreadApps++; found.UnreadApp == "" {
				found.UnreadApp = appID + ": " + a.err.Error()
			}
		}
	}
	for i := range found.Clusters {
		if a := answers[found.Clusters[i].AppID]; a != nil {
			found.Clusters[i].Credentials, found.Clusters[i].Reason = a.creds, a.reason
		}
	}
}

// fleetAsker is how the read planner knows a fleet's reads of one service principal: apart from
// any watch's, as the planner answers each asker from what it last answered it.
func fleetAsker(fleet types.NamespacedName, appID string) string {
	return "aksFleet:" + fleet.Namespace + "/" + fleet.Name + "/" + strings.ToLower(appID)
}

// check reads appID's credentials as id, as ask says (checkOf).
func (f Fleet) check(ctx context.Context, id azure.Identity, appID string, ask graph.Ask) (graph.Snapshot, error) {
	app, err := f.Azure.Application(id, graph.AppRef{AppID: appID})
	if err != nil {
		return graph.Snapshot{}, err
	}
	return checkOf(ctx, app, ask)
}

// checkOf asks for app's credentials as ask says and waits for the answer: from a batch of
// lists, or from Graph's changes when the planner can answer from what ask knows.
func checkOf(ctx context.Context, app graph.AppClient, ask graph.Ask) (graph.Snapshot, error) {
	woken := make(chan struct{}, 1)
	ask.Wake = func() {
		select {
		case woken <- struct{}{}:
		default:
		}
	}
	for {
		snap, err := app.Check(ctx, ask)
		if !errors.Is(err, graph.ErrPending) {
			return snap, err
		}
		select {
		case <-woken:
		case <-ctx.Done():
			return graph.Snapshot{}, ctx.Err()
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
