package controllers

import (
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
	"github.com/credwatch/credwatch/test/fakegraph"
	"github.com/credwatch/credwatch/test/mailpit"
)

// relayProxy forwards SMTP connections to mailpit while up; while down it closes each at once,
// as a relay that is out does.
type relayProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
}

func newRelayProxy(t *testing.T, target string) *relayProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &relayProxy{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *relayProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

func (p *relayProxy) serve(c net.Conn) {
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if down {
		_ = c.Close()
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
	_, _ = io.Copy(c, up)
	_ = c.Close()
}

func (p *relayProxy) port() int32 { return int32(p.ln.Addr().(*net.TCPAddr).Port) }

// digestFixture is a tenant of 1,000 applications and 300 owners: three owners own one
// application in ten besides their own, some applications have no owner, one only a service
// principal, and one owner is a user without a mailbox. want says, for each recipient, the
// applications its digest must list.
type digestFixture struct {
	apps    []fakegraph.Object
	want    map[string][]string // recipient -> appIds
	expires fakegraph.Object    // an application whose secret expires two days into the period
}

const digestFallback = "platform@contoso.example"

func newDigestFixture(t *testing.T, period time.Time) digestFixture {
	t.Helper()
	owner := func(j int) fakegraph.Owner {
		o := fakegraph.Owner{ID: fmt.Sprintf("0a000000-0000-4000-8000-%012d", j), DisplayName: fmt.Sprintf("owner %d", j),
			UserPrincipalName: fmt.Sprintf("owner-%03d@contoso.onmicrosoft.example", j), Mail: fmt.Sprintf("owner-%03d@contoso.example", j)}
		if j == 299 {
			o.Mail = "" // a user without a mailbox
		}
		return o
	}
	f := digestFixture{want: map[string][]string{}}
	for i := range 1000 {
		app := fakegraph.Object{ID: fmt.Sprintf("0b000000-0000-4000-8000-%012d", i), AppID: fmt.Sprintf("0c000000-0000-4000-8000-%012d", i),
			DisplayName: fmt.Sprintf("app-%03d", i)}
		// Half the applications have a secret ending within 30 days of the period's start.
		end := period.Add(time.Duration(5+i%50)*day + time.Hour)
		app.Passwords = []fakegraph.PasswordCredential{{SecretText: "dIg~" + strings.ReplaceAll(uuid.NewString(), "-", ""), Start: end.Add(-365 * day), End: end}}
		listed := i%50 <= 24
		switch {
		case i%97 == 0:
		case i == 5:
			app.Owners = []fakegraph.Owner{{ID: "0d000000-0000-4000-8000-000000000005", DisplayName: "deployer", ServicePrincipal: true}}
		default:
			app.Owners = []fakegraph.Owner{owner(i % 300)}
			if i%10 == 0 {
				for j := range 3 {
					if j != i%300 {
						app.Owners = append(app.Owners, owner(j))
					}
				}
			}
		}
		if i == 777 {
			// A secret on the service principal: a finding, so listed whatever its expiry.
			fake.PutServicePrincipal(digestTenant, fakegraph.Object{AppID: app.AppID, DisplayName: app.DisplayName,
				Passwords: []fakegraph.PasswordCredential{{SecretText: "sPd~secret", Start: period.Add(-day), End: period.Add(300 * day)}}})
			listed = true
		}
		if i == 42 {
			app.Tags = []string{"credwatch-no-digest"}
			listed = false
		}
		fake.PutApplication(digestTenant, app)
		f.apps = append(f.apps, app)
		if !listed {
			continue
		}
		mailed := false
		for _, o := range app.Owners {
			if o.Mail != "" {
				f.want[o.Mail] = append(f.want[o.Mail], app.AppID)
				mailed = true
			}
		}
		if !mailed {
			f.want[digestFallback] = append(f.want[digestFallback], app.AppID)
		}
	}
	f.expires = f.apps[1]
	// Two secrets that expire together: their owner hears of both in one message.
	f.expires.Passwords = []fakegraph.PasswordCredential{{SecretText: "eXp~secret", Start: period.Add(-300 * day), End: period.Add(2 * day)},
		{SecretText: "eXp~second", Start: period.Add(-300 * day), End: period.Add(2 * day)}}
	fake.PutApplication(digestTenant, f.expires)
	f.want[f.expires.Owners[0].Mail] = append(f.want[f.expires.Owners[0].Mail], f.expires.AppID)
	for k := range f.want {
		slices.Sort(f.want[k])
		f.want[k] = slices.Compact(f.want[k])
	}
	return f
}

var appIDInText = regexp.MustCompile(`\(appId (0c000000-[0-9a-f-]+)\)`)

// received is what each recipient got: the appIds of each digest, by address.
func received(t *testing.T, m *mailpit.Server, subjectPrefix string) map[string][][]string {
	t.Helper()
	out := map[string][][]string{}
	for _, msg := range m.Messages(t) {
		if !strings.HasPrefix(msg.Subject, subjectPrefix) {
			continue
		}
		if len(msg.To) != 1 {
			t.Errorf("a digest to %v: want one recipient each", msg.To)
			continue
		}
		var ids []string
		for _, match := range appIDInText.FindAllStringSubmatch(msg.Text, -1) {
			ids = append(ids, match[1])
		}
		slices.Sort(ids)
		out[msg.To[0].Address] = append(out[msg.To[0].Address], slices.Compact(ids))
	}
	return out
}

// TestOwnerDigests sends a tenant's owners their digests: one each, paced, through a restart and
// an outage of the relay, and a message at once when a secret expires between digests.
func TestOwnerDigests(t *testing.T) {
	needsAPIServer(t)
	m := mailpit.Start(t)
	relay := newRelayProxy(t, m.SMTPAddr())
	h := newHarness(t)
	h.r.DigestPace = tenantscan.NewPace(30)
	t0 := h.clock.Now()
	schedule, _ := tenantscan.ScheduleOf(v1alpha1.DigestSchedule{})
	_, period := tenantscan.PeriodOf(schedule, t0)
	fake.AddClient(digestTenant, operatorClientID, operatorSecret)
	f := newDigestFixture(t, period)

	h.create("", func(s *v1alpha1.CredentialWatchSpec) {
		s.Target.TenantScan = &v1alpha1.TenantScanTarget{TenantID: digestTenant, OwnerDigests: &v1alpha1.OwnerDigests{
			Email: v1alpha1.DigestEmail{Fallback: []string{digestFallback},
				SMTP: v1alpha1.SMTPServer{Host: "127.0.0.1", Port: relay.port(), TLS: v1alpha1.SMTPNoTLS, From: "credwatch@contoso.example"}},
			OptOutTag: "credwatch-no-digest",
		}}
		s.CheckInterval = "7d"
	})
	w, res := h.reconcile()
	if st := w.Status.OwnerDigests; st == nil || !st.NextPeriod.Time.Equal(period) || len(m.Messages(t)) != 0 {
		t.Fatalf("set up mid-period: %+v and %d messages; want nothing sent before %v", st, len(m.Messages(t)), period)
	}
	if res.RequeueAfter > period.Sub(t0)+time.Second {
		t.Errorf("requeue after %v, want by the period's start, %v", res.RequeueAfter, period.Sub(t0))
	}

	// The period begins. Owners are read, and thirty digests go out a minute, through a restart
	// and a relay out for a while.
	h.step(period.Sub(t0) + time.Second)
	fake.ResetRequests()
	for round := 0; round < 40; round++ {
		switch round {
		case 3:
			h.restart()
		case 5:
			relay.setDown(true)
		case 7:
			relay.setDown(false)
		}
		w, _ = h.reconcile()
		if st := w.Status.OwnerDigests; st.Recipients > 0 && st.Sent == st.Recipients {
			break
		}
		h.step(time.Minute)
	}
	st := w.Status.OwnerDigests
	if st.Recipients != int32(len(f.want)) || st.Sent != st.Recipients || st.Failing != 0 || st.OwnersUnread != 0 {
		t.Fatalf("status %+v; want %d recipients, all sent", st, len(f.want))
	}
	// Once all went, the counts stay put.
	for range 2 {
		h.step(time.Minute)
		if w, _ = h.reconcile(); *w.Status.OwnerDigests != *st {
			t.Errorf("status moved to %+v from %+v", *w.Status.OwnerDigests, *st)
		}
	}
	got := received(t, m, "credwatch: ")
	for rcpt, apps := range f.want {
		if len(got[rcpt]) != 1 {
			t.Errorf("%s got %d digests, want one", rcpt, len(got[rcpt]))
			continue
		}
		if !slices.Equal(got[rcpt][0], apps) {
			t.Errorf("%s's digest lists %d applications, want %d: %v vs %v", rcpt, len(got[rcpt][0]), len(apps), got[rcpt][0], apps)
		}
	}
	if len(got) != len(f.want) {
		t.Errorf("%d recipients got mail, want %d", len(got), len(f.want))
	}
	var batched int
	for _, r := range fake.Requests() {
		if r.Batched && strings.HasSuffix(r.Path, "/owners") {
			batched++
		}
	}
	// Each application listed once, and again after the restart: the owners are read anew.
	if listed := 1 + len(f.want["owner-000@contoso.example"]); batched == 0 || batched > 2*len(f.apps) {
		t.Errorf("%d owner reads (%d listed by owner 0)", batched, listed)
	}
	events := strings.Join(h.all, "\n")
	if !strings.Contains(events, "DigestDeliveryFailed") || strings.Contains(events, "dIg~") || strings.Contains(events, "owner-0") {
		t.Errorf("events should tell of the outage and name no secret and no address:\n%s", events)
	}

	// A secret of the period expires two days in: its owner hears at once, once.
	before := len(m.Messages(t))
	h.step(2*day + time.Minute)
	h.reconcile()
	w, _ = h.reconcile()
	msgs := m.Messages(t)
	if len(msgs) != before+1 {
		t.Fatalf("%d messages after the expiry, want one more than %d", len(msgs), before)
	}
	if n := msgs[0]; n.Subject != "credwatch: 2 credentials of your applications expired" || n.To[0].Address != f.expires.Owners[0].Mail || !strings.Contains(n.Text, f.expires.AppID) {
		t.Errorf("expiry message %q to %v", n.Subject, n.To)
	}
	if w.Status.OwnerDigests.ExpiredNotices != 2 {
		t.Errorf("expiredNotices %d, want 2", w.Status.OwnerDigests.ExpiredNotices)
	}

	// A schedule edited to come sooner starts afresh: no period before the one the old schedule
	// had next gets a digest.
	oldNext := w.Status.OwnerDigests.NextPeriod
	soon := h.clock.Now().Add(time.Hour).UTC().Format("15:04")
	w.Spec.Target.TenantScan.OwnerDigests.Schedule = v1alpha1.DigestSchedule{Every: v1alpha1.EveryDay, Time: soon}
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	before = len(m.Messages(t))
	h.reconcile()
	h.step(time.Hour)
	w, _ = h.reconcile()
	// Half a day before the old schedule's next, a daily schedule's period may begin.
	if st := w.Status.OwnerDigests; !st.Since.Time.Equal(oldNext.Add(-12*time.Hour)) || st.Schedule != "every day at "+soon+" UTC" || len(m.Messages(t)) != before {
		t.Errorf("after the schedule changed: status %+v and %d more messages; want no digest before %v", st, len(m.Messages(t))-before, oldNext.Add(-12*time.Hour))
	}
}

// TestOwnerDigestsLate: a period whose digests could not all go out tells the fallback once when
// the next begins, and the next period's digests go.
func TestOwnerDigestsLate(t *testing.T) {
	needsAPIServer(t)
	m := mailpit.Start(t)
	relay := newRelayProxy(t, m.SMTPAddr())
	h := newHarness(t)
	t0 := h.clock.Now()
	schedule := v1alpha1.DigestSchedule{Every: v1alpha1.EveryDay, Time: "09:00"}
	parsed, _ := tenantscan.ScheduleOf(schedule)
	_, period := tenantscan.PeriodOf(parsed, t0)
	fake.AddClient(lateTenant, operatorClientID, operatorSecret)
	for i := range 3 {
		fake.PutApplication(lateTenant, fakegraph.Object{DisplayName: fmt.Sprintf("late-%d", i),
			Owners:    []fakegraph.Owner{{ID: fmt.Sprintf("0e000000-0000-4000-8000-%012d", i), Mail: fmt.Sprintf("late-owner-%d@contoso.example", i)}},
			Passwords: []fakegraph.PasswordCredential{{SecretText: "lAt~secret", Start: period.Add(-300 * day), End: period.Add(10 * day)}}})
	}
	h.create("", func(s *v1alpha1.CredentialWatchSpec) {
		s.Target.TenantScan = &v1alpha1.TenantScanTarget{TenantID: lateTenant, OwnerDigests: &v1alpha1.OwnerDigests{
			Email:    v1alpha1.DigestEmail{Fallback: []string{digestFallback}, SMTP: v1alpha1.SMTPServer{Host: "127.0.0.1", Port: relay.port(), TLS: v1alpha1.SMTPNoTLS, From: "credwatch@contoso.example"}},
			Schedule: schedule,
		}}
		s.CheckInterval = "7d"
	})
	h.reconcile()
	relay.setDown(true)
	h.step(period.Sub(t0) + time.Second)
	w, _ := h.reconcile()
	if st := w.Status.OwnerDigests; st.Recipients != 3 || st.Failing != 3 || st.Sent != 0 {
		t.Fatalf("relay down: %+v; want three digests failing", st)
	}
	assertCondition(t, w, v1alpha1.ConditionAlertsDelivered, "False", v1alpha1.ReasonDeliveryFailed)

	relay.setDown(false)
	h.step(24 * time.Hour)
	w, _ = h.reconcile()
	h.reconcile()
	var late, digestsSent int
	for _, msg := range m.Messages(t) {
		switch {
		case strings.HasPrefix(msg.Subject, "Owner digests of tenant "+lateTenant+" could not all go out"):
			late++
			if msg.To[0].Address != digestFallback || !strings.Contains(msg.Text, "0 of 3 went out") {
				t.Errorf("late alert to %v:\n%s", msg.To, msg.Text)
			}
		case strings.HasPrefix(msg.Subject, "credwatch: "):
			digestsSent++
		}
	}
	if late != 1 || digestsSent != 3 {
		t.Errorf("%d late alerts and %d digests, want one, and the new period's three", late, digestsSent)
	}
	if st := w.Status.OwnerDigests; st.Sent != 3 || st.Failing != 0 {
		t.Errorf("the next period: %+v", st)
	}
	assertEvents(t, filterEvents(h.all, "DigestsLate"), "Warning DigestsLate")

	// Turning the digests off and on again, to come an hour later, sends nobody a second digest
	// within twenty hours of the last: not this process, nor, from the ledger, a restarted one.
	before := len(m.Messages(t))
	spec := w.Spec.Target.TenantScan.OwnerDigests.DeepCopy()
	w.Spec.Target.TenantScan.OwnerDigests = nil
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	w, _ = h.reconcile()
	spec.Schedule.Time = h.clock.Now().Add(time.Hour).UTC().Format("15:04")
	w.Spec.Target.TenantScan.OwnerDigests = spec
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	h.step(time.Hour)
	h.restart()
	for range 3 {
		w, _ = h.reconcile()
	}
	if st := w.Status.OwnerDigests; len(m.Messages(t)) != before || st.Sent != 0 || st.Recipients != 0 {
		t.Errorf("digests set up again: %d more messages, status %+v; want none within twenty hours of the last", len(m.Messages(t))-before, st)
	}
}

func filterEvents(all []string, reason string) []string {
	var out []string
	for _, e := range all {
		if strings.Contains(e, " "+reason+" ") {
			out = append(out, e)
		}
	}
	return out
}

// TestOwnerDigestsNeedReadOwnersForEachApplication: an identity that may read the owners of one
// application only mails that application's owners; the others' lines go to the fallback.
func TestOwnerDigestsNeedReadOwnersForEachApplication(t *testing.T) {
	needsAPIServer(t)
	m := mailpit.Start(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	parsed, _ := tenantscan.ScheduleOf(v1alpha1.DigestSchedule{Every: v1alpha1.EveryDay})
	_, period := tenantscan.PeriodOf(parsed, t0)
	fake.AddClient(lateTenant, operatorClientID, operatorSecret)
	var apps []string
	for i := range 2 {
		app := fakegraph.Object{AppID: uuid.NewString(), DisplayName: fmt.Sprintf("narrow-%d", i),
			Owners:    []fakegraph.Owner{{ID: uuid.NewString(), Mail: fmt.Sprintf("narrow-owner-%d@contoso.example", i)}},
			Passwords: []fakegraph.PasswordCredential{{SecretText: "nRw~secret", Start: period.Add(-300 * day), End: period.Add(10 * day)}}}
		fake.PutApplication(lateTenant, app)
		apps = append(apps, app.AppID)
	}
	id := operatorIdentity()
	id.Name = "digest-narrow"
	id.Spec.Allow.Tenants = []string{lateTenant}
	id.Spec.Allow.Applications = []string{apps[0]}
	if err := createSignedIn(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	h.create("", func(s *v1alpha1.CredentialWatchSpec) {
		s.IdentityRef = &v1alpha1.IdentityRef{Kind: v1alpha1.KindClusterAzureIdentity, Name: id.Name}
		s.Target.TenantScan = &v1alpha1.TenantScanTarget{TenantID: lateTenant, Filter: "startswith(displayName,'narrow-')", OwnerDigests: &v1alpha1.OwnerDigests{
			Email:    v1alpha1.DigestEmail{Fallback: []string{digestFallback}, SMTP: v1alpha1.SMTPServer{Host: "127.0.0.1", Port: int32(m.SMTPPort), TLS: v1alpha1.SMTPNoTLS, From: "credwatch@contoso.example"}},
			Schedule: v1alpha1.DigestSchedule{Every: v1alpha1.EveryDay},
		}}
		s.CheckInterval = "7d"
	})
	h.reconcile()
	h.step(period.Sub(t0) + time.Second)
	fake.ResetRequests()
	h.reconcile()
	got := received(t, m, "credwatch: ")
	if len(got) != 2 || len(got["narrow-owner-0@contoso.example"]) != 1 || len(got[digestFallback]) != 1 || len(got["narrow-owner-1@contoso.example"]) != 0 {
		t.Errorf("digests %v; want one to the allowed application's owner and one to the fallback", got)
	}
	for _, r := range fake.Requests() {
		if strings.HasSuffix(r.Path, "/owners") && !strings.Contains(r.Path, "/applications/") {
			t.Errorf("read %s", r.Path)
		}
	}
	owned, _ := fake.Application(lateTenant, apps[1])
	for _, r := range fake.Requests() {
		if strings.Contains(r.Path, owned.ID) {
			t.Errorf("read the owners of an application the identity does not cover: %s", r.Path)
		}
	}
}
