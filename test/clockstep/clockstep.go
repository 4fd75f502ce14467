// Package clockstep lets tests run code that sleeps on a fake clock: it advances the clock only
// while something waits on it, so the code sees time pass exactly as far as it needs.
package clockstep

import (
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// Run runs fn and, until fn returns, advances clk by step whenever something waits on it.
func Run(clk *clocktesting.FakeClock, step time.Duration, fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	for {
		select {
		case <-done:
			return
		case <-time.After(time.Millisecond):
			if clk.HasWaiters() {
				clk.Step(step)
			}
		}
	}
}
