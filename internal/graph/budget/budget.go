// Package budget spends Microsoft Graph's throttling budget the way Graph counts it, so that
// credwatch is never the reason a tenant is throttled: a token bucket of resource units per
// application and tenant (Graph's scope), refilled at the rate of the tenant's size, each request
// charged what Graph charges, paused by a 429's Retry-After and slowed when Graph reports the
// budget nearly spent.
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

// Limiter holds a bucket of resource units for each scope (an application signing in to a
// tenant), as Graph does.
type Limiter struct {
	clock clock.Clock
	rate  float64 // units per second
	size  float64 // the bucket's capacity: one window's budget

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	units       float64
	at          time.Time // when units was last brought up to date
	pausedUntil time.Time
}

// New returns a Limiter granting unitsPerWindow resource units per Window to each scope.
func New(c clock.Clock, unitsPerWindow int) *Limiter {
	return &Limiter{clock: c, rate: float64(unitsPerWindow) / Window.Seconds(), size: float64(unitsPerWindow), buckets: map[string]*bucket{}}
}

func (l *Limiter) bucketLocked(scope string, now time.Time) *bucket {
	b, ok := l.buckets[scope]
	if !ok {
		b = &bucket{units: l.size, at: now}
		l.buckets[scope] = b
	}
	b.units = min(l.size, b.units+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	return b
}

// Wait blocks until scope may spend units, or ctx ends. A cost above the whole budget spends the
// whole budget: waiting for more than the bucket holds would be waiting forever.
func (l *Limiter) Wait(ctx context.Context, scope string, units int) error {
	need := min(float64(units), l.size)
	for {
		l.mu.Lock()
		now := l.clock.Now()
		b := l.bucketLocked(scope, now)
		var wait time.Duration
		switch {
		case now.Before(b.pausedUntil):
			wait = b.pausedUntil.Sub(now)
		case b.units >= need:
			b.units -= need
			l.mu.Unlock()
			return nil
		default:
			wait = time.Duration((need - b.units) / l.rate * float64(time.Second))
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

// Observe reads what Graph said of the budget in a response: a Retry-After pauses the scope that
// long; a budget reported nearly spent empties the bucket, so requests go at the refill rate.
func (l *Limiter) Observe(scope string, status int, h http.Header) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	b := l.bucketLocked(scope, now)
	if s, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil && s > 0 &&
		(status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) {
		if until := now.Add(time.Duration(s) * time.Second); until.After(b.pausedUntil) {
			b.pausedUntil = until
		}
		b.units = 0
	}
	if used, err := strconv.ParseFloat(strings.TrimSpace(h.Get("x-ms-throttle-limit-percentage")), 64); err == nil && used >= nearlySpent {
		b.units = min(b.units, 0)
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
