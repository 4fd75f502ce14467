package policy

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CheckDue reports whether Graph should be read now: the spec changed since the last check, a
// person asked for a check (the check annotation), no check is scheduled, or the scheduled time
// has come. A restarted operator therefore does not re-read Graph for watches checked a moment
// ago. While Graph throttles the watch, its Retry-After holds even against a spec change or a
// request: reading sooner would only be throttled again.
func CheckDue(generation, observedGeneration int64, nextCheck *metav1.Time, throttled, requested bool, now time.Time) bool {
	if nextCheck == nil || !now.Before(nextCheck.Time) {
		return true
	}
	return (generation != observedGeneration || requested) && !throttled
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
	d := retryBase
	for i := int32(1); i < failures && d < retryCap; i++ {
		d *= 2
	}
	d = min(d, retryCap, checkInterval)
	return max(d, retryAfter)
}

// RequeueAfter is how long from now until the earliest of the next check and the given moments
// (state transitions, alerts falling due), at which a watch has something new to say. Zero
// moments are ignored. The result is at least a second: controller-runtime reads zero as "do
// not come back".
func RequeueAfter(now, nextCheck time.Time, moments ...time.Time) time.Duration {
	at := nextCheck
	for _, m := range moments {
		if !m.IsZero() && m.Before(at) {
			at = m
		}
	}
	return max(at.Sub(now), time.Second)
}
