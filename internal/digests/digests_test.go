package digests

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestPaceAllowsPerMinuteInAnyMinute(t *testing.T) {
	p := NewPace(3)
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	for i := range 3 {
		if ok, _ := p.Take(t0.Add(time.Duration(i) * 10 * time.Second)); !ok {
			t.Fatalf("message %d refused", i)
		}
	}
	ok, next := p.Take(t0.Add(30 * time.Second))
	if ok || !next.Equal(t0.Add(time.Minute)) {
		t.Errorf("a fourth within the minute: %v, next %v; want refused until %v", ok, next, t0.Add(time.Minute))
	}
	if ok, _ := p.Take(t0.Add(time.Minute)); !ok {
		t.Error("refused a minute after the first")
	}
	if ok, next := p.Take(t0.Add(time.Minute + time.Second)); ok || !next.Equal(t0.Add(70*time.Second)) {
		t.Errorf("a second one at 1m01s: %v, next %v; want refused until 1m10s", ok, next)
	}
	p.Return(t0.Add(time.Minute))
	if ok, _ := p.Take(t0.Add(time.Minute + time.Second)); !ok {
		t.Error("a returned reservation was not freed")
	}
	if ok, _ := NewPace(0).Take(t0); !ok {
		t.Error("no limit refused")
	}
}

func TestOwnersArePerPeriod(t *testing.T) {
	o := NewStore()
	w := types.NamespacedName{Namespace: "platform", Name: "tenant"}
	week1, week2 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	lookup := o.Lookup(w, week1)
	o.Put(w, week1, "obj-a", []string{"alice@contoso.example"})
	if m, ok := lookup("obj-a"); !ok || len(m) != 1 {
		t.Errorf("read this period: %v, %v", m, ok)
	}
	if _, ok := lookup("obj-b"); ok {
		t.Error("an application never read is known")
	}
	lookup = o.Lookup(w, week2)
	if _, ok := lookup("obj-a"); ok {
		t.Error("last period's owners are still known")
	}
	o.Put(w, week1, "obj-a", nil) // a read of the last period ending late
	if _, ok := lookup("obj-a"); ok {
		t.Error("a read of the last period counted in this one")
	}
	o.MarkSent(w, week2, "d.key")
	if !o.Sent(w, week2, "d.key") || o.Sent(w, week2, "d.other") {
		t.Error("sent keys are not kept")
	}
	if o.Notice(w, week2, "a@contoso.example") != 0 || o.Notice(w, week2, "a@contoso.example") != 1 || o.Notices(w, week2, "a@contoso.example") != 2 {
		t.Error("notices are not counted")
	}
	o.Forget(w)
	if o.Sent(w, week2, "d.key") {
		t.Error("a forgotten watch's sends are kept")
	}
}
