package policy

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

func TestCheckDue(t *testing.T) {
	later := metav1.NewTime(now.Add(time.Hour))
	earlier := metav1.NewTime(now.Add(-time.Second))
	exactly := metav1.NewTime(now)
	justNow := metav1.NewTime(now.Add(-10 * time.Second))
	aMinuteAgo := metav1.NewTime(now.Add(-EarlyCheckGap))
	tests := map[string]struct {
		state CheckState
		want  bool
	}{
		"a person asked for a check":                     {state: CheckState{Generation: 1, ObservedGeneration: 1, NextCheck: &later, Requested: true}, want: true},
		"asked while throttled":                          {state: CheckState{Generation: 1, ObservedGeneration: 1, NextCheck: &later, Requested: true, Throttled: true}, want: false},
		"never checked":                                  {state: CheckState{Generation: 1, ObservedGeneration: 0}, want: true},
		"spec changed before schedule":                   {state: CheckState{Generation: 2, ObservedGeneration: 1, NextCheck: &later}, want: true},
		"spec changed while throttled":                   {state: CheckState{Generation: 2, ObservedGeneration: 1, NextCheck: &later, Throttled: true}, want: false},
		"throttling over, spec changed":                  {state: CheckState{Generation: 2, ObservedGeneration: 1, NextCheck: &earlier, Throttled: true}, want: true},
		"scheduled in the future":                        {state: CheckState{Generation: 1, ObservedGeneration: 1, NextCheck: &later}, want: false},
		"schedule passed":                                {state: CheckState{Generation: 1, ObservedGeneration: 1, NextCheck: &earlier}, want: true},
		"schedule is now":                                {state: CheckState{Generation: 1, ObservedGeneration: 1, NextCheck: &exactly}, want: true},
		"no schedule recorded":                           {state: CheckState{Generation: 1, ObservedGeneration: 1}, want: true},
		"no schedule recorded, throttled before":         {state: CheckState{Generation: 2, ObservedGeneration: 1, Throttled: true}, want: true},
		"a scan this process has not run":                {state: CheckState{Generation: 1, ObservedGeneration: 1, NextCheck: &later, TenantScan: true}, want: true},
		"a scan this process holds":                      {state: CheckState{Generation: 1, ObservedGeneration: 1, NextCheck: &later, TenantScan: true, Scanned: true}, want: false},
		"a failed scan waits out its backoff":            {state: CheckState{Generation: 1, ObservedGeneration: 1, NextCheck: &later, TenantScan: true, Failures: 2}, want: false},
		"asked within a minute of the last check":        {state: CheckState{Generation: 1, ObservedGeneration: 1, NextCheck: &later, LastCheck: &justNow, Requested: true}, want: false},
		"spec changed within a minute of the last check": {state: CheckState{Generation: 2, ObservedGeneration: 1, NextCheck: &later, LastCheck: &justNow}, want: false},
		"a lost scan within a minute of the last check":  {state: CheckState{Generation: 1, ObservedGeneration: 1, NextCheck: &later, LastCheck: &justNow, TenantScan: true}, want: false},
		"asked a minute after the last check":            {state: CheckState{Generation: 1, ObservedGeneration: 1, NextCheck: &later, LastCheck: &aMinuteAgo, Requested: true}, want: true},
		"scheduled within a minute of the last check":    {state: CheckState{Generation: 1, ObservedGeneration: 1, NextCheck: &earlier, LastCheck: &justNow}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := CheckDue(tc.state, now); got != tc.want {
				t.Errorf("CheckDue(%+v) = %v, want %v", tc.state, got, tc.want)
			}
		})
	}
}

func TestCheckStateOf(t *testing.T) {
	next := metav1.NewTime(now)
	w := &v1alpha1.CredentialWatch{
		ObjectMeta: metav1.ObjectMeta{Generation: 3, Annotations: map[string]string{v1alpha1.CheckAnnotation: "2026-12-03T10:00:00Z"}},
		Spec:       v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{}}},
		Status: v1alpha1.CredentialWatchStatus{ObservedGeneration: 2, NextCheckTime: &next, ConsecutiveFailures: 4, CheckRequest: "earlier",
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonThrottled}}},
	}
	want := CheckState{Generation: 3, ObservedGeneration: 2, NextCheck: &next, Throttled: true, Requested: true, TenantScan: true, Scanned: true, Failures: 4}
	if got := CheckStateOf(w, true); got != want {
		t.Errorf("CheckStateOf = %+v, want %+v", got, want)
	}
	w.Status.CheckRequest = w.Annotations[v1alpha1.CheckAnnotation]
	w.Status.Conditions[0].Reason = v1alpha1.ReasonGraphUnreachable
	if got := CheckStateOf(w, false); got.Requested || got.Throttled || got.Scanned {
		t.Errorf("CheckStateOf = %+v: an answered request, another failure and no scan held read as requested, throttled or scanned", got)
	}
}

func TestDoubling(t *testing.T) {
	tests := map[string]struct {
		failures int32
		want     time.Duration
	}{
		"no failure yet waits the base":  {failures: 0, want: time.Second},
		"first failure":                  {failures: 1, want: time.Second},
		"third doubles twice":            {failures: 3, want: 4 * time.Second},
		"at the limit":                   {failures: 4, want: 8 * time.Second},
		"past the limit stays there":     {failures: 5, want: 10 * time.Second},
		"a huge count does not overflow": {failures: 1 << 30, want: 10 * time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Doubling(time.Second, 10*time.Second, tc.failures); got != tc.want {
				t.Errorf("Doubling(1s, 10s, %d) = %v, want %v", tc.failures, got, tc.want)
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

func TestEarliest(t *testing.T) {
	tests := map[string]struct {
		moments []time.Time
		want    time.Time
	}{
		"none":                    {want: time.Time{}},
		"all never":               {moments: []time.Time{{}, {}}, want: time.Time{}},
		"never is not earliest":   {moments: []time.Time{{}, now.Add(time.Hour)}, want: now.Add(time.Hour)},
		"the earliest of several": {moments: []time.Time{now.Add(time.Hour), now.Add(-time.Minute), now}, want: now.Add(-time.Minute)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Earliest(tc.moments...); !got.Equal(tc.want) {
				t.Errorf("Earliest = %v, want %v", got, tc.want)
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
		"nothing scheduled: not back":    {moments: []time.Time{{}}, want: 0},
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

func TestDeliveryBackoff(t *testing.T) {
	for _, tc := range []struct {
		failures   int32
		retryAfter time.Duration
		want       time.Duration
	}{
		{1, 0, time.Minute}, {2, 0, 2 * time.Minute}, {7, 0, time.Hour}, {100, 0, time.Hour}, {1, 5 * time.Minute, 5 * time.Minute},
	} {
		if got := DeliveryBackoff(tc.failures, tc.retryAfter); got != tc.want {
			t.Errorf("DeliveryBackoff(%d, %v) = %v, want %v", tc.failures, tc.retryAfter, got, tc.want)
		}
	}
}

func TestEarlyCheck(t *testing.T) {
	later := metav1.NewTime(now.Add(time.Hour))
	earlier := metav1.NewTime(now.Add(-time.Second))
	for name, tc := range map[string]struct {
		state CheckState
		want  bool
	}{
		"scheduled":                   {state: CheckState{NextCheck: &earlier}},
		"before the schedule":         {state: CheckState{NextCheck: &later, Requested: true}, want: true},
		"a watch's first check":       {state: CheckState{}},
		"a tenant scan's first check": {state: CheckState{TenantScan: true}, want: true},
	} {
		if got := EarlyCheck(tc.state, now); got != tc.want {
			t.Errorf("%s: EarlyCheck = %v, want %v", name, got, tc.want)
		}
	}
}
