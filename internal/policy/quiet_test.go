package policy

import (
	"strings"
	"testing"
	"time"
)

// Old secrets are retired only on a report read a day after the move that lists each of them
// quiet since; one still signing in holds the rotation once the wait is over.
func TestOldSecretsQuiet(t *testing.T) {
	moved := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	wait := 7 * 24 * time.Hour
	u := Usage{ActiveWithin: 3 * 24 * time.Hour, RetireWait: wait}
	at := func(d time.Duration) time.Time { return moved.Add(d) }
	read := func(d time.Duration, last map[string]time.Time) SignInEvidence {
		return SignInEvidence{ReadTime: at(d), Last: last}
	}
	for _, tc := range []struct {
		name   string
		old    []string
		e      SignInEvidence
		now    time.Time
		retire bool
		held   bool
		busy   []string
		next   time.Time
		says   string
	}{
		{name: "quiet, read late enough", old: []string{"a"}, e: read(25*time.Hour, map[string]time.Time{"a": at(-time.Hour)}),
			now: at(26 * time.Hour), retire: true},
		{name: "quiet, never signed in", old: []string{"a"}, e: read(RetireMargin, map[string]time.Time{"a": {}}),
			now: at(RetireMargin), retire: true},
		{name: "nothing old to retire, read late enough", e: read(RetireMargin, nil), now: at(RetireMargin), retire: true},
		{name: "quiet, but read too soon after the move: the report lags", old: []string{"a"},
			e: read(23*time.Hour, map[string]time.Time{"a": at(-time.Hour)}), now: at(23 * time.Hour),
			next: at(RetireMargin), says: "read after 2026-12-02T10:00:00Z"},
		{name: "the last read failed", old: []string{"a"}, e: SignInEvidence{Last: map[string]time.Time{"a": {}}}, now: at(30 * time.Hour),
			next: at(31 * time.Hour), says: "the last read failed"},
		{name: "signed in after the move", old: []string{"a", "b"},
			e:   read(48*time.Hour, map[string]time.Time{"a": at(40 * time.Hour), "b": at(-time.Hour)}),
			now: at(49 * time.Hour), busy: []string{"a"}, next: at(50 * time.Hour), says: "Old secret a (last sign-in 2026-12-03T02:00:00Z) still signs in"},
		{name: "still signing in past the wait: held", old: []string{"a", "b"},
			e:   read(wait, map[string]time.Time{"a": at(wait - time.Hour), "b": at(wait - 2*time.Hour)}),
			now: at(wait), held: true, busy: []string{"a", "b"}, next: at(wait + time.Hour), says: "held since 2026-12-08T10:00:00Z"},
		{name: "the wait ends before the next look", old: []string{"a"},
			e:   read(wait-time.Hour, map[string]time.Time{"a": at(wait - 2*time.Hour)}),
			now: at(wait - 30*time.Minute), busy: []string{"a"}, next: at(wait)},
		{name: "an old secret the report does not list yet", old: []string{"a", "c"},
			e: read(30*time.Hour, map[string]time.Time{"a": {}}), now: at(30 * time.Hour), next: at(31 * time.Hour), says: "to list old secret c"},
		{name: "moved late, and quiet for activeWithin since", old: []string{"a"},
			e: read(wait+4*24*time.Hour, map[string]time.Time{"a": at(wait + 24*time.Hour)}), now: at(wait + 4*24*time.Hour), retire: true},
		{name: "moved late, quiet for less than activeWithin: still held", old: []string{"a"},
			e:   read(wait+3*24*time.Hour, map[string]time.Time{"a": at(wait + 24*time.Hour + time.Second)}),
			now: at(wait + 3*24*time.Hour), held: true, busy: []string{"a"}, next: at(wait + 3*24*time.Hour + time.Hour)},
		{name: "a sign-in at the very moment of the move is the old consumer's last", old: []string{"a"},
			e: read(RetireMargin, map[string]time.Time{"a": moved}), now: at(RetireMargin), retire: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := OldSecretsQuiet(tc.old, tc.e, moved, tc.now, u)
			var busy []string
			for _, b := range q.Busy {
				busy = append(busy, b.KeyID)
			}
			if q.Retire != tc.retire || q.Held != tc.held || strings.Join(busy, ",") != strings.Join(tc.busy, ",") {
				t.Fatalf("retire %v, held %v, busy %v; want %v, %v, %v (%s)", q.Retire, q.Held, busy, tc.retire, tc.held, tc.busy, q.Message)
			}
			if !q.Next.Equal(tc.next) {
				t.Errorf("next %v, want %v", q.Next, tc.next)
			}
			if !strings.Contains(q.Message, tc.says) {
				t.Errorf("message %q, want it to say %q", q.Message, tc.says)
			}
		})
	}
}
