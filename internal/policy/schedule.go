package policy

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// CheckState is what decides whether a watch's target is read now: all of it from the watch,
// but Scanned, which only this process knows.
type CheckState struct {
	Generation, ObservedGeneration int64
	// NextCheck is when the next check is scheduled; nil when none is. LastCheck is when the
	// last was made; nil when none was.
	NextCheck, LastCheck *metav1.Time
	// Throttled is true when the last check was throttled: its Retry-After holds.
	Throttled bool
	// Requested is true when the check annotation holds a request not yet answered.
	Requested bool
	// TenantScan is true for a tenant scan or a fleet, whose credentials live in this process
	// only; Scanned is true when this process holds them.
	TenantScan, Scanned bool
	// Failures counts the consecutive failed checks.
	Failures int32
	// Gap is the least time between two checks when the second is not the schedule's; zero
	// means EarlyCheckGap.
	Gap time.Duration
}

// CheckStateOf is w's CheckState; scanned says whether this process holds its tenant scan.
func CheckStateOf(w *v1alpha1.CredentialWatch, scanned bool) CheckState {
	ready := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
	return CheckState{
		Generation:         w.Generation,
		ObservedGeneration: w.Status.ObservedGeneration,
		NextCheck:          w.Status.NextCheckTime,
		LastCheck:          w.Status.LastCheckTime,
		Throttled:          ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == v1alpha1.ReasonThrottled,
		Requested:          w.Annotations[v1alpha1.CheckAnnotation] != w.Status.CheckRequest,
		TenantScan:         w.Spec.Target.TenantScan != nil || w.Spec.Target.AKSFleet != nil,
		Scanned:            scanned,
		Failures:           w.Status.ConsecutiveFailures,
	}
}

// CheckDue reports whether the target should be read now: the spec changed since the last check,
// a person asked for a check (the check annotation), no check is scheduled, or the scheduled time
// has come. A restarted operator therefore does not re-read Graph for watches checked a moment
// ago, except for a tenant scan, whose credentials it lost: it scans again, unless that scan
// failed and its backoff still runs. While Graph throttles the watch, its Retry-After holds even
// against a spec change or a request: reading sooner would only be throttled again.
//
// A check that its schedule did not call for (a request, a spec change, a scan this process lost)
// is made at most once every EarlyCheckGap: whoever edits a watch in a loop does not spend the
// Graph budget every namespace shares (see CheckWait).
func CheckDue(s CheckState, now time.Time) bool {
	if s.NextCheck == nil || !now.Before(s.NextCheck.Time) {
		return true
	}
	at := CheckWait(s)
	return !at.IsZero() && !now.Before(at)
}

// EarlyCheckGap is the least time between two checks of a watch when the second is not the
// schedule's.
const EarlyCheckGap = time.Minute

// CheckWait is when a check the schedule did not call for may be made: at once, or EarlyCheckGap
// after the last check; zero when none is called for.
func CheckWait(s CheckState) time.Time {
	lost := s.TenantScan && !s.Scanned && s.Failures == 0
	asked := (s.Generation != s.ObservedGeneration || s.Requested) && !s.Throttled
	if !lost && !asked {
		return time.Time{}
	}
	if s.LastCheck == nil {
		return time.Unix(0, 0)
	}
	gap := s.Gap
	if gap == 0 {
		gap = EarlyCheckGap
	}
	return s.LastCheck.Add(gap)
}

// EarlyCheck reports whether a check due now (CheckDue) is one its schedule did not call for, or
// the first of a tenant scan or fleet, which reads a whole tenant or subscription: a watch
// deleted and created again in a loop must not read one each time.
func EarlyCheck(s CheckState, now time.Time) bool {
	return s.NextCheck != nil && now.Before(s.NextCheck.Time) || s.TenantScan && s.NextCheck == nil
}

// Jitter lengthens d by up to frac of itself, so that watches created together spread their
// Graph reads instead of arriving in step. rnd returns a number in [0, 1).
func Jitter(d time.Duration, frac float64, rnd func() float64) time.Duration {
	return d + time.Duration(float64(d)*frac*rnd())
}

// Retry backoff after failed checks: 30s, 1m, 2m, ... capped at 15m, and never longer than the
// check interval, so a watch that fails recovers at least as fast as it would have checked.
const (
	retryBase = 30 * time.Second
	retryCap  = 15 * time.Minute
)

// RetryAfterFailure is how long to wait before the next check after failures consecutive failed
// checks. A Retry-After from Graph is a floor: waiting less would only be throttled again.
func RetryAfterFailure(failures int32, retryAfter, checkInterval time.Duration) time.Duration {
	return max(min(Doubling(retryBase, retryCap, failures), checkInterval), retryAfter)
}

// Doubling is the one backoff of credwatch: base after the first failure, doubling with each
// further one, at most limit. Every retry schedule (checks, alert channels, rotation steps) is
// this with its own base and limit.
func Doubling(base, limit time.Duration, failures int32) time.Duration {
	d := base
	for i := int32(1); i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// RequeueAfter is how long from now until the earliest of the next check and the given moments
// (state transitions, alerts falling due), at which a watch has something new to say. Zero
// moments are ignored; when all are zero, so is the result, which controller-runtime reads as "do
// not come back" (a watch waiting for its identity, which reconciles it when it signs in).
// Otherwise it is at least a second.
func RequeueAfter(now, nextCheck time.Time, moments ...time.Time) time.Duration {
	at := Earliest(nextCheck, Earliest(moments...))
	if at.IsZero() {
		return 0
	}
	return max(at.Sub(now), time.Second)
}

// Latest is the later of a and b.
func Latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Earliest is the earliest of moments, ignoring zero ones, which mean never; zero when all are.
func Earliest(moments ...time.Time) time.Time {
	var at time.Time
	for _, m := range moments {
		if !m.IsZero() && (at.IsZero() || m.Before(at)) {
			at = m
		}
	}
	return at
}

// Alert delivery backoff per channel: 1m, 2m, 4m, ... capped at 1h.
const (
	deliveryBase = time.Minute
	DeliveryCap  = time.Hour
)

// DeliveryBackoff is how long after failures consecutive failed deliveries a channel is tried
// again; a peer's Retry-After is a floor.
func DeliveryBackoff(failures int32, retryAfter time.Duration) time.Duration {
	return max(Doubling(deliveryBase, DeliveryCap, failures), retryAfter)
}

const day = 24 * time.Hour
