package rotation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/rotation/pacing"
	"github.com/credwatch/credwatch/internal/target"
)

// ReleaseAfter bounds how long a deleted watch waits for its reset's outcome: a namespace being
// deleted must not hang for the hours a stuck reset can take.
const ReleaseAfter = time.Hour

// Ending is what winding down a deleted watch's rotation came to: let go of unfinished (Release,
// at Status), nothing left in flight (Done), or neither yet (Result, to record).
type Ending struct {
	Release string
	Status  v1alpha1.RotationStatus
	Done    bool
	Result  Result
}

// WindDown aborts the rotation st of a deleted watch, or follows its reset in flight, and says
// when the watch may go: before any reset the rotation is aborted; once one began, the watch
// waits for that reset's outcome until deadline, then lets go saying what it left. A cluster
// that no longer exists lets go at once.
func (m *Machine) WindDown(ctx context.Context, st v1alpha1.RotationStatus, deadline time.Time) (Ending, error) {
	late := m.Now.After(deadline)
	if Abortable(st) == nil {
		res, err := m.Abort(ctx, st, "the watch is being deleted")
		switch {
		case err != nil:
			return Ending{}, err
		case res.Status == nil:
			return Ending{Done: true}, nil
		case late:
			return Ending{Release: "the new secret could not be removed in " + ReleaseAfter.String(), Status: *res.Status}, nil
		}
		return Ending{Result: res}, nil
	}
	if st.Step != v1alpha1.StepClusterUpdating || m.Cluster == nil {
		return Ending{Release: "no reset is in flight", Status: st}, nil
	}
	if _, err := m.Cluster.Read(ctx); azerr.KindOf(err) == azerr.KindNotFound {
		return Ending{Release: "its AKS cluster no longer exists", Status: st}, nil
	}
	if late {
		return Ending{Release: "its reset's outcome was not known after " + ReleaseAfter.String(), Status: st}, nil
	}
	res, err := m.Advance(ctx, st)
	switch {
	case err != nil:
		return Ending{}, err
	case res.Status == nil:
		return Ending{Done: true}, nil
	case res.Status.Step == v1alpha1.StepClusterUpdating:
		res.Next = policy.Earliest(res.Next, deadline)
		return Ending{Result: res}, nil
	}
	return Ending{Release: "its reset ended", Status: *res.Status}, nil
}

// NotAllowedAnyMore is why a deleted watch lets go of its rotation when its identity refuses it.
func NotAllowedAnyMore(err error) string {
	return fmt.Sprintf("its identity no longer allows it: %v", err)
}

// Unreachable is why a deleted watch lets go of its rotation when Azure did not answer in time.
func Unreachable(err error) string {
	return fmt.Sprintf("Azure could not be reached for %s: %v", ReleaseAfter, err)
}

// NotWoundDown is why a deleted watch lets go of its rotation when winding it down kept failing.
func NotWoundDown(err error) string {
	return fmt.Sprintf("it could not be wound down in %s: %v", ReleaseAfter, err)
}

// Let is what letting go of a deleted watch's rotation needs: where its secrets are kept, and
// what the watch last read of the application.
type Let struct {
	Store Store
	// Secret names the target Secret, for people.
	Secret string
	// Credentials are the application's, as last read; Prefixes name the watch's own secrets.
	Credentials []v1alpha1.Credential
	Prefixes    []string
	RemoveOld   v1alpha1.RemoveOldPolicy
}

// Release lets a deleted watch go with its rotation st unfinished (why): a secret a cluster may
// use is handed to the target Secret, so that its text outlives the watch's staging Secret, and
// the returned event note lists what was left for people to finish.
func Release(ctx context.Context, l Let, st v1alpha1.RotationStatus, why string) string {
	var left []string
	if Abortable(st) == nil {
		// Never used: its staging copy goes now rather than when the garbage collector gets to it,
		// which would keep a watch created again under the name from rotating until then.
		if err := l.Store.Discard(ctx); err != nil {
			left = append(left, fmt.Sprintf("its staging Secret could not be deleted (%v)", err))
		}
	}
	if Abortable(st) != nil && st.KeyID != "" {
		where := "Secret " + l.Secret
		if err := l.Store.Publish(ctx, st.KeyID, st.SecretDigest); err != nil {
			where = fmt.Sprintf("no Secret: writing it to %s failed (%v)", l.Secret, err)
		}
		left = append(left, fmt.Sprintf("the new secret %s, which the cluster may use, is in %s", st.KeyID, where))
	} else if st.KeyID != "" {
		left = append(left, fmt.Sprintf("the new secret %s, never used, is still in Graph", st.KeyID))
	}
	var expiry time.Time
	if st.Expiry != nil {
		expiry = st.Expiry.Time
	}
	var old []string
	for _, c := range policy.Retirable(l.Credentials, l.Prefixes, st.KeyID, expiry, l.RemoveOld) {
		old = append(old, c.KeyID)
	}
	if len(old) > 0 {
		left = append(left, "old secrets not retired: "+strings.Join(old, ", "))
	}
	return released(st, why, left)
}

// Finalize winds down the rotation of a watch being deleted, and lets the watch go once nothing
// is in flight: before any reset the rotation is aborted; once one began, the watch waits for
// that reset's outcome, at most ReleaseAfter, then lets go saying what it left. A cluster that
// no longer exists, or an identity that no longer allows the rotation, lets go at once.
func (ro *Run) Finalize(ctx context.Context) (time.Time, error) {
	obj := ro.obj
	if obj.Status.Rotation == nil {
		return time.Time{}, ro.e.Finalizer(ctx, false)
	}
	if obj.Status.Rotation.DeletionSeenTime == nil {
		// The operator's clock, not the API server's deletionTimestamp, bounds the wait.
		seen := *obj.Status.Rotation.DeepCopy()
		at := metav1.NewTime(ro.now)
		seen.DeletionSeenTime = &at
		if err := ro.e.Ledger.Save(ctx, seen); err != nil {
			return time.Time{}, err
		}
	}
	st := obj.Status.Rotation.DeepCopy()
	ro.pinTo(st)
	deadline := st.DeletionSeenTime.Add(ReleaseAfter)
	next, err := ro.windDown(ctx, *st, deadline)
	if err != nil && ro.now.After(deadline) {
		return ro.release(ctx, *st, NotWoundDown(err))
	}
	return next, err
}

// windDown winds the rotation st of a deleted watch down (Machine.WindDown), once its identity
// still allows that, and lets the watch go when that is done or cannot be.
func (ro *Run) windDown(ctx context.Context, st v1alpha1.RotationStatus, deadline time.Time) (time.Time, error) {
	g, err := ro.authorize(ctx, Abortable(st) != nil)
	var ke *target.KubernetesError
	if errors.As(err, &ke) {
		return time.Time{}, err
	}
	if err != nil {
		wg, ok, rerr := ro.revoked(ctx, st)
		if rerr != nil {
			return time.Time{}, rerr
		}
		if !ok {
			return ro.release(ctx, st, NotAllowedAnyMore(err))
		}
		g = wg // winding down an unused secret's rotation withdraws it
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	m, err := ro.machine(ctx, g)
	if err != nil {
		if ro.now.After(deadline) {
			return ro.release(ctx, st, Unreachable(err))
		}
		return ro.apply(m.Unreachable(st, err), nil, "")
	}
	e, err := m.WindDown(ctx, st, deadline)
	switch {
	case err != nil:
		return time.Time{}, err
	case e.Done:
		return time.Time{}, ro.e.Finalizer(ctx, false)
	case e.Release != "":
		return ro.release(ctx, e.Status, e.Release)
	}
	return ro.apply(e.Result, nil, "")
}

// release lets a deleted watch go with its rotation st unfinished, and tells people what was left
// (Release).
func (ro *Run) release(ctx context.Context, st v1alpha1.RotationStatus, why string) (time.Time, error) {
	var after string
	if Abortable(st) != nil {
		var err error
		if after, err = ro.paceRelease(ctx, st); err != nil {
			return time.Time{}, &target.KubernetesError{Err: err}
		}
	}
	msg := Release(ctx, Let{Store: ro.store(), Secret: ro.obj.Namespace + "/" + ro.spec.SecretRef.Name, Credentials: ro.obj.Status.Credentials,
		Prefixes: ro.prefixes(), RemoveOld: ro.spec.RemoveOld}, st, why)
	if after != "" {
		msg = strings.TrimSuffix(msg, ".") + "." + after
	}
	ro.e.Events.Event(corev1.EventTypeWarning, eventReleased, msg)
	return time.Time{}, ro.e.Finalizer(ctx, false)
}

// paceRelease records, before a deleted watch lets go of the rotation st whose new secret may be
// in use, that no rotation of the application starts before st's grace period ends, and, at
// Retiring, its retirement, for a watch created again under this name to finish. It returns what
// the release event says of it.
func (ro *Run) paceRelease(ctx context.Context, st v1alpha1.RotationStatus) (string, error) {
	rec, err := ro.e.Pace.Read(ctx, ro.pin.TenantID, ro.pin.AppID)
	if err != nil {
		return "", err
	}
	quiet := ro.now.Add(ro.rs.GracePeriod)
	if t := st.RetireTime; t != nil {
		quiet = t.Time
	}
	quiet = policy.Earliest(quiet, ro.now.Add(pacing.MaxQuiet))
	var p *pacing.Pending
	if st.Step == v1alpha1.StepRetiring {
		s := *st.DeepCopy()
		at := metav1.NewTime(quiet)
		s.RetireTime, s.SecretName = &at, ro.spec.SecretRef.Name
		s.DeletionSeenTime, s.NextAttemptTime, s.Failures = nil, nil, 0
		p = &pacing.Pending{Namespace: ro.obj.Namespace, Watch: ro.obj.Name, Status: s}
	}
	if rec.QuietUntil.After(quiet) {
		quiet = rec.QuietUntil
	}
	if err := ro.e.Pace.Released(ctx, rec, quiet, p); err != nil {
		return "", err
	}
	after := fmt.Sprintf(" No rotation of application %s starts before %s.", ro.pin.AppID, quiet.UTC().Format(time.RFC3339))
	if p != nil {
		after += fmt.Sprintf(" A watch created again as %s/%s for the same target retires the old secrets then.", ro.obj.Namespace, ro.obj.Name)
	}
	return after, nil
}
