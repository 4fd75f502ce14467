package rotation

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
)

// With sign-ins read, the old secret outlives the grace period while it still signs in: the
// rotation records which one and the new secret's first sign-in, holds once the retire wait is
// over (said by event once, and on the condition), and retires it once it has been quiet for
// activeWithin on a report read since.
func TestOldSecretsGoOnlyOnceNothingSignsInWithThem(t *testing.T) {
	w := newWorld(t)
	day := 24 * time.Hour
	w.signIns = &SignIns{Usage: policy.Usage{ActiveWithin: 2 * day, RetireWait: 10 * day}}
	st, _ := w.until(nil, false, v1alpha1.StepRetiring, 10)
	moved := st.StepTime.Time
	read := func(at time.Duration, oldLast time.Duration) {
		w.signIns.Evidence = policy.SignInEvidence{ReadTime: moved.Add(at), Last: map[string]time.Time{
			"k-old": moved.Add(oldLast), "k-hand": {}, "k-1": moved.Add(time.Hour)}}
	}
	read(0, -time.Hour)
	st, _ = w.run(st, false) // the grace period (7d) ends
	read(7*day, 7*day-time.Hour)
	st, res := w.run(st, false)
	if st == nil || len(st.OldSecretsInUse) != 1 || st.OldSecretsInUse[0].KeyID != "k-old" || !w.listed("k-old") {
		t.Fatalf("status %+v: want k-old kept and named, as it still signs in", st)
	}
	if st.NewSecretSignIn == nil || !st.NewSecretSignIn.Time.Equal(moved.Add(time.Hour)) || res.Condition.Reason != string(v1alpha1.StepRetiring) ||
		!strings.Contains(res.Condition.Message, "Old secret k-old") {
		t.Fatalf("status %+v, condition %+v: want the new secret's first sign-in, and k-old waited for", st, res.Condition)
	}
	for w.now.Before(moved.Add(10 * day)) {
		read(w.now.Sub(moved), w.now.Sub(moved)-time.Hour)
		st, res = w.run(st, false)
	}
	read(w.now.Sub(moved), w.now.Sub(moved)-time.Hour)
	st, res = w.run(st, false)
	st, res = w.run(st, false)
	if st == nil || st.HeldTime == nil || res.Condition.Reason != v1alpha1.ReasonRotationOldSecretInUse || !w.listed("k-old") {
		t.Fatalf("status %+v, condition %+v: want the rotation held with k-old", st, res.Condition)
	}
	held := slices.DeleteFunc(w.eventReasons(), func(r string) bool { return r != EventOldSecretInUse })
	if len(held) != 1 {
		t.Errorf("events %v: want the hold told once", w.eventReasons())
	}
	// What used it moved at day 11: quiet a day later is not enough, two days is.
	stopped := 11 * day
	w.now = moved.Add(stopped + day)
	read(stopped+day, stopped)
	if st, _ = w.run(st, false); st == nil || !w.listed("k-old") {
		t.Fatalf("retired a day after its last sign-in, with activeWithin 2d")
	}
	w.now = moved.Add(stopped + 2*day)
	read(stopped+2*day, stopped)
	if st, _ = w.run(st, false); st != nil || w.listed("k-old") || !w.listed("k-hand") {
		t.Fatalf("status %+v, Graph lists %+v: want k-old retired and the rotation done", st, w.secrets)
	}
	if w.finished == nil || w.finished.NewSecretSignIn == nil {
		t.Errorf("last rotation %+v: want the new secret's first sign-in kept", w.finished)
	}
}

// What status says of sign-ins is evidence only for the pinned application, read, and as far as
// the report could know: a secret made less than its lag before the read that shows no sign-in
// is left out, not counted quiet.
func TestSignInsOf(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	watch := func(edit func(*v1alpha1.CredentialWatch)) *v1alpha1.CredentialWatch {
		w := &v1alpha1.CredentialWatch{Spec: v1alpha1.CredentialWatchSpec{Usage: &v1alpha1.Usage{SignIns: true}}}
		w.Status.ServicePrincipal = &v1alpha1.ServicePrincipalStatus{AppID: strings.ToUpper(testApp)}
		w.Status.SignInsReadTime = ts(0)
		w.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionSignInsRead, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSignInsRead}}
		pw := func(key string, start time.Duration, last *metav1.Time) v1alpha1.Credential {
			return v1alpha1.Credential{KeyID: key, Source: v1alpha1.SourceApplication, Type: v1alpha1.CredentialTypePassword, StartTime: ts(start), LastSignIn: last}
		}
		w.Status.Credentials = []v1alpha1.Credential{pw("old", -400*24*time.Hour, ts(-time.Hour)), pw("never", -30*24*time.Hour, nil),
			pw("fresh", -time.Hour, nil), pw("fresh-used", -time.Hour, ts(-time.Minute)),
			{KeyID: "cert", Source: v1alpha1.SourceApplication, Type: v1alpha1.CredentialTypeCertificate},
			{KeyID: "sp", Source: v1alpha1.SourceServicePrincipal, Type: v1alpha1.CredentialTypePassword}}
		if edit != nil {
			edit(w)
		}
		return w
	}
	for _, tc := range []struct {
		name string
		w    *v1alpha1.CredentialWatch
		want string // "nil", "unavailable", or the listed keys
	}{
		{"read", watch(nil), "fresh-used,never,old"},
		{"sign-ins not asked for", watch(func(w *v1alpha1.CredentialWatch) { w.Spec.Usage = nil }), "nil"},
		{"unavailable here", watch(func(w *v1alpha1.CredentialWatch) {
			w.Status.Conditions[0].Status, w.Status.Conditions[0].Reason = metav1.ConditionFalse, v1alpha1.ReasonSignInsUnavailable
		}), "unavailable"},
		{"the identity refuses them", watch(func(w *v1alpha1.CredentialWatch) {
			w.Status.Conditions[0].Status, w.Status.Conditions[0].Reason = metav1.ConditionFalse, v1alpha1.ReasonIdentityNotAllowed
		}), "unavailable"},
		{"asked, with activeWithin 0s", watch(func(w *v1alpha1.CredentialWatch) { w.Spec.Usage.ActiveWithin = "0s" }), "fresh-used,never,old"},
		{"the last read failed", watch(func(w *v1alpha1.CredentialWatch) {
			w.Status.Conditions[0].Status, w.Status.Conditions[0].Reason = metav1.ConditionFalse, v1alpha1.ReasonThrottled
		}), ""},
		{"not read yet", watch(func(w *v1alpha1.CredentialWatch) { w.Status.Conditions, w.Status.SignInsReadTime = nil, nil }), ""},
		{"another application's", watch(func(w *v1alpha1.CredentialWatch) { w.Status.ServicePrincipal.AppID = "0000" }), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := SignInsOf(tc.w, testApp)
			switch {
			case s == nil || s.Unavailable != "":
				if got := map[bool]string{true: "nil", false: "unavailable"}[s == nil]; got != tc.want {
					t.Fatalf("sign-ins %s; want %q", got, tc.want)
				}
				return
			case tc.want == "unavailable":
				t.Fatalf("sign-ins available; want them unavailable")
			}
			keys := slices.Sorted(maps.Keys(s.Evidence.Last))
			if tc.want == "nil" || strings.Join(keys, ",") != tc.want || (tc.want == "") != s.Evidence.ReadTime.IsZero() {
				t.Errorf("evidence %+v; want %q", s.Evidence, tc.want)
			}
		})
	}
}

// A rotation that waited on sign-ins goes on waiting when they can no longer be had (turned off,
// refused, the licence gone): held at the retire wait, it retires nothing until the old secret
// is removed by hand. One that never could read them retires after the grace period, as without
// spec.usage, and one with nothing to retire does not wait for evidence.
func TestRetiringDoesNotFallBackOnceGatedOnSignIns(t *testing.T) {
	day := 24 * time.Hour
	usage := policy.Usage{SignIns: true, ActiveWithin: 2 * day, RetireWait: 10 * day}
	for _, tc := range []struct {
		name    string
		start   *SignIns // what the rotation sees until it is retiring
		after   *SignIns // what it sees after the grace period
		gone    bool     // the old secret was removed by hand before the grace period ended
		retired bool
	}{
		{name: "sign-ins turned off mid-rotation", start: &SignIns{Usage: usage}, after: nil},
		{name: "the identity refuses them mid-rotation", start: &SignIns{Usage: usage}, after: &SignIns{Usage: usage, Unavailable: "the identity does not allow ReadSignIns"}},
		{name: "never readable: the grace period decides", start: &SignIns{Usage: usage, Unavailable: "no licence"},
			after: &SignIns{Usage: usage, Unavailable: "no licence"}, retired: true},
		{name: "nothing to retire", start: &SignIns{Usage: usage}, after: nil, gone: true, retired: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.signIns = tc.start
			st, _ := w.until(nil, false, v1alpha1.StepRetiring, 10)
			if !st.SignInsGated != (tc.start.Unavailable != "") {
				t.Fatalf("gated %v; want it pinned only when sign-ins could be read", st.SignInsGated)
			}
			if tc.gone {
				w.secrets = slices.DeleteFunc(w.secrets, func(s Secret) bool { return s.KeyID == "k-old" })
			}
			w.signIns = tc.after
			var res Result
			for range 12 * 24 {
				if st, res = w.run(st, false); st == nil {
					break
				}
			}
			if (st == nil) != tc.retired {
				t.Fatalf("rotation %+v after 12 days; want it done: %v", st, tc.retired)
			}
			if tc.retired {
				return
			}
			if !w.listed("k-old") || st.HeldTime == nil || res.Condition.Reason != v1alpha1.ReasonRotationOldSecretInUse ||
				!strings.Contains(res.Condition.Message, "none can be read") || !strings.Contains(res.Condition.Message, "k-old") {
				t.Fatalf("rotation %+v, condition %+v: want it held, k-old kept and named", st, res.Condition)
			}
			// Removed by hand: nothing is left to wait for.
			w.secrets = slices.DeleteFunc(w.secrets, func(s Secret) bool { return s.KeyID == "k-old" })
			if st, _ = w.run(st, false); st != nil {
				t.Errorf("rotation %+v after the old secret was removed by hand; want it done", st)
			}
		})
	}
}
