package alerting

import (
	"fmt"
	"sort"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// DefaultRemindBefore is the reminder schedule of a watch that sets none.
var DefaultRemindBefore = []time.Duration{30 * day, 14 * day, 7 * day, 3 * day, day}

// DefaultCheckFailureAfter is how long checks may fail before the channels are told.
const DefaultCheckFailureAfter = time.Hour

const day = 24 * time.Hour

// Step is one point of a credential's alert schedule: a reminder some time before its end, or
// a day after it. Steps are ordered by Due, which is all the ledger needs to compare.
type Step struct {
	// Name is how status and messages name the step: "7d" or "expired+3d".
	Name    string
	Due     time.Time
	Expired bool
}

// CurrentStep is the latest step of a credential ending at end that has fallen due by now; ok
// is false while none has. Reminders skipped while the operator was down are not sent late:
// only the latest counts, because it is the one with the news.
func CurrentStep(end, now time.Time, remindBefore []time.Duration) (step Step, ok bool) {
	if !now.Before(end) {
		n := now.Sub(end) / day
		return Step{Name: fmt.Sprintf("expired+%dd", n), Due: end.Add(n * day), Expired: true}, true
	}
	for _, d := range remindBefore {
		due := end.Add(-d)
		if !due.After(now) && (!ok || due.After(step.Due)) {
			step, ok = Step{Name: stepName(d), Due: due}, true
		}
	}
	return step, ok
}

// stepName names a reminder by its lead time in the largest whole unit: 30d, 36h, 90m.
func stepName(d time.Duration) string {
	switch {
	case d%day == 0:
		return fmt.Sprintf("%dd", d/day)
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	default:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
}

// NextStepDue is when the next step after now falls due: a reminder still ahead, or the next
// day of expiry.
func NextStepDue(end, now time.Time, remindBefore []time.Duration) time.Time {
	if !now.Before(end) {
		return end.Add((now.Sub(end)/day + 1) * day)
	}
	next := end
	for _, d := range remindBefore {
		if due := end.Add(-d); due.After(now) && due.Before(next) {
			next = due
		}
	}
	return next
}

// Due reports whether step should be sent, given the one last sent on the channel (nil if none).
// It compares whole seconds, the precision the ledger is stored with.
func Due(step Step, last *v1alpha1.SentAlert) bool {
	return last == nil || step.Due.Truncate(time.Second).After(last.DueTime.Time)
}

// RemindBefore parses a watch's reminder schedule, latest-first; empty means the default.
func RemindBefore(ds []v1alpha1.Duration) ([]time.Duration, error) {
	if len(ds) == 0 {
		return DefaultRemindBefore, nil
	}
	out := make([]time.Duration, 0, len(ds))
	for _, d := range ds {
		v, err := d.Parse()
		if err != nil {
			return nil, fmt.Errorf("alerts.remindBefore: %w", err)
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] > out[j] })
	return out, nil
}
