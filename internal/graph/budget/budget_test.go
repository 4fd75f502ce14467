package budget

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"golang.org/x/time/rate"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/test/clockstep"
)

func TestCost(t *testing.T) {
	tests := []struct {
		method, url string
		want        int
	}{
		{"GET", "https://graph.microsoft.com/v1.0/applications(appId='x')", 2},
		{"GET", "https://graph.microsoft.com/v1.0/applications(appId='x')?$select=id,passwordCredentials", 1},
		{"GET", "https://graph.microsoft.com/v1.0/servicePrincipals(appId='x')?$select=id", 1},
		{"GET", "https://graph.microsoft.com/v1.0/servicePrincipals(appId='x')", 1},
		{"GET", "https://graph.microsoft.com/v1.0/applications?$top=999&$select=id", 1},
		{"GET", "https://graph.microsoft.com/v1.0/applications?$top=10", 1},
		{"GET", "https://graph.microsoft.com/v1.0/applications/x?$expand=owners", 3},
		{"POST", "https://graph.microsoft.com/v1.0/applications/x/addPassword", 1},
	}
	for _, tc := range tests {
		r, _ := http.NewRequest(tc.method, tc.url, nil)
		if got := Cost(r); got != tc.want {
			t.Errorf("Cost(%s %s) = %d, want %d", tc.method, tc.url, got, tc.want)
		}
	}
}

// waitTook runs Wait and reports how much fake time it needed, stepping the clock as it sleeps.
func waitTook(t *testing.T, c *clocktesting.FakeClock, l *Limiter, scope string, units int) time.Duration {
	t.Helper()
	start := c.Now()
	var err error
	clockstep.Run(c, 100*time.Millisecond, func() { err = l.Wait(context.Background(), scope, units) })
	if err != nil {
		t.Fatal(err)
	}
	return c.Now().Sub(start)
}

func TestBucketSpendsAndRefillsPerScope(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	l := New(c, SmallTenant) // 350 units a second
	if d := waitTook(t, c, l, "app-a", SmallTenant); d != 0 {
		t.Errorf("a full bucket waited %v", d)
	}
	// Empty now: 35 more units take a tenth of a second of refill.
	if d := waitTook(t, c, l, "app-a", 35); d < 100*time.Millisecond || d > 200*time.Millisecond {
		t.Errorf("35 units on an empty bucket took %v, want about 100ms", d)
	}
	// Another application, or tenant, has its own bucket.
	if d := waitTook(t, c, l, "app-b", 100); d != 0 {
		t.Errorf("another scope waited %v", d)
	}
}

func TestRetryAfterPausesTheScope(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	l := New(c, LargeTenant)
	l.Observe("app-a", http.StatusTooManyRequests, http.Header{"Retry-After": {"7"}})
	if d := waitTook(t, c, l, "app-a", 1); d < 7*time.Second {
		t.Errorf("after Retry-After: 7 the next request went after %v", d)
	}
	if d := waitTook(t, c, l, "app-b", 1); d != 0 {
		t.Errorf("another scope was paused %v", d)
	}
}

func TestNearlySpentBudgetSlowsDown(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	l := New(c, MediumTenant) // 500 units a second
	l.Observe("app-a", http.StatusOK, http.Header{"X-Ms-Throttle-Limit-Percentage": {"0.85"}})
	if d := waitTook(t, c, l, "app-a", 50); d < 100*time.Millisecond {
		t.Errorf("with 85%% of the budget used, 50 units went after %v, want the refill rate's 100ms", d)
	}
	l.Observe("app-a", http.StatusOK, http.Header{"X-Ms-Throttle-Limit-Percentage": {"0.3"}})
	c.Step(Window)
	if d := waitTook(t, c, l, "app-a", 50); d != 0 {
		t.Errorf("with the budget refilled, 50 units waited %v", d)
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	l := New(c, SmallTenant)
	l.Observe("app-a", http.StatusTooManyRequests, http.Header{"Retry-After": {"60"}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Wait(ctx, "app-a", 1); err == nil {
		t.Error("Wait went on past its context")
	}
}

// TestWaitPastTheDeadlineIsThrottling: a wait the caller cannot afford ends at once as throttled,
// with when to come back, instead of timing out as if Graph did not answer.
func TestWaitPastTheDeadlineIsThrottling(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Now())
	l := New(c, SmallTenant)
	l.Observe("app-a", http.StatusTooManyRequests, http.Header{"Retry-After": {"60"}})
	ctx, cancel := context.WithDeadline(context.Background(), c.Now().Add(30*time.Second))
	defer cancel()
	err := l.Wait(ctx, "app-a", 1)
	if azerr.KindOf(err) != azerr.KindThrottled || azerr.RetryAfterOf(err) < 59*time.Second {
		t.Errorf("got %v, want throttled, retry after about 60 s", err)
	}
}

// TestAThrottledBucketLearnsTheBudget: after a 429 the bucket refills at half of what Graph
// allowed in the window that drew it (what was spent, less what Graph refused), so the pause is
// not followed by another burst; it climbs back to most of that budget, keeps to it, and only
// after a while tries for more.
func TestAThrottledBucketLearnsTheBudget(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	l := New(c, SmallTenant)
	rateOf := func(scope string) float64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.bucketLocked(scope, c.Now()).rate
	}
	waitTook(t, c, l, "app-a", 60)
	// Graph refuses 20 of the 60: it allows 40 in ten seconds.
	for range 20 {
		l.Observe("app-a", http.StatusTooManyRequests, http.Header{"Retry-After": {"2"}})
	}
	// 2 units a second now, and at most 20 at once, the pause included.
	if d := waitTook(t, c, l, "app-a", 20); d < 10*time.Second || d > 11*time.Second {
		t.Errorf("20 units after the 429s took %v, want 10 s at 2 units a second", d)
	}
	c.Step(3 * Window)
	if r := rateOf("app-a"); r != keep*4 {
		t.Errorf("three windows on, %v units a second, want %v", r, keep*4)
	}
	c.Step(probeAfter - 5*Window)
	if r := rateOf("app-a"); r != keep*4 {
		t.Errorf("before probing, %v units a second, want still %v", r, keep*4)
	}
	c.Step(time.Hour)
	if r := rateOf("app-a"); r != l.rate {
		t.Errorf("an hour on, %v units a second, want the configured %v back", r, l.rate)
	}
	// Refused with nothing spent: others spend the budget; half the rate is all it learns.
	l.Observe("app-b", http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}})
	if r := rateOf("app-b"); r != l.rate/4 {
		t.Errorf("after a 429 with nothing spent, %v units a second, want %v", r, l.rate/4)
	}
}

// TestThrottlingIsLearnedOnce: against a Graph that allows 40 units in 10 s (x/time/rate's bucket,
// as the Graph fake's), batches of 20 one-unit requests from a limiter configured for a small
// tenant, for a quarter of an hour. Learning from 429s alone, one wave of them and a handful
// more; told by x-ms-throttle-limit-percentage, as Graph does past 80%, none. Either way most of
// what Graph allows gets through.
func TestThrottlingIsLearnedOnce(t *testing.T) {
	for _, tc := range []struct {
		name                string
		percentage          bool
		firstWave, afterMax int
	}{
		{"from 429s", false, 20, 5},
		{"from x-ms-throttle-limit-percentage", true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
			l := New(c, SmallTenant)
			graph := rate.NewLimiter(4, 40)
			start := c.Now()
			first, after, granted := -1, 0, 0
			for c.Now().Sub(start) < 15*time.Minute {
				// Steps of half a second, as the batches of a sweep come.
				clockstep.Run(c, 500*time.Millisecond, func() {
					if err := l.Wait(context.Background(), "app-a", 20); err != nil {
						t.Error(err)
					}
				})
				wave := 0
				for range 20 {
					now := c.Now()
					res := graph.ReserveN(now, 1)
					if delay := res.DelayFrom(now); delay > 0 {
						res.CancelAt(now)
						wave++
						l.Observe("app-a", http.StatusTooManyRequests, http.Header{"Retry-After": {strconv.Itoa(int(math.Ceil(max(delay, time.Second).Seconds())))}})
						continue
					}
					granted++
					h := http.Header{}
					if used := 1 - graph.TokensAt(now)/40; tc.percentage && used >= 0.8 {
						h.Set("x-ms-throttle-limit-percentage", strconv.FormatFloat(used, 'f', 2, 64))
					}
					l.Observe("app-a", http.StatusOK, h)
				}
				switch {
				case wave > 0 && first < 0:
					first = wave
				case wave > 0:
					after += wave
				}
			}
			if first > tc.firstWave || after > tc.afterMax {
				t.Errorf("a first wave of %d refusals and %d after it, want at most %d and %d", max(first, 0), after, tc.firstWave, tc.afterMax)
			}
			if allowed := 40 + 4*15*60; granted < allowed*3/4 {
				t.Errorf("%d units granted in 15 minutes, want at least three quarters of the %d Graph allows", granted, allowed)
			}
			t.Logf("a first wave of %d refusals, %d after it; %d units granted", max(first, 0), after, granted)
		})
	}
}

// TestAWholeBatchRefusedDoesNotStarveTheBucket: Graph refusing all twenty requests of the batch
// that drew its first 429 (others spent the budget) halves the rate; it does not measure a budget
// of nothing and crawl at the floor for an hour.
func TestAWholeBatchRefusedDoesNotStarveTheBucket(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	l := New(c, SmallTenant)
	waitTook(t, c, l, "app-a", 20)
	for range 20 {
		l.Observe("app-a", http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}})
	}
	l.mu.Lock()
	b := l.bucketLocked("app-a", c.Now())
	rate, learned := b.rate, b.learned
	l.mu.Unlock()
	if learned < l.rate/2 || rate < l.rate/4 {
		t.Errorf("learned %v units a second and refills at %v, want half the configured %v learned", learned, rate, l.rate)
	}
}

// TestARequestLargerThanTheBucketIsCountedWhole: what a throttled bucket learns from counts what
// Graph charged, not the little a small bucket held.
func TestARequestLargerThanTheBucketIsCountedWhole(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	l := New(c, 20) // 2 units a second, 20 a window
	waitTook(t, c, l, "app-a", 60)
	l.mu.Lock()
	spent := l.buckets["app-a"].spentInWindow(c.Now())
	l.mu.Unlock()
	if spent != 60 {
		t.Errorf("%v units noted, want the 60 charged", spent)
	}
}
