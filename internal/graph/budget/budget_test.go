package budget

import (
	"context"
	"net/http"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/clockstep"
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
