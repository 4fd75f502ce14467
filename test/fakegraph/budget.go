package fakegraph

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// budgetWindow is the period Graph's identity budget refills over.
const budgetWindow = 10 * time.Second

// budget is Graph's identity and access throttling: a token bucket of resource units for each
// application signing in to a tenant. x/time/rate is that bucket; the fake only adds the scope,
// the cost of each request and Graph's headers, so a client's own limiter is checked against an
// implementation that shares no code with it.
type budget struct {
	units    int
	clock    clock.PassiveClock
	byScope  map[string]*rate.Limiter
	rejected int
	spent    int
}

// SetBudget makes Graph enforce its identity budget: unitsPerWindow resource units per 10 s for
// each application and tenant (3500, 5000 or 8000 in Azure by tenant size), read requests charged
// as Graph charges them (2 for applications, 1 for other reads, 1 less with $select). A request
// over budget gets 429 with the Retry-After until the bucket holds its cost; one that leaves the
// bucket over 80% spent carries x-ms-throttle-limit-percentage. Writes have their own quota in
// Graph and are not charged. Time comes from c, so tests can step it; 0 turns the budget off.
func (s *Server) SetBudget(unitsPerWindow int, c clock.PassiveClock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.budget = nil
	if unitsPerWindow > 0 {
		s.budget = &budget{units: unitsPerWindow, clock: c, byScope: map[string]*rate.Limiter{}}
	}
}

// SetLatency delays every Graph answer by d, as a distant region does, so throughput measured
// against the fake includes time spent waiting on the network.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// spend charges units to the caller's scope, or answers 429 and returns false.
func (s *Server) spend(w http.ResponseWriter, c graphCall, tok issuedToken, units int) bool {
	s.mu.Lock()
	b := s.budget
	if b == nil {
		s.mu.Unlock()
		return true
	}
	scope := strings.ToLower(tok.clientID + "/" + tok.tenantID)
	lim, ok := b.byScope[scope]
	if !ok {
		lim = rate.NewLimiter(rate.Limit(float64(b.units)/budgetWindow.Seconds()), b.units)
		b.byScope[scope] = lim
	}
	now := b.clock.Now()
	res := lim.ReserveN(now, units)
	delay := res.DelayFrom(now)
	if !res.OK() || delay > 0 {
		res.CancelAt(now)
		b.rejected++
		s.mu.Unlock()
		s.tooManyRequests(w, c, tok, true, max(delay, time.Second))
		return false
	}
	used := 1 - lim.TokensAt(now)/float64(b.units)
	b.spent += units
	s.mu.Unlock()
	if used >= 0.8 {
		w.Header().Set("x-ms-throttle-limit-percentage", strconv.FormatFloat(used, 'f', 2, 64))
	}
	return true
}

// tooManyRequests answers 429 as Graph's gateway does, naming the throttled scope when the
// caller's token is known.
func (s *Server) tooManyRequests(w http.ResponseWriter, c graphCall, tok issuedToken, known bool, retryAfter time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
	if known {
		w.Header().Set("x-ms-throttle-scope", "Tenant_Application/ReadWrite/"+tok.clientID+"/"+tok.tenantID)
	}
	w.Header().Set("x-ms-throttle-information", "ResourceUnitLimitExceeded")
	c.graphError(w, http.StatusTooManyRequests, "TooManyRequests", "Too many requests. Please retry again later.")
}

// Throttled is how many requests the budget has refused since SetBudget.
func (s *Server) Throttled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.budget == nil {
		return 0
	}
	return s.budget.rejected
}

// Spent is how many resource units the budget has charged since SetBudget.
func (s *Server) Spent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.budget == nil {
		return 0
	}
	return s.budget.spent
}
