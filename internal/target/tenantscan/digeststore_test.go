package tenantscan

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
	o := NewDigestStore()
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
	o.MarkSent(w, "uid-1", week2, "d.key")
	if !o.Sent(w, "uid-1", week2, "d.key") || o.Sent(w, "uid-1", week2, "d.other") {
		t.Error("sent keys are not kept")
	}
	o.Forget(w)
	if !o.Sent(w, "uid-1", week2, "d.key") {
		t.Error("a spec change forgot what was sent")
	}
	o.Delete(w)
	if o.Sent(w, "uid-1", week2, "d.key") {
		t.Error("a deleted watch's sends are kept")
	}
	if first := o.Failed(w, week2, "obj-b", week2.Add(time.Hour)); !first.Equal(week2.Add(time.Hour)) || !o.Failed(w, week2, "obj-b", week2.Add(2*time.Hour)).Equal(first) {
		t.Error("the first failure is not kept")
	}
	o.Put(w, week2, "obj-b", nil)
	if !o.FailedSince(w, week2, "obj-b").IsZero() {
		t.Error("a read that worked still counts as failed")
	}
}

func TestStoreHoldsBackAnAddressAcrossWatches(t *testing.T) {
	o := NewDigestStore()
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	if ok, _ := o.DigestDue("tenant-a", "Bob@contoso.example", now); !ok {
		t.Fatal("a first digest held back")
	}
	o.Digested("tenant-a", "Bob@contoso.example", now)
	if ok, when := o.DigestDue("tenant-a", "bob@contoso.example", now.Add(time.Hour)); ok || !when.Equal(now.Add(DigestGap)) {
		t.Errorf("a second digest an hour later: %v, %v", ok, when)
	}
	if ok, _ := o.DigestDue("tenant-b", "bob@contoso.example", now.Add(time.Hour)); !ok {
		t.Error("another tenant's digest held back")
	}
	if ok, _ := o.DigestDue("tenant-a", "bob@contoso.example", now.Add(DigestGap)); !ok {
		t.Error("held back past the gap")
	}
	for i := range NoticesPerDay {
		if ok, _ := o.NoticeDue("tenant-a", "bob@contoso.example", now.Add(time.Duration(i)*time.Minute)); !ok {
			t.Fatalf("notice %d held back", i)
		}
		o.Noticed("tenant-a", "bob@contoso.example", now.Add(time.Duration(i)*time.Minute))
	}
	if ok, when := o.NoticeDue("tenant-a", "bob@contoso.example", now.Add(time.Hour)); ok || !when.Equal(now.Add(24*time.Hour)) {
		t.Errorf("a sixth notice within a day: %v, %v", ok, when)
	}
}
