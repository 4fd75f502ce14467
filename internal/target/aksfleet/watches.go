package aksfleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

const (
	// labelFleet marks the watches a fleet created with the fleet's UID, to list them; the
	// controller owner reference, which only the fleet's UID satisfies, decides what is its.
	labelFleet = "credwatch.dev/fleet"
	// AnnotationCluster is the resource ID of the cluster a fleet's watch watches.
	AnnotationCluster = "credwatch.dev/cluster"
	// annotationSpec is a hash of the spec the fleet last gave the watch: the API server fills in
	// defaults, so the stored spec never equals the one written.
	annotationSpec = "credwatch.dev/fleet-spec"
)

// maxWrites bounds the watches one reconcile of a fleet creates, updates or deletes: a new fleet
// of 1,000 clusters would otherwise hold a worker for minutes of client-side rate limits. The
// rest come at the next reconcile, writesAgain later.
const (
	maxWrites   = 50
	writesAgain = 2 * time.Second
)

const (
	eventWatchesCreated = "FleetWatchesCreated"
	eventWatchesDeleted = "FleetWatchesDeleted"
	eventWatchTaken     = "FleetWatchNameTaken"
	eventWatchesCapped  = "FleetWatchesCapped"
	eventWatchRefused   = "FleetWatchRefused"
)

// SyncWatches keeps one aksCluster watch per cluster of a fleet on a service principal, as
// createWatches asks, from what this process's last check of the fleet found (n): creates those
// missing, brings those whose template changed up to date, and deletes those whose cluster a
// complete listing shows gone or on a managed identity (all of them once createWatches is
// unset). A watch of the name that the fleet does not control is left alone and reported.
// unwatched is how many clusters status last said had no watch.
func (f Fleet) SyncWatches(ctx context.Context, obj *v1alpha1.CredentialWatch, n *Now, unwatched int32, now time.Time) (time.Time, error) {
	list, err := f.Watches.List(ctx, obj.Namespace, map[string]string{labelFleet: string(obj.UID)})
	if err != nil {
		return time.Time{}, fmt.Errorf("listing the fleet's watches: %w", err)
	}
	mine := map[string]*v1alpha1.CredentialWatch{}
	for i := range list {
		c := &list[i]
		// The label, the owner reference and the annotation can all be written by anyone who may
		// write the watch: the name, a hash of the cluster, must agree with them too.
		if ref := metav1.GetControllerOf(c); ref != nil && ref.UID == obj.UID && c.Name == WatchName(obj.Name, c.Annotations[AnnotationCluster]) {
			mine[c.Name] = c
		}
	}
	s := watchSync{f: f, fleet: obj}
	if obj.Spec.Target.AKSFleet.CreateWatches != nil {
		if err := s.createAndUpdate(ctx, n.Shown.Clusters, mine); err != nil {
			return time.Time{}, err
		}
	}
	if err := s.deleteGone(ctx, n.Found, mine); err != nil {
		return time.Time{}, err
	}
	left := int32(len(s.taken) + s.capped + len(s.refused) + s.waiting)
	s.report(left != unwatched)
	obj.Status.Fleet.Watches, obj.Status.Fleet.Unwatched = int32(len(mine)+len(s.created)-len(s.deleted)), left
	if s.more {
		return now.Add(writesAgain), nil
	}
	return time.Time{}, nil
}

// watchSync is one reconcile's work on a fleet's watches.
type watchSync struct {
	f     Fleet
	fleet *v1alpha1.CredentialWatch
	// writes counts the API writes made; more is true when some were left for the next reconcile.
	writes int
	more   bool
	// created and deleted name the watches written; taken, those whose name another watch
	// holds; capped counts the clusters beyond the watches a fleet may create.
	created, deleted, taken []string
	// refused are the watches the API server would not take, with why.
	refused []string
	capped  int
	// waiting counts the clusters whose watch was not tried after the quota refused one.
	waiting   int
	quota     bool
	movedToMI []string
}

func (s *watchSync) spend() bool {
	if s.writes == maxWrites {
		s.more = true
		return false
	}
	s.writes++
	return true
}

// watchLimit is the most watches the fleet may own.
func (s *watchSync) watchLimit() int {
	if s.f.WatchLimit > 0 {
		return s.f.WatchLimit
	}
	return MaxWatches
}

// createAndUpdate creates the watch of each cluster on a service principal that has none, and
// rewrites those whose spec the fleet last gave differs from the one it gives now.
func (s *watchSync) createAndUpdate(ctx context.Context, clusters []Cluster, mine map[string]*v1alpha1.CredentialWatch) error {
	owned := len(mine)
	for _, c := range clusters {
		if c.AppID == "" {
			continue
		}
		name := WatchName(s.fleet.Name, c.ID)
		spec := WatchSpec(s.fleet.Spec, c)
		hash, err := specHash(spec)
		if err != nil {
			return err
		}
		if have := mine[name]; have != nil {
			if err := s.update(ctx, have, spec, hash, c.ID); err != nil {
				return err
			}
			continue
		}
		switch {
		case owned >= s.watchLimit():
			s.capped++
		case s.quota:
			// After the namespace's quota refused one, the others would be refused too: they
			// wait for the fleet's next reconcile, not for a retry in a moment.
			s.waiting++
		default:
			created, err := s.create(ctx, name, spec, hash, c.ID)
			if err != nil {
				return err
			}
			if created {
				owned++
			}
		}
	}
	return nil
}

// update gives the fleet's watch have the spec whose hash is hash, unless it has it already, is
// going, or this reconcile's writes are spent.
func (s *watchSync) update(ctx context.Context, have *v1alpha1.CredentialWatch, spec v1alpha1.CredentialWatchSpec, hash, clusterID string) error {
	if have.DeletionTimestamp != nil || have.Annotations[annotationSpec] == hash || !s.spend() {
		return nil
	}
	have.Spec = spec
	if have.Annotations == nil {
		have.Annotations = map[string]string{}
	}
	have.Annotations[annotationSpec], have.Annotations[AnnotationCluster] = hash, clusterID
	err := s.f.Watches.Update(ctx, have)
	switch {
	case err == nil || apierrors.IsNotFound(err):
		return nil
	case refusedWrite(err):
		s.refused = append(s.refused, have.Name+": "+err.Error())
		return nil
	}
	return fmt.Errorf("updating the fleet's watch %s: %w", have.Name, err)
}

// create makes the watch name of the cluster clusterID, unless a watch the fleet did not create
// holds the name or this reconcile's writes are spent; it reports whether it did.
func (s *watchSync) create(ctx context.Context, name string, spec v1alpha1.CredentialWatchSpec, hash, clusterID string) (bool, error) {
	var other v1alpha1.CredentialWatch
	switch err := s.f.Watches.Get(ctx, s.fleet.Namespace, name, &other); {
	case err == nil:
		// Someone's watch holds the name: the fleet does not take it over.
		s.taken = append(s.taken, name)
		return false, nil
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("reading watch %s: %w", name, err)
	}
	if !s.spend() {
		return false, nil
	}
	child := &v1alpha1.CredentialWatch{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.fleet.Namespace,
			Labels:      map[string]string{labelFleet: string(s.fleet.UID)},
			Annotations: map[string]string{AnnotationCluster: clusterID, annotationSpec: hash},
			// No blockOwnerDeletion: it would need update on the fleet's finalizers, and
			// nothing waits for the fleet's watches to go before it does.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "CredentialWatch",
				Name: s.fleet.Name, UID: s.fleet.UID, Controller: ptr.To(true)}},
		},
		Spec: spec,
	}
	err := s.f.Watches.Create(ctx, child)
	switch {
	case err == nil:
		s.created = append(s.created, name)
		return true, nil
	case apierrors.IsAlreadyExists(err): // created meanwhile: the next reconcile sees whose
		s.more = true
		return false, nil
	case refusedWrite(err):
		// One cluster's watch the API server refuses (a resource group's name the CRD's rules
		// do not take) holds up none of the others; a quota holds up the rest.
		s.refused = append(s.refused, name+": "+err.Error())
		s.quota = s.quota || apierrors.IsForbidden(err)
		return false, nil
	}
	return false, fmt.Errorf("creating the fleet's watch %s for AKS cluster %s: %w", name, clusterID, err)
}

// deleteGone deletes the fleet's watches whose cluster a complete listing of its subscription
// shows gone or on a managed identity, or all of them when createWatches is unset. A watch with a
// rotation under way goes only once its rotation's finalizer has rolled it back or finished it.
func (s *watchSync) deleteGone(ctx context.Context, found Found, mine map[string]*v1alpha1.CredentialWatch) error {
	for name, have := range mine {
		if have.DeletionTimestamp != nil {
			continue
		}
		id := have.Annotations[AnnotationCluster]
		fate := WatchFateOf(id, found.Clusters, found.Complete)
		if s.fleet.Spec.Target.AKSFleet.CreateWatches == nil {
			fate = DeleteGone
		}
		if fate == KeepWatch || !s.spend() {
			continue
		}
		if err := s.f.Watches.Delete(ctx, have); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the fleet's watch %s: %w", name, err)
		}
		s.deleted = append(s.deleted, name)
		if fate == DeleteManagedIdentity {
			s.movedToMI = append(s.movedToMI, id)
		}
	}
	return nil
}

// report raises one event for what this reconcile created, one for what it deleted, and, when
// the clusters left without a watch changed, one for each reason.
func (s *watchSync) report(unwatchedChanged bool) {
	ev := s.f.Events
	if n := len(s.created); n > 0 {
		ev.Eventf(s.fleet, corev1.EventTypeNormal, eventWatchesCreated, "Created %d aksCluster watches, such as %s", n, s.created[0])
	}
	if n := len(s.deleted); n > 0 {
		why := "their clusters are gone from subscriptions listed whole"
		switch {
		case s.fleet.Spec.Target.AKSFleet.CreateWatches == nil:
			why = "createWatches is no longer set"
		case len(s.movedToMI) == n:
			why = "their clusters sign in with a managed identity now, such as " + s.movedToMI[0]
		case len(s.movedToMI) > 0:
			why = fmt.Sprintf("their clusters are gone, or %d on a managed identity now, such as %s", len(s.movedToMI), s.movedToMI[0])
		}
		ev.Eventf(s.fleet, corev1.EventTypeNormal, eventWatchesDeleted, "Deleted %d aksCluster watches, such as %s: %s", n, s.deleted[0], why)
	}
	if n := len(s.refused); n > 0 {
		ev.Eventf(s.fleet, corev1.EventTypeWarning, eventWatchRefused, "The API server refused %d of the fleet's watches, such as %s", n, s.refused[0])
	}
	if !unwatchedChanged {
		return
	}
	if s.capped > 0 {
		ev.Eventf(s.fleet, corev1.EventTypeWarning, eventWatchesCapped,
			"%d clusters on a service principal have no watch: a fleet creates at most %d; narrow it with subscriptions, resourceGroups or tags, or split it",
			s.capped, s.watchLimit())
	}
	if n := len(s.taken); n > 0 {
		ev.Eventf(s.fleet, corev1.EventTypeWarning, eventWatchTaken,
			"%d clusters have no watch of the fleet's because a watch it did not create holds the name, such as %s: delete or rename that watch, and the fleet creates its own",
			n, s.taken[0])
	}
}

// refusedWrite reports whether the API server refused a write for what it held, which trying
// again does not mend: its validation, admission or a quota.
func refusedWrite(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}

// specHash is a short digest of spec, to tell whether a watch still has the spec it was given.
func specHash(spec v1alpha1.CredentialWatchSpec) (string, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}
