// Package budget spends Microsoft Graph's throttling budget the way Graph counts it, so that
// credwatch is never the reason a tenant is throttled: a token bucket of resource units per
// application and tenant (Graph's scope), refilled at the rate of the tenant's size, each request
// charged what Graph charges, paused by a 429's Retry-After and slowed when Graph reports the
// budget nearly spent.
//
// A 429 also says the budget is smaller than configured: another replica signs in as the same
// application, or the tenant is smaller than --graph-budget says. The bucket then learns: what
// was spent in the window that drew the 429, less what Graph refused, is the budget Graph allows
// (or half the rate, when too little was spent to tell). The bucket drops to half of that, its
// capacity with it, so the pause is not followed by another burst; climbs back within a few
// windows to nine tenths of it and keeps there; and only after ten minutes without a 429 tries
// for more, 2% a window, up to the configured rate. A 429 within those ten minutes takes a fifth
// off what was learned. Graph's x-ms-throttle-limit-percentage, sent once 80% of the budget is
// spent, teaches the same before any 429: what was spent over that share is the budget.
package budget

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/credwatch/credwatch/internal/azerr"
)

// Resource units per window, by tenant size (Graph's identity and access service limits).
const (
	SmallTenant  = 3500 // fewer than 50 users
	MediumTenant = 5000 // 50 to 500 users
	LargeTenant  = 8000 // more than 500 users
)

// Window is the period Graph's budget refills over.
const Window = 10 * time.Second

// nearlySpent is the x-ms-throttle-limit-percentage from which requests are spaced out: Graph
// reports the share of the budget used, and throttles at 1.
const nearlySpent = 0.8

// Cost is what Graph charges for a request in resource units: 2 for reading applications, 1 for
// other identity reads, one less with $select, one more with $expand, one less for $top under
// 20, never less than 1; a write costs 1 here and is limited by its own quota.
// A $batch costs what its requests cost.
func Cost(r *http.Request) int {
	if isBatch(r) {
		return batchCost(r)
	}
	return costOf(r.Method, r.URL.Path, r.URL.RawQuery)
}

func costOf(method, path, rawQuery string) int {
	if !strings.EqualFold(method, http.MethodGet) {
		return 1
	}
	cost := 1
	if p := strings.ToLower(path); strings.Contains(p, "/applications") && !strings.Contains(p, "/serviceprincipals") {
		cost = 2
	}
	q, _ := url.ParseQuery(rawQuery)
	if q.Has("$select") {
		cost--
	}
	if q.Has("$expand") {
		cost++
	}
	if top, err := strconv.Atoi(q.Get("$top")); err == nil && top < 20 {
		cost--
	}
	return max(cost, 1)
}

// How a bucket learns from a 429 (see the package comment).
const (
	// minRate is the least a throttled bucket falls to, in units per second.
	minRate = 0.1
	// keep is the share of the learned budget a bucket climbs back to, a margin for Graph's
	// own accounting; climb is how much of the learned budget it regains each window.
	keep, climb = 0.9, 0.15
	// probeAfter is how long a bucket keeps to the learned budget before it tries for more, by
	// probeBy each window, up to the configured rate: the other replica may have gone. Slowly:
	// past the real budget, each window's excess is a request Graph refuses.
	probeAfter = 10 * time.Minute
	probeBy    = 1.02
	// minSample is the least spent in a window that measures Graph's budget: below it, a 429
	// says only that others spend it too, and the bucket halves its rate.
	minSample = 10
	// again is what is kept of the learned budget when Graph throttles within probeAfter of the
	// last time: that lesson was too generous.
	again = 0.8
)

// Limiter holds a bucket of resource units for each scope (an application signing in to a
// tenant), as Graph does.
type Limiter struct {
	clock clock.Clock
	rate  float64 // the configured units per second

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	units       float64
	at          time.Time // when units was last brought up to date
	pausedUntil time.Time
	// rate is what the bucket refills at: the configured rate until Graph throttles it.
	rate float64
	// learned is the budget Graph allowed when it last throttled, in units per second;
	// throttledAt is when, and raised when rate last climbed.
	learned             float64
	throttledAt, raised time.Time
	// spentBefore is what was spent in the window that drew the pause's first 429, and refused
	// how many requests Graph refused since, each a unit that was spent and not allowed.
	spentBefore, refused float64
	// before is the rate when the pause began, prior what was learned less than probeAfter
	// before it.
	before, prior float64
	// spent is the units spent in each second of the last window; spentAt the second of its
	// last entry.
	spent   [windowSeconds]float64
	spentAt int64
}

const windowSeconds = int(Window / time.Second)

// New returns a Limiter granting unitsPerWindow resource units per Window to each scope.
func New(c clock.Clock, unitsPerWindow int) *Limiter {
	return &Limiter{clock: c, rate: float64(unitsPerWindow) / Window.Seconds(), buckets: map[string]*bucket{}}
}

// capacity is what the bucket holds at most: one window at its rate.
func (b *bucket) capacity() float64 { return b.rate * Window.Seconds() }

func (l *Limiter) bucketLocked(scope string, now time.Time) *bucket {
	b, ok := l.buckets[scope]
	if !ok {
		b = &bucket{rate: l.rate, at: now, raised: now}
		b.units = b.capacity()
		l.buckets[scope] = b
	}
	b.units = min(b.capacity(), b.units+now.Sub(b.at).Seconds()*b.rate)
	b.at = now
	for b.rate < l.rate && now.Sub(b.raised) >= Window {
		b.raised = b.raised.Add(Window)
		switch {
		case b.rate < keep*b.learned:
			b.rate = min(keep*b.learned, b.rate+climb*b.learned)
		case b.raised.Sub(b.throttledAt) >= probeAfter:
			b.rate = min(l.rate, b.rate*probeBy)
		}
	}
	return b
}

// spend takes taken units from b, and notes in the window's seconds what Graph charges, which may
// be more than a bucket smaller than the request holds.
func (b *bucket) spend(taken, charged float64, now time.Time) {
	b.units -= taken
	sec := now.Unix()
	for s := max(b.spentAt+1, sec-int64(windowSeconds)+1); s <= sec; s++ {
		b.spent[s%int64(windowSeconds)] = 0
	}
	b.spentAt = max(b.spentAt, sec)
	b.spent[sec%int64(windowSeconds)] += charged
}

// spentInWindow is what b spent in the last window, to now.
func (b *bucket) spentInWindow(now time.Time) float64 {
	total := 0.0
	for s := now.Unix() - int64(windowSeconds) + 1; s <= now.Unix(); s++ {
		if s <= b.spentAt && s > b.spentAt-int64(windowSeconds) {
			total += b.spent[s%int64(windowSeconds)]
		}
	}
	return total
}

// throttled learns from a 429 that Graph allows less than was spent in the window before it:
// that, less what Graph refused, is the budget. first is the pause's first 429; each later one is
// a unit spent and not allowed, and the lesson is drawn again. Below minSample allowed there is
// too little to measure (others spend the budget too): the bucket halves its rate.
func (b *bucket) throttled(now time.Time, first bool) {
	if first {
		b.spentBefore, b.refused, b.before, b.prior = b.spentInWindow(now), 0, b.rate, 0
		if now.Sub(b.throttledAt) < probeAfter && b.learned > 0 {
			b.prior = b.learned
		}
	}
	b.refused++
	allowed := b.before / 2
	if allowedSpent := b.spentBefore - b.refused; allowedSpent >= minSample {
		// A window holds the bucket's rate and a burst of as much again, so the rate itself
		// was already too much.
		allowed = min(b.before, allowedSpent/Window.Seconds())
	}
	if b.prior > 0 {
		// Throttled again soon: the last lesson was too generous.
		allowed = again * min(allowed, b.prior)
	}
	b.learned = allowed
	b.rate = min(b.before, max(minRate, allowed/2))
	b.throttledAt, b.raised = now, now
	b.units = min(b.units, 0)
}

// Wait blocks until scope may spend units, or ctx ends. A cost above the whole budget spends the
// whole budget: waiting for more than the bucket holds would be waiting forever.
func (l *Limiter) Wait(ctx context.Context, scope string, units int) error {
	for {
		l.mu.Lock()
		now := l.clock.Now()
		b := l.bucketLocked(scope, now)
		need := min(float64(units), b.capacity())
		var wait time.Duration
		switch {
		case now.Before(b.pausedUntil):
			wait = b.pausedUntil.Sub(now)
		case b.units >= need:
			b.spend(need, float64(units), now)
			l.mu.Unlock()
			return nil
		default:
			wait = time.Duration((need - b.units) / b.rate * float64(time.Second))
		}
		l.mu.Unlock()
		if deadline, ok := ctx.Deadline(); ok && now.Add(wait).After(deadline) {
			// Waiting would end as a timeout, read as Graph not answering; this is throttling,
			// and the caller should come back when the budget allows.
			return &azerr.Error{Kind: azerr.KindThrottled, RetryAfter: wait,
				//nolint:staticcheck // ST1005: it starts with a name, Graph, as people read it in the Ready condition
				Err: fmt.Errorf("Graph's throttling budget allows the next request in %v, after this one's deadline", wait.Round(time.Second))}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.clock.After(wait):
		}
	}
}

// Observe reads what Graph said of the budget in a response: a 429 teaches the scope's bucket the
// budget Graph allows (see throttled), and its Retry-After, or a 503's, pauses the scope that
// long; a budget reported nearly spent empties the bucket, so requests go at the refill rate.
func (l *Limiter) Observe(scope string, status int, h http.Header) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	b := l.bucketLocked(scope, now)
	if status == http.StatusTooManyRequests {
		// The first 429 of a pause measures; the others, from the same batch or the same
		// burst, are each a request Graph did not allow.
		b.throttled(now, !now.Before(b.pausedUntil))
	}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		pause := time.Duration(0)
		if s, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil && s > 0 {
			pause = time.Duration(s) * time.Second
		} else if status == http.StatusTooManyRequests {
			// Graph always says how long; a second keeps one burst's 429s to one lesson.
			pause = time.Second
		}
		if until := now.Add(pause); pause > 0 && until.After(b.pausedUntil) {
			b.pausedUntil = until
			b.units = 0
		}
	}
	if used, err := strconv.ParseFloat(strings.TrimSpace(h.Get("x-ms-throttle-limit-percentage")), 64); err == nil && used >= nearlySpent {
		b.nearlySpent(now, used)
	}
}

// nearlySpent learns from Graph saying that a share used of the budget is spent: when what was
// spent in the window says the budget is smaller than the bucket's rate, the bucket keeps to
// most of it from now, before any 429. Either way it spends no more until it refills.
func (b *bucket) nearlySpent(now time.Time, used float64) {
	b.units = min(b.units, 0)
	spent := b.spentInWindow(now)
	if spent < minSample {
		return
	}
	if budget := spent / min(used, 1) / Window.Seconds(); budget < b.rate {
		b.learned = budget
		b.rate = max(minRate, keep*budget)
		b.throttledAt, b.raised = now, now
	}
}

type scopeKey struct{}

// WithScope marks requests made with ctx as spending scope's budget.
func WithScope(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope)
}

// RoundTripper charges every request to the scope in its context (requests without one share a
// default scope) before sending it through next, and learns from every answer.
func (l *Limiter) RoundTripper(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		scope, _ := r.Context().Value(scopeKey{}).(string)
		if isBatch(r) {
			var err error
			if r, err = replayable(r); err != nil {
				return nil, err
			}
		}
		if err := l.Wait(r.Context(), scope, Cost(r)); err != nil {
			return nil, err
		}
		resp, err := next.RoundTrip(r)
		if err != nil {
			return resp, err
		}
		l.Observe(scope, resp.StatusCode, resp.Header)
		if isBatch(r) && resp.StatusCode == http.StatusOK {
			// Each request in a batch is throttled on its own, behind the batch's 200.
			for _, h := range subResponseHeaders(resp) {
				l.Observe(scope, h.status, h.header)
			}
		}
		return resp, nil
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
