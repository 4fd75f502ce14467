package tenantscan

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
)

func TestPeriodOf(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name        string
		schedule    v1alpha1.DigestSchedule
		now         string
		start, next string
	}{
		{"Mondays at nine, on a Wednesday", v1alpha1.DigestSchedule{}, "2026-12-02T12:00:00Z", "2026-11-30T09:00:00Z", "2026-12-07T09:00:00Z"},
		{"Mondays at nine, on the moment", v1alpha1.DigestSchedule{}, "2026-12-07T09:00:00Z", "2026-12-07T09:00:00Z", "2026-12-14T09:00:00Z"},
		{"Mondays at nine, a second early", v1alpha1.DigestSchedule{}, "2026-12-07T08:59:59Z", "2026-11-30T09:00:00Z", "2026-12-07T09:00:00Z"},
		{"Fridays at 17:30 in Berlin", v1alpha1.DigestSchedule{Weekday: "Friday", Time: "17:30", TimeZone: "Europe/Berlin"},
			"2026-12-02T12:00:00Z", "2026-11-27T16:30:00Z", "2026-12-04T16:30:00Z"},
		{"daily at seven, before seven", v1alpha1.DigestSchedule{Every: v1alpha1.EveryDay, Time: "07:00"}, "2026-12-02T06:00:00Z", "2026-12-01T07:00:00Z", "2026-12-02T07:00:00Z"},
		{"across the end of summer time in Berlin", v1alpha1.DigestSchedule{Weekday: "Monday", TimeZone: "Europe/Berlin"},
			"2026-10-28T12:00:00Z", "2026-10-26T08:00:00Z", "2026-11-02T08:00:00Z"},
		{"the week before it", v1alpha1.DigestSchedule{Weekday: "Monday", TimeZone: "Europe/Berlin"},
			"2026-10-22T12:00:00Z", "2026-10-19T07:00:00Z", "2026-10-26T08:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ScheduleOf(tt.schedule)
			if err != nil {
				t.Fatal(err)
			}
			start, next := PeriodOf(s, at(tt.now))
			if !start.Equal(at(tt.start)) || !next.Equal(at(tt.next)) {
				t.Errorf("period %v to %v, want %s to %s", start.UTC(), next.UTC(), tt.start, tt.next)
			}
		})
	}
	if _, err := ScheduleOf(v1alpha1.DigestSchedule{TimeZone: "Mars/Olympus"}); err == nil || !strings.Contains(err.Error(), "IANA") {
		t.Errorf("an unknown time zone: %v", err)
	}
}

func TestDigestApps(t *testing.T) {
	pw := v1alpha1.CredentialTypePassword
	withApp := func(c v1alpha1.Credential, object, name string) v1alpha1.Credential {
		c.AppObjectID, c.AppDisplayName = object, name
		return c
	}
	all := []v1alpha1.Credential{
		withApp(scanned("a", "soon", pw, -300*day, 10*day), "obj-a", "alpha"),
		withApp(scanned("a", "later", pw, -300*day, 200*day), "obj-a", "alpha"),    // valid, not listed
		withApp(scanned("b", "gone", pw, -400*day, -3*day), "obj-b", "beta"),       // expired since the last digest
		withApp(scanned("b", "long-gone", pw, -900*day, -30*day), "obj-b", "beta"), // expired before it
		withApp(scanned("c", "old", pw, -400*day, 5*day), "obj-c", "gamma"),        // renewed by c/new
		withApp(scanned("c", "new", pw, -1*day, 360*day), "obj-c", "gamma"),        // valid
		withApp(scanned("d", "forever", pw, -1*day, 1000*day), "obj-d", "delta"),   // a finding only
		withApp(scanned("e", "soon", pw, -300*day, 2*day), "obj-e", "epsilon"),     // opted out
		onSP(withApp(scanned("f", "theirs", pw, -300*day, 20*day), "", "foreign")), // another tenant's
	}
	apps := DigestApps(DigestInputs{All: all, OptedOut: map[string]bool{"e": true}, Thresholds: std,
		Hygiene: policy.Hygiene{MaxLifetime: policy.DefaultMaxLifetime, MaxLiveSecrets: 5}, Within: 30 * day, Since: now.Add(-7 * day), Start: now, Now: now})
	var got []string
	for _, a := range apps {
		line := a.AppID + "(" + a.ObjectID + "," + a.DisplayName + "):"
		for _, c := range a.Credentials {
			line += " " + c.KeyID + "=" + string(c.State)
		}
		for _, f := range a.Findings {
			line += " " + string(f.Kind)
		}
		got = append(got, line)
	}
	want := []string{"a(obj-a,alpha): soon=Warning", "b(obj-b,beta): gone=Expired", "d(obj-d,delta): LongLived",
		"f(,foreign): theirs=Warning ServicePrincipalSecret"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("apps\n%q\nwant\n%q", got, want)
	}

	owners := map[string][]string{"obj-a": {"Alice@Contoso.example", "bob@contoso.example"}, "obj-b": {"alice@contoso.example"}, "obj-d": nil}
	rcpt, unread := DigestRecipients(apps[:3], func(id string) ([]string, bool) { m, ok := owners[id]; return m, ok })
	if want := map[string][]int{"alice@contoso.example": {0, 1}, "bob@contoso.example": {0}, Fallback: {2}}; !reflect.DeepEqual(rcpt, want) || unread != nil {
		t.Errorf("recipients %v, unread %v; want %v", rcpt, unread, want)
	}
	delete(owners, "obj-b")
	if _, unread := DigestRecipients(apps, func(id string) ([]string, bool) { m, ok := owners[id]; return m, ok }); !reflect.DeepEqual(unread, []string{"obj-b"}) {
		t.Errorf("unread %v, want obj-b's owners", unread)
	}

	expired := ExpiredBetween(all, map[string]bool{"e": true}, now.Add(-7*day), now)
	if len(expired) != 1 || expired[0].KeyID != "gone" || expired[0].State != v1alpha1.StateExpired {
		t.Errorf("expired between digests: %+v, want b's gone", expired)
	}
}

func TestDigestLedger(t *testing.T) {
	start, last := now, now.Add(-7*day)
	cred := scanned("b", "gone", v1alpha1.CredentialTypePassword, -400*day, -3*day)
	keys := []string{DigestKey(start, "Alice@contoso.example"), DigestKey(last, "alice@contoso.example"), ExpiredKey(cred, "alice@contoso.example"),
		ExpiredKey(scanned("b", "older", v1alpha1.CredentialTypePassword, -400*day, -9*day), "alice@contoso.example"), OverrunKey(last), OverrunKey(last.Add(-7 * day)), "someone-else",
		ExpiredKey(cred, "bob@contoso.example")}
	if ExpiredKey(cred, "alice@contoso.example") == ExpiredKey(cred, "bob@contoso.example") {
		t.Error("two recipients of one expiry share a key")
	}
	if DigestKey(start, "Alice@contoso.example") != DigestKey(start, "alice@contoso.example") {
		t.Error("an address's case changes its key")
	}
	for _, k := range keys[:6] {
		if !ledgerKeyPattern.MatchString(k) {
			t.Errorf("key %q is not a ConfigMap key", k)
		}
	}
	values := map[string]string{keys[1]: Delivery{Sent: true, At: now.Add(-DigestGap)}.String()}
	get := func(k string) (string, bool) { v, ok := values[k]; return v, ok }
	stale := Stale(keys, get, start, last, now, []v1alpha1.Credential{cred})
	if want := []string{keys[1], keys[3], keys[5]}; !reflect.DeepEqual(stale, sorted(want)) {
		t.Errorf("stale %q, want %q", stale, sorted(want))
	}

	// A digest of the last period sent within DigestGap is kept: it holds the next back.
	values[keys[1]] = Delivery{Sent: true, At: now.Add(-time.Hour)}.String()
	if stale := Stale(keys, get, start, last, now, []v1alpha1.Credential{cred}); slices.Contains(stale, keys[1]) {
		t.Error("a digest sent an hour ago is stale")
	}
	lastDigests := LastDigests(func(f func(k, v string)) {
		for k, v := range values {
			f(k, v)
		}
	})
	if at := lastDigests[RecipientHash("ALICE@contoso.example")]; !at.Equal(now.Add(-time.Hour)) {
		t.Errorf("alice's last digest %v", at)
	}
	if s := (Delivery{Sent: true, At: now}); DeliveryOf(s.String()) != s {
		t.Errorf("%+v reads back as %+v", s, DeliveryOf(s.String()))
	}

	d := Delivery{}.Failed(now, 0)
	if d.Sent || d.Failures != 1 || !d.Next.After(now) || DeliveryOf(d.String()) != d {
		t.Errorf("a failure %+v reads back as %+v", d, DeliveryOf(d.String()))
	}
	if !DeliveryOf(Delivery{Sent: true}.String()).Sent || !DeliveryOf("garbled").Sent {
		t.Error("sent, or an entry that cannot be read, must count as sent")
	}
}

var ledgerKeyPattern = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }
