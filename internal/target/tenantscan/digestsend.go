package tenantscan

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/email"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// The sending of owner digests: claiming in the ledger, sending within the pace and budget,
// marking failures, counting the period, and the late alert.

// sendDigests sends what is due, within the pace and the reconcile's budget, and counts the
// period's digests in status.
func (s Scan) sendDigests(ctx context.Context, run *digestRun, expired []v1alpha1.Credential, apps []DigestApp, h policy.Hygiene) error {
	msgs, nowhere, built := run.messages(s, expired, apps, h)
	var due []message
	for _, m := range msgs {
		if run.settled(s, m) {
			continue
		}
		due = append(due, m)
	}
	sent, err := s.deliverDigests(ctx, run, due)
	if err != nil {
		return err
	}
	run.count(expired, built)
	if sent.digests+sent.notices > 0 {
		s.Events.Eventf(run.obj, corev1.EventTypeNormal, eventDigestsSent, "Sent %d owner digests (%d of %d this period) and %d expiry messages",
			sent.digests, run.st.Sent, run.st.Recipients, sent.notices)
	}
	var notes []string
	if run.denied > 0 {
		notes = append(notes, fmt.Sprintf("%d %s", run.denied, digestDeniedMessage))
	}
	if nowhere > 0 {
		notes = append(notes, fmt.Sprintf("%d %s", nowhere, digestNoRecipientMessage))
	}
	if len(notes) > 0 && run.st.Message == "" {
		run.st.Message = strings.Join(notes, "; ")
	}
	switch {
	case run.st.Failing > 0:
		target.SetCondition(run.obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonDeliveryFailed,
			fmt.Sprintf("Owner digests: %d of %d sent this period, %d failing and retried with backoff: %s", run.st.Sent, run.st.Recipients, run.st.Failing, sent.lastError), run.now)
	case run.st.Message == "" || len(notes) > 0 && run.st.Message == strings.Join(notes, "; "):
		msg := fmt.Sprintf("Owner digests: %d of %d sent for the period that began %s; the next begins %s",
			run.st.Sent, run.st.Recipients, run.start.UTC().Format(time.RFC3339), run.st.NextPeriod.UTC().Format(time.RFC3339))
		target.SetCondition(run.obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, v1alpha1.ReasonDelivered, msg, run.now)
	}
	return nil
}

// settled reports whether m needs no sending now: the ledger or this process says it went, or it
// failed and waits for its next attempt.
func (run *digestRun) settled(s Scan, m message) bool {
	waiting := false
	for _, k := range m.keys {
		if s.Digests.Sent(run.key, run.obj.UID, run.start, k) {
			return true
		}
		if entry, ok := run.book.Get(k); ok {
			d := DeliveryOf(entry)
			if d.Sent && !m.notice {
				return true
			}
			if !d.Sent && run.now.Before(d.Next) {
				run.next = policy.Earliest(run.next, d.Next)
				waiting = true
			}
		}
	}
	return waiting
}

// count sets the period's counts from the ledger: digests sent and failing, expiry messages sent.
// The recipients are counted only when the digests were planned this reconcile.
func (run *digestRun) count(expired []v1alpha1.Credential, built bool) {
	notices := map[string]bool{}
	for _, c := range expired {
		notices[ExpiredKeyPrefix(c)] = true
	}
	prefix := DigestKeyPrefix(run.start)
	var sent, failing, told int32
	run.book.Entries(func(k, v string) {
		d := DeliveryOf(v)
		credential := ""
		if i := strings.LastIndexByte(k, '.'); i > 0 {
			credential = k[:i+1]
		}
		switch {
		case notices[credential] && d.Sent:
			told++
		case notices[credential]:
		case !strings.HasPrefix(k, prefix):
		case d.Sent:
			sent++
		default:
			failing++
		}
	})
	run.st.Sent, run.st.Failing, run.st.ExpiredNotices = sent, failing, told
	if !built && run.st.Recipients < sent+failing {
		run.st.Recipients = sent + failing
	}
}

type sentCounts struct {
	digests, notices int
	lastError        string
}

// deliverDigests claims the messages the pace lets go, with the ledger's stale entries dropped in
// the same write, sends those whose claims were written, and marks those that fail with their
// next attempt.
func (s Scan) deliverDigests(ctx context.Context, run *digestRun, due []message) (sentCounts, error) {
	var counts sentCounts
	batch, changes, previous := run.claims(s, due)
	if len(changes) == 0 {
		return counts, nil
	}
	written, claimErr := s.Ledger.Write(ctx, run.book, changes)
	claimed := map[string]bool{}
	for _, k := range written {
		claimed[k] = true
	}
	failures := map[string]*string{}
	budget, cancel := context.WithTimeout(ctx, digestSendBudget)
	defer cancel()
	inARow := 0
	for _, m := range batch {
		if !allClaimed(m.keys, claimed) {
			s.Pace.Return(run.now) // another writer holds the ledger: sent by none this time
			takeBack(m.keys, claimed, previous, failures)
			continue
		}
		var err error
		if inARow >= digestFailuresInARow || budget.Err() != nil {
			err = errors.New("not tried: the relay failed the messages before it, or the reconcile's time for sending ran out")
		} else {
			err = s.sendMessage(budget, ctx, run.relay, m)
		}
		if err == nil {
			inARow = 0
			s.sent(run, m, &counts)
			continue
		}
		inARow++
		counts.lastError = redactAddresses(target.OneLine(err.Error()))
		for _, k := range m.keys {
			d := previous[k].Failed(run.now, notify.RetryAfterOf(err))
			v := d.String()
			failures[k] = &v
			run.next = policy.Earliest(run.next, d.Next)
		}
	}
	if counts.lastError != "" {
		s.Events.Eventf(run.obj, corev1.EventTypeWarning, eventDigestDeliveryFailed, "Owner messages failed, each retried with backoff: %s", counts.lastError)
	}
	if len(failures) > 0 {
		if _, err := s.Ledger.Write(ctx, run.book, failures); err != nil {
			return counts, fmt.Errorf("marking failed owner digests for another attempt: %w", err)
		}
	}
	if claimErr != nil {
		return counts, fmt.Errorf("claiming owner digests in the watch's ledger before sending them: %w", claimErr)
	}
	return counts, nil
}

// takeBack gives back the claims of keys that went into a shard that was written, for a message
// not sent because another of its claims was not.
func takeBack(keys []string, claimed map[string]bool, previous map[string]Delivery, into map[string]*string) {
	for _, k := range keys {
		if !claimed[k] {
			continue
		}
		into[k] = nil
		if d, ok := previous[k]; ok {
			v := d.String()
			into[k] = &v
		}
	}
}

// sent notes that m went out: in the period's store, and in its recipient's pace.
func (s Scan) sent(run *digestRun, m message, counts *sentCounts) {
	for _, k := range m.keys {
		s.Digests.MarkSent(run.key, run.obj.UID, run.start, k)
	}
	if m.notice {
		s.Digests.Noticed(run.obj.Spec.Target.TenantID(), run.gateKey(m.recipient), run.now)
		counts.notices++
	} else {
		s.Digests.Digested(run.obj.Spec.Target.TenantID(), run.gateKey(m.recipient), run.now)
		counts.digests++
	}
}

// claims picks the messages of due the pace and the reconcile let go, and the ledger's changes
// that claim them and drop its stale entries; previous are their entries before.
func (run *digestRun) claims(s Scan, due []message) ([]message, map[string]*string, map[string]Delivery) {
	changes := map[string]*string{}
	var keys []string
	run.book.Entries(func(k, _ string) { keys = append(keys, k) })
	for _, k := range Stale(keys, run.book.Get, run.start, run.last, run.now, ExpiredBetween(run.found.Credentials, nil, run.noticeSince(), run.now)) {
		changes[k] = nil
	}
	var batch []message
	previous := map[string]Delivery{}
	sent := Delivery{Sent: true, At: run.now}.String()
	for _, m := range due {
		if len(batch) == digestSendsPerReconcile {
			run.next = policy.Earliest(run.next, run.now.Add(digestsAgain))
			break
		}
		if ok, when := s.Pace.Take(run.now); !ok {
			run.next = policy.Earliest(run.next, when)
			break
		}
		batch = append(batch, m)
		for _, k := range m.keys {
			changes[k] = &sent
			if entry, ok := run.book.Get(k); ok {
				previous[k] = DeliveryOf(entry)
			}
		}
	}
	return batch, changes, previous
}

func allClaimed(keys []string, claimed map[string]bool) bool {
	for _, k := range keys {
		if !claimed[k] {
			return false
		}
	}
	return true
}

// mailAddress is anything that looks like a mail address, in a relay's reply quoted into an error.
var mailAddress = regexp.MustCompile(`[^\s<>"'@,;:()]+@[^\s<>"'@,;:()]+`)

// redactAddresses takes owners' addresses out of an error before it reaches events and status,
// which whoever may read the watch's namespace reads: a relay's 550 names the mailbox it refused.
func redactAddresses(s string) string { return mailAddress.ReplaceAllString(s, "<address>") }

// sendMessage renders and sends m; claimed, it is sent even while the operator stops.
func (s Scan) sendMessage(budget, ctx context.Context, relay *email.Channel, m message) error {
	mail, err := m.mail()
	if err != nil {
		return err
	}
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), target.SendTimeout)
	defer cancel()
	stop := context.AfterFunc(budget, cancel)
	defer stop()
	return relay.SendTo(sendCtx, m.to, mail)
}

// sendLate tells the fallback, once, that the last period's digests did not all go out.
func (s Scan) sendLate(ctx context.Context, run *digestRun, late *v1alpha1.DigestsStatus) error {
	if late == nil {
		return nil
	}
	msg := DigestsLate(run.obj, late.Period.Time, late.Sent, late.Recipients, late.OwnersUnread, run.now)
	s.Events.Event(run.obj, corev1.EventTypeWarning, eventDigestsLate, msg.Problem)
	to := recipientsOf(run.spec.Email.Fallback)
	key := OverrunKey(late.Period.Time)
	if _, done := run.book.Get(key); done || len(to) == 0 {
		return nil
	}
	sent := Delivery{Sent: true}.String()
	if _, err := s.Ledger.Write(ctx, run.book, map[string]*string{key: &sent}); err != nil {
		return fmt.Errorf("claiming the late-digests alert in the watch's ledger: %w", err)
	}
	err := s.sendMessage(ctx, ctx, run.relay, message{keys: []string{key}, to: to, mail: func() (email.Mail, error) { return email.AlertMail(msg) }})
	if err != nil {
		// One alert, tried once: the period it is about is over, and its events say the same.
		s.Events.Eventf(run.obj, corev1.EventTypeWarning, eventDigestDeliveryFailed, "The alert that the last period's digests were late failed: %s", redactAddresses(err.Error()))
	}
	return nil
}
