package policy

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCheckDue(t *testing.T) {
	later := metav1.NewTime(now.Add(time.Hour))
	earlier := metav1.NewTime(now.Add(-time.Second))
	exactly := metav1.NewTime(now)
	tests := map[string]struct {
		gen, observed int64
		next          *metav1.Time
		throttled     bool
		requested     bool
		want          bool
	}{
		"a person asked for a check":             {gen: 1, observed: 1, next: &later, requested: true, want: true},
		"asked while throttled":                  {gen: 1, observed: 1, next: &later, requested: true, throttled: true, want: false},
		"never checked":                          {gen: 1, observed: 0, next: nil, want: true},
		"spec changed before schedule":           {gen: 2, observed: 1, next: &later, want: true},
		"spec changed while throttled":           {gen: 2, observed: 1, next: &later, throttled: true, want: false},
		"throttling over, spec changed":          {gen: 2, observed: 1, next: &earlier, throttled: true, want: true},
		"scheduled in the future":                {gen: 1, observed: 1, next: &later, want: false},
		"schedule passed":                        {gen: 1, observed: 1, next: &earlier, want: true},
		"schedule is now":                        {gen: 1, observed: 1, next: &exactly, want: true},
		"no schedule recorded":                   {gen: 1, observed: 1, next: nil, want: true},
		"no schedule recorded, throttled before": {gen: 2, observed: 1, next: nil, throttled: true, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := CheckDue(tc.gen, tc.observed, tc.next, tc.throttled, tc.requested, now); got != tc.want {
				t.Errorf("CheckDue = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRetryAfterFailure(t *testing.T) {
	tests := map[string]struct {
		failures   int32
		retryAfter time.Duration
		interval   time.Duration
		want       time.Duration
	}{
		"first failure":                 {failures: 1, interval: 6 * time.Hour, want: 30 * time.Second},
		"second doubles":                {failures: 2, interval: 6 * time.Hour, want: time.Minute},
		"fifth":                         {failures: 5, interval: 6 * time.Hour, want: 8 * time.Minute},
		"capped at 15m":                 {failures: 6, interval: 6 * time.Hour, want: 15 * time.Minute},
		"many failures stay capped":     {failures: 1000, interval: 6 * time.Hour, want: 15 * time.Minute},
		"never beyond the interval":     {failures: 6, interval: 5 * time.Minute, want: 5 * time.Minute},
		"Retry-After is a floor":        {failures: 1, retryAfter: 2 * time.Minute, interval: 6 * time.Hour, want: 2 * time.Minute},
		"shorter Retry-After is unused": {failures: 3, retryAfter: 10 * time.Second, interval: 6 * time.Hour, want: 2 * time.Minute},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := RetryAfterFailure(tc.failures, tc.retryAfter, tc.interval); got != tc.want {
				t.Errorf("RetryAfterFailure = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRequeueAfter(t *testing.T) {
	tests := map[string]struct {
		next    time.Time
		moments []time.Time
		want    time.Duration
	}{
		"check first":                    {next: now.Add(time.Hour), moments: []time.Time{now.Add(2 * time.Hour)}, want: time.Hour},
		"transition first":               {next: now.Add(6 * time.Hour), moments: []time.Time{now.Add(time.Minute)}, want: time.Minute},
		"earliest of several":            {next: now.Add(6 * time.Hour), moments: []time.Time{now.Add(time.Hour), {}, now.Add(time.Minute)}, want: time.Minute},
		"no transition":                  {next: now.Add(6 * time.Hour), moments: []time.Time{{}}, want: 6 * time.Hour},
		"overdue check: soon, not never": {next: now.Add(-time.Minute), want: time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := RequeueAfter(now, tc.next, tc.moments...); got != tc.want {
				t.Errorf("RequeueAfter = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestJitter(t *testing.T) {
	if got := Jitter(time.Hour, 0.1, func() float64 { return 0 }); got != time.Hour {
		t.Errorf("Jitter with 0 = %v, want 1h", got)
	}
	if got := Jitter(time.Hour, 0.1, func() float64 { return 0.5 }); got != 63*time.Minute {
		t.Errorf("Jitter with 0.5 = %v, want 1h3m", got)
	}
}
