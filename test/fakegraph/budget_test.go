package fakegraph

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestBudgetChargesEachScopeAsGraphDoes: ten units per window is five plain application reads or
// ten with $select; the eleventh unit is refused until the bucket refills, and another tenant's
// bucket is untouched.
func TestBudgetChargesEachScopeAsGraphDoes(t *testing.T) {
	s := newFixture(t)
	c := clocktesting.NewFakeClock(start)
	s.SetBudget(10, c) // one unit a second
	tokA := mustToken(t, s, tenantA, reader, readerKey)
	tokB := mustToken(t, s, tenantB, reader, readerKey)
	app := "/v1.0/applications(appId='" + appID + "')"

	for i := range 4 {
		r := do(t, s, "GET", app, tokA, nil)
		if r.status != http.StatusOK || r.header.Get("x-ms-resource-unit") != "2" {
			t.Fatalf("read %d: %d, %s units", i, r.status, r.header.Get("x-ms-resource-unit"))
		}
		used, _ := strconv.ParseFloat(r.header.Get("x-ms-throttle-limit-percentage"), 64)
		if want := float64(2*(i+1)) / 10; (want >= 0.8) != (used >= 0.8) || (used != 0 && used != want) {
			t.Errorf("read %d: x-ms-throttle-limit-percentage %q, want %v only from 0.8", i, r.header.Get("x-ms-throttle-limit-percentage"), want)
		}
	}
	if r := do(t, s, "GET", app+"?$select=passwordCredentials", tokA, nil); r.status != http.StatusOK || r.header.Get("x-ms-resource-unit") != "1" {
		t.Fatalf("a $select read with 2 units left: %d, %s units", r.status, r.header.Get("x-ms-resource-unit"))
	}
	r := do(t, s, "GET", app, tokA, nil)
	checkGraphError(t, r, http.StatusTooManyRequests, "TooManyRequests", "")
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q with 1 unit left of 2, want 1", got)
	}
	if r := do(t, s, "GET", app, tokB, nil); r.status != http.StatusOK {
		t.Errorf("the same app in another tenant: %d, want its own budget", r.status)
	}
	c.Step(time.Second)
	if r := do(t, s, "GET", app, tokA, nil); r.status != http.StatusOK {
		t.Errorf("after the Retry-After: %d", r.status)
	}
	if got := s.Throttled(); got != 1 {
		t.Errorf("Throttled() = %d, want 1", got)
	}
	if got := s.Spent(); got != 4*2+1+2+2 {
		t.Errorf("Spent() = %d, want the 13 units of the reads it answered", got)
	}

	s.SetBudget(0, nil)
	for range 20 {
		if r := do(t, s, "GET", app, tokA, nil); r.status != http.StatusOK {
			t.Fatalf("with the budget off: %d", r.status)
		}
	}
}

func TestLatencyDelaysAnswers(t *testing.T) {
	s := newFixture(t)
	tok := mustToken(t, s, tenantA, reader, readerKey)
	s.SetLatency(50 * time.Millisecond)
	began := time.Now()
	do(t, s, "GET", "/v1.0/servicePrincipals(appId='"+appID+"')", tok, nil)
	if took := time.Since(began); took < 50*time.Millisecond {
		t.Errorf("answered in %v with 50ms latency", took)
	}
}
