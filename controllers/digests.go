package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/ledger"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/notify/email"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/scans"
)

// digestOwnerReads bounds the applications whose owners one reconcile reads: fifty batches.
const digestOwnerReads = 1000

// digestsAgain is how soon a tenant scan comes back for the owners or messages one reconcile left.
const digestsAgain = 10 * time.Second

// digestSendsPerReconcile and digestSendBudget bound what one reconcile sends, and for how long
// it holds its worker: the rest go at the next.
const (
	digestSendsPerReconcile = 30
	digestSendBudget        = time.Minute
	// digestFailuresInARow stops a reconcile's sending: the relay is down, not one mailbox.
	digestFailuresInARow = 3
)

const (
	eventDigestsSent           = "DigestsSent"
	eventDigestDeliveryFailed  = "DigestDeliveryFailed"
	eventDigestsLate           = "DigestsLate"
	eventOwnersUnread          = "OwnersUnread"
	digestNoRecipientMessage   = "applications have no owner with a mailbox and ownerDigests.email.fallback is empty: their lines go nowhere"
	digestOwnersRefusedMessage = "the owners of its applications cannot be read, so no digest goes out"
)

// digestRun is one reconcile's work on a tenant scan's owner digests.
type digestRun struct {
	obj    *v1alpha1.CredentialWatch
	spec   *v1alpha1.OwnerDigests
	found  scans.Found
	now    time.Time
	key    client.ObjectKey
	st     *v1alpha1.DigestsStatus
	period policy.DigestSchedule
	start  time.Time
	last   time.Time
	// owners looks up the owners read this period.
	owners policy.OwnerMails
	book   *ledger.Book
	relay  *email.Channel
	next   time.Time
}

// message is one mail a digest run may send: its ledger key, recipients and content.
type message struct {
	key  string
	to   []string
	mail func() (email.Mail, error)
}

// reconcileDigests mails each application's owners of a tenant scan, once a period, one digest
// of what needs attention, and a message at once when a credential of theirs expires in between.
// What went to whom is in the watch's ledger (ConfigMaps it owns), claimed before sending and
// marked failed, with its next attempt, when a send fails: a restart or a new leader sends
// nothing twice, and a failing mailbox holds up no other.
func (r *CredentialWatchReconciler) reconcileDigests(ctx context.Context, w *watchState) (time.Time, error) {
	obj := w.obj
	key := client.ObjectKeyFromObject(obj)
	t := obj.Spec.Target.TenantScan
	if t == nil || t.OwnerDigests == nil {
		obj.Status.OwnerDigests = nil
		r.Owners.Forget(key)
		return time.Time{}, nil
	}
	found, ok := r.Scans.Found(key)
	if !ok || obj.Status.LastCheckTime == nil {
		return time.Time{}, nil // what there is to tell comes with the scan
	}
	run := &digestRun{obj: obj, spec: t.OwnerDigests, found: found, now: w.now, key: key}
	var err error
	if run.period, err = policy.DigestScheduleOf(run.spec.Schedule); err != nil {
		setCondition(obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonChannelMisconfigured, "ownerDigests."+err.Error(), w.now)
		return time.Time{}, nil
	}
	run.start, run.next = policy.DigestPeriod(run.period, w.now)
	run.last, _ = policy.DigestPeriod(run.period, run.start.Add(-time.Second))
	if run.relay, err = r.Channels.Digests(ctx, obj, &run.spec.Email); err != nil {
		setCondition(obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonChannelMisconfigured, oneLine(err.Error()), w.now)
		return w.now.Add(misconfiguredRecheck), nil
	}
	if run.book, err = r.Ledger.Load(ctx, ledgerOwner(obj)); err != nil {
		return r.ledgerRefused(obj, err, w.now)
	}
	late := run.rollOver()
	if err := r.sendLate(ctx, run, late); err != nil {
		return time.Time{}, err
	}
	run.owners = r.Owners.Lookup(key, run.start)
	expired, apps := run.plan(w.settings)
	if err := r.readOwners(ctx, w, run, expired, apps); err != nil {
		return time.Time{}, err
	}
	if err := r.sendDigests(ctx, run, expired, apps); err != nil {
		return time.Time{}, err
	}
	return run.next, nil
}

// ledgerRefused reports a ledger that cannot be read: a ConfigMap of its name the watch does not
// own, or the API server failing.
func (r *CredentialWatchReconciler) ledgerRefused(obj *v1alpha1.CredentialWatch, err error, now time.Time) (time.Time, error) {
	var foreign *ledger.ForeignError
	if !errors.As(err, &foreign) {
		return time.Time{}, err
	}
	if c := condition(obj, v1alpha1.ConditionAlertsDelivered); c.Message != foreign.Error() {
		r.Recorder.Event(obj, corev1.EventTypeWarning, eventLedgerRefused, foreign.Error())
	}
	setCondition(obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonDeliveryFailed, foreign.Error(), now)
	return now.Add(misconfiguredRecheck), nil
}

// rollOver starts the status of a new period, and returns the last period's status when its
// digests did not all go out.
func (run *digestRun) rollOver() *v1alpha1.DigestsStatus {
	st := run.obj.Status.OwnerDigests
	if st == nil {
		st = &v1alpha1.DigestsStatus{Since: metav1.NewTime(run.now.Truncate(time.Second)), Period: metav1.NewTime(run.start)}
	}
	var late *v1alpha1.DigestsStatus
	if !st.Period.Equal(&metav1.Time{Time: run.start}) {
		if !st.Period.Before(&st.Since) && (st.Sent < st.Recipients || st.OwnersUnread > 0) {
			late = st.DeepCopy()
		}
		st = &v1alpha1.DigestsStatus{Since: st.Since, Period: metav1.NewTime(run.start)}
	}
	st.NextPeriod = metav1.NewTime(run.next)
	run.obj.Status.OwnerDigests = st
	run.st = st
	return late
}

// due reports whether the period's digests go out: not those of a period under way when the
// watch first had ownerDigests.
func (run *digestRun) due() bool { return !run.start.Before(run.st.Since.Time) }

// plan lists the credentials that expired this period, and the applications the period's digests
// list; none once every digest went.
func (run *digestRun) plan(s settings) ([]v1alpha1.Credential, []policy.DigestApp) {
	since := policy.Latest(run.start, run.st.Since.Time)
	expired := policy.ExpiredBetween(run.found.Credentials, run.found.OptedOut, since, run.now)
	if !run.due() || (run.st.Recipients > 0 && run.st.Sent == run.st.Recipients) {
		return expired, nil
	}
	within := s.thresholds.Warning
	if run.spec.Within != "" {
		if d, err := run.spec.Within.Parse(); err == nil {
			within = d
		}
	}
	return expired, policy.DigestApps(policy.DigestInputs{All: run.found.Credentials, SAML: run.found.SAML, OptedOut: run.found.OptedOut,
		Thresholds: s.thresholds, Hygiene: s.hygiene, Within: within, Since: run.last, Start: run.start, Now: run.now})
}

// unread lists the object IDs whose owners the messages need and this period has not read.
func (run *digestRun) unread(expired []v1alpha1.Credential, apps []policy.DigestApp) []string {
	_, out := policy.DigestRecipients(apps, run.owners)
	for _, c := range expired {
		if c.AppObjectID != "" {
			if _, known := run.owners(c.AppObjectID); !known {
				out = append(out, c.AppObjectID)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// readOwners reads the owners the messages need, a thousand applications a reconcile at most,
// through the watch's identity, which must allow ReadOwners in the tenant.
func (r *CredentialWatchReconciler) readOwners(ctx context.Context, w *watchState, run *digestRun, expired []v1alpha1.Credential, apps []policy.DigestApp) error {
	unread := run.unread(expired, apps)
	run.st.OwnersUnread = int32(len(unread))
	if len(unread) == 0 {
		return nil
	}
	g, err := r.grantOnce(ctx, w)
	if err != nil {
		return nil // the check says why
	}
	tenant := run.obj.Spec.Target.TenantID()
	if err := g.allow(access.Request{Operation: v1alpha1.OperationReadOwners, TenantID: tenant}); err != nil {
		run.refuse(r, digestOwnersRefusedMessage+": "+err.Error())
		return nil
	}
	id, err := r.signIns().identity(ctx, g.id, tenant)
	if err != nil {
		return nil
	}
	tc, err := r.Azure.Tenant(id)
	if err != nil {
		return err
	}
	batch := unread[:min(len(unread), digestOwnerReads)]
	var failed error
	for i, read := range tc.ReadOwners(ctx, batch) {
		switch kind := azerr.KindOf(read.Err); {
		case read.Err == nil:
			r.Owners.Put(run.key, run.start, batch[i], mailsOf(read.Owners))
		case kind == azerr.KindNotFound:
			r.Owners.Put(run.key, run.start, batch[i], nil) // gone since the scan: the fallback hears
		default:
			failed = read.Err
		}
	}
	run.st.OwnersUnread = int32(len(run.unread(expired, apps)))
	if failed != nil {
		run.refuse(r, "reading the owners of its applications failed, retried with backoff: "+oneLine(failed.Error()))
	}
	if run.st.OwnersUnread > 0 {
		run.next = policy.Earliest(run.next, run.now.Add(digestsAgain))
	}
	return nil
}

// refuse says in status, condition and one event what holds the digests up.
func (run *digestRun) refuse(r *CredentialWatchReconciler, msg string) {
	if run.st.Message != msg {
		r.Recorder.Event(run.obj, corev1.EventTypeWarning, eventOwnersUnread, msg)
	}
	run.st.Message = msg
	setCondition(run.obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonDeliveryFailed, "Owner digests: "+msg, run.now)
	run.next = policy.Earliest(run.next, run.now.Add(misconfiguredRecheck))
}

// mailsOf are the addresses of the owners with a mailbox: a service principal has none, and a
// user's user principal name need not receive mail.
func mailsOf(owners []graph.Owner) []string {
	var out []string
	for _, o := range owners {
		if !o.ServicePrincipal && o.Mail != "" {
			out = append(out, o.Mail)
		}
	}
	return out
}

// messages are what may go this reconcile: a message for each expired credential whose owners are
// known, then, once every owner is read, a digest for each recipient.
func (run *digestRun) messages(w *v1alpha1.CredentialWatch, expired []v1alpha1.Credential, apps []policy.DigestApp, h policy.Hygiene) (out []message, nowhere int) {
	fallback := recipientsOf(run.spec.Email.Fallback)
	for _, c := range expired {
		to := fallback
		if c.AppObjectID != "" {
			mails, known := run.owners(c.AppObjectID)
			if !known {
				continue
			}
			if len(mails) > 0 {
				to = mails
			}
		}
		if len(to) == 0 {
			nowhere++
			continue
		}
		out = append(out, message{key: policy.ExpiredKey(c), to: to, mail: func() (email.Mail, error) {
			return email.AlertMail(compose.ExpiredNotice(w, c, run.now))
		}})
	}
	rcpt, unread := policy.DigestRecipients(apps, run.owners)
	if len(unread) > 0 || len(apps) == 0 {
		return out, nowhere
	}
	period := compose.DigestPeriod{Start: run.start, Schedule: run.spec.Schedule, OptOutTag: run.spec.OptOutTag}
	names := make([]string, 0, len(rcpt))
	for name := range rcpt {
		names = append(names, name)
	}
	slices.Sort(names)
	run.st.Recipients = 0
	for _, name := range names {
		to := []string{name}
		if name == policy.Fallback {
			if to = fallback; len(to) == 0 {
				nowhere += len(rcpt[name])
				continue
			}
		}
		run.st.Recipients++
		listed := make([]policy.DigestApp, 0, len(rcpt[name]))
		for _, i := range rcpt[name] {
			listed = append(listed, apps[i])
		}
		out = append(out, message{key: policy.DigestKey(run.start, name), to: to, mail: func() (email.Mail, error) {
			return email.DigestMail(compose.Digest(w, name, listed, period, h))
		}})
	}
	return out, nowhere
}

func recipientsOf(to []string) []string {
	var out []string
	for _, a := range to {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// sendDigests sends what is due, within the pace and the reconcile's budget, and counts the
// period's digests in status.
func (r *CredentialWatchReconciler) sendDigests(ctx context.Context, run *digestRun, expired []v1alpha1.Credential, apps []policy.DigestApp) error {
	msgs, nowhere := run.messages(run.obj, expired, apps, r.hygieneOf(run.obj))
	var due []message
	for _, m := range msgs {
		if entry, ok := run.book.Get(m.key); ok {
			if d := policy.DeliveryOf(entry); d.Sent || run.now.Before(d.Next) {
				if !d.Sent {
					run.next = policy.Earliest(run.next, d.Next)
				}
				continue
			}
		}
		due = append(due, m)
	}
	sent, err := r.deliverDigests(ctx, run, due)
	if err != nil {
		return err
	}
	run.count(msgs, expired)
	if sent.digests+sent.notices > 0 {
		r.Recorder.Eventf(run.obj, corev1.EventTypeNormal, eventDigestsSent, "Sent %d owner digests (%d of %d this period) and %d expiry messages",
			sent.digests, run.st.Sent, run.st.Recipients, sent.notices)
	}
	switch {
	case run.st.Failing > 0:
		setCondition(run.obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonDeliveryFailed,
			fmt.Sprintf("Owner digests: %d of %d sent this period, %d failing and retried with backoff: %s", run.st.Sent, run.st.Recipients, run.st.Failing, sent.lastError), run.now)
	case run.st.OwnersUnread == 0 && run.st.Message == "" || run.st.Message == digestNoRecipientMessage:
		msg := fmt.Sprintf("Owner digests: %d of %d sent for the period that began %s; the next period begins %s",
			run.st.Sent, run.st.Recipients, run.start.UTC().Format(time.RFC3339), run.next.UTC().Format(time.RFC3339))
		setCondition(run.obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, v1alpha1.ReasonDelivered, msg, run.now)
	}
	if nowhere > 0 {
		run.st.Message = fmt.Sprintf("%d %s", nowhere, digestNoRecipientMessage)
	}
	return nil
}

// hygieneOf is the watch's hygiene policy; its spec was parsed before the steps ran.
func (r *CredentialWatchReconciler) hygieneOf(obj *v1alpha1.CredentialWatch) policy.Hygiene {
	h, _ := policy.HygieneOf(obj.Spec.Hygiene)
	return h
}

// count sets the period's counts from the ledger: digests sent and failing, expiry messages sent.
func (run *digestRun) count(msgs []message, expired []v1alpha1.Credential) {
	notices := map[string]bool{}
	for _, c := range expired {
		notices[policy.ExpiredKey(c)] = true
	}
	run.st.Sent, run.st.Failing, run.st.ExpiredNotices = 0, 0, 0
	for _, m := range msgs {
		entry, ok := run.book.Get(m.key)
		if !ok {
			continue
		}
		d := policy.DeliveryOf(entry)
		switch {
		case notices[m.key] && d.Sent:
			run.st.ExpiredNotices++
		case notices[m.key]:
		case d.Sent:
			run.st.Sent++
		default:
			run.st.Failing++
		}
	}
}

type sentCounts struct {
	digests, notices int
	lastError        string
}

// deliverDigests claims the messages the pace lets go, with the ledger's stale entries dropped in
// the same write, sends them, and marks those that fail with their next attempt.
func (r *CredentialWatchReconciler) deliverDigests(ctx context.Context, run *digestRun, due []message) (sentCounts, error) {
	var counts sentCounts
	changes := map[string]*string{}
	var keys []string
	run.book.Entries(func(k, _ string) { keys = append(keys, k) })
	for _, k := range policy.Stale(keys, run.start, run.last, policy.ExpiredBetween(run.found.Credentials, nil, policy.Latest(run.start, run.st.Since.Time), run.now)) {
		changes[k] = nil
	}
	var batch []message
	var reserved []time.Time
	for _, m := range due {
		if len(batch) == digestSendsPerReconcile {
			run.next = policy.Earliest(run.next, run.now.Add(digestsAgain))
			break
		}
		ok, when := r.DigestPace.Take(run.now)
		if !ok {
			run.next = policy.Earliest(run.next, when)
			break
		}
		reserved = append(reserved, run.now)
		batch = append(batch, m)
		sent := policy.Delivery{Sent: true}.String()
		changes[m.key] = &sent
	}
	if len(changes) == 0 {
		return counts, nil
	}
	previous := map[string]policy.Delivery{}
	for _, m := range batch {
		if entry, ok := run.book.Get(m.key); ok {
			previous[m.key] = policy.DeliveryOf(entry)
		}
	}
	if _, err := r.Ledger.Write(ctx, run.book, changes); err != nil {
		for _, at := range reserved {
			r.DigestPace.Return(at)
		}
		return counts, fmt.Errorf("claiming owner digests in the watch's ledger before sending them: %w", err)
	}
	failures := map[string]*string{}
	budget, cancel := context.WithTimeout(ctx, digestSendBudget)
	defer cancel()
	inARow := 0
	for _, m := range batch {
		var err error
		if inARow >= digestFailuresInARow || budget.Err() != nil {
			err = errors.New("not tried: the relay failed the messages before it, or the reconcile's time for sending ran out")
		} else {
			err = r.sendMessage(budget, ctx, run.relay, m)
		}
		if err == nil {
			inARow = 0
			if strings.HasPrefix(m.key, "x.") {
				counts.notices++
			} else {
				counts.digests++
			}
			continue
		}
		inARow++
		counts.lastError = oneLine(err.Error())
		d := previous[m.key].Failed(run.now, notify.RetryAfterOf(err))
		v := d.String()
		failures[m.key] = &v
		run.next = policy.Earliest(run.next, d.Next)
	}
	if len(failures) > 0 {
		r.Recorder.Eventf(run.obj, corev1.EventTypeWarning, eventDigestDeliveryFailed, "%d owner messages failed, each retried with backoff: %s", len(failures), counts.lastError)
		if _, err := r.Ledger.Write(ctx, run.book, failures); err != nil {
			return counts, fmt.Errorf("marking failed owner digests for another attempt: %w", err)
		}
	}
	return counts, nil
}

// sendMessage renders and sends m; claimed, it is sent even while the operator stops.
func (r *CredentialWatchReconciler) sendMessage(budget, ctx context.Context, relay *email.Channel, m message) error {
	mail, err := m.mail()
	if err != nil {
		return err
	}
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	stop := context.AfterFunc(budget, cancel)
	defer stop()
	return relay.SendTo(sendCtx, m.to, mail)
}

// sendLate tells the fallback, once, that the last period's digests did not all go out.
func (r *CredentialWatchReconciler) sendLate(ctx context.Context, run *digestRun, late *v1alpha1.DigestsStatus) error {
	if late == nil {
		return nil
	}
	msg := compose.DigestsLate(run.obj, late.Period.Time, late.Sent, late.Recipients, late.OwnersUnread, run.now)
	r.Recorder.Event(run.obj, corev1.EventTypeWarning, eventDigestsLate, msg.Problem)
	to := recipientsOf(run.spec.Email.Fallback)
	key := policy.OverrunKey(late.Period.Time)
	if _, done := run.book.Get(key); done || len(to) == 0 {
		return nil
	}
	sent := policy.Delivery{Sent: true}.String()
	if _, err := r.Ledger.Write(ctx, run.book, map[string]*string{key: &sent}); err != nil {
		return fmt.Errorf("claiming the late-digests alert in the watch's ledger: %w", err)
	}
	err := r.sendMessage(ctx, ctx, run.relay, message{key: key, to: to, mail: func() (email.Mail, error) { return email.AlertMail(msg) }})
	if err != nil {
		// One alert, tried once: the period it is about is over, and its events say the same.
		r.Recorder.Eventf(run.obj, corev1.EventTypeWarning, eventDigestDeliveryFailed, "The alert that the last period's digests were late failed: %v", err)
	}
	return nil
}
