package tenantscan

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/ledger"
	"github.com/credwatch/credwatch/internal/notify/email"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// digestOwnerReads bounds the applications whose owners one reconcile reads: fifty batches.
const digestOwnerReads = 1000

// digestsAgain is how soon a tenant scan comes back for the owners or messages one reconcile
// left: at once, since the limiter and the pace set the rate, not the queue.
const digestsAgain = time.Second

// digestSendsPerReconcile and digestSendBudget bound what one reconcile sends, and for how long
// it holds its worker: the rest go at the next.
const (
	digestSendsPerReconcile = 100
	digestSendBudget        = time.Minute
	// digestFailuresInARow stops a reconcile's sending: the relay is down, not one mailbox.
	digestFailuresInARow = 3
)

const (
	eventDigestsSent          = "DigestsSent"
	eventDigestDeliveryFailed = "DigestDeliveryFailed"
	eventDigestsLate          = "DigestsLate"
	eventOwnersUnread         = "OwnersUnread"
	digestNoRecipientMessage  = "applications have no owner with a mailbox and ownerDigests.email.fallback is empty: their lines go nowhere"
	digestDeniedMessage       = "applications' owners the identity may not read (ReadOwners in allow.operations, the application in allow.applications): their lines go to the fallback"
)

// digestOwnersDeadline is how long into a period the digests wait for owners that cannot be
// read: after it, those applications' lines go to the fallback and the rest to their owners.
const digestOwnersDeadline = 2 * time.Hour

// digestReadsFailFor is how long an application's owners must have failed to be read before,
// past the deadline, its lines go to the fallback: one throttled batch after a restart is not it.
const digestReadsFailFor = 15 * time.Minute

// digestRun is one reconcile's work on a tenant scan's owner digests.
type digestRun struct {
	obj   *v1alpha1.CredentialWatch
	spec  *v1alpha1.OwnerDigests
	found Found
	now   time.Time
	key   types.NamespacedName
	st    *v1alpha1.DigestsStatus
	// prevMessage is what status said held the digests up before this reconcile.
	prevMessage string
	start, last time.Time
	// owners looks up the owners read this period, as the identity lets them be mailed.
	owners OwnerMails
	book   *ledger.Book
	relay  *email.Channel
	next   time.Time
	// denied counts the applications whose owners the identity may not read.
	denied int
}

// message is one mail a digest run may send: its ledger keys, recipients and content.
type message struct {
	// keys are the ledger's entries it settles: a digest's, or each expired credential's.
	keys []string
	// recipient is the owner's address, or Fallback; to is where it goes.
	recipient string
	to        []string
	notice    bool
	mail      func() (email.Mail, error)
}

// Relays builds the mail relay a tenant scan's owner digests go out through.
type Relays interface {
	Digests(ctx context.Context, obj *v1alpha1.CredentialWatch, e *v1alpha1.DigestEmail) (*email.Channel, error)
}

// Owners is what reading the owners of a tenant's applications takes, bound by the reconciler to
// the watch: its identity, and the tenant as that identity signs in to it.
type Owners struct {
	// Grant is the watch's identity; an error means the check says why nobody is mailed.
	Grant func() (access.Grant, error)
	// Tenant signs in as g's identity; nil with no error when it cannot, which the check says.
	Tenant func(ctx context.Context, g access.Grant) (graph.TenantClient, error)
}

// Digest mails each application's owners of a tenant scan, once a period, one digest of what
// needs attention, and a message at once when credentials of theirs expire in between. What went
// to whom is in the watch's ledger (ConfigMaps it owns), claimed before sending and marked
// failed, with its next attempt, when a send fails: a restart or a new leader sends nothing
// twice, and a failing mailbox holds up no other. It returns when the digests next need
// attention.
func (s Scan) Digest(ctx context.Context, obj *v1alpha1.CredentialWatch, owners Owners, t policy.Thresholds, h policy.Hygiene, now time.Time) (time.Time, error) {
	key := target.KeyOf(obj)
	spec := obj.Spec.Target.TenantScan.OwnerDigests
	found, ok := s.Store.Get(key)
	if !ok || obj.Status.LastCheckTime == nil {
		return time.Time{}, nil // what there is to tell comes with the scan
	}
	run := &digestRun{obj: obj, spec: spec, found: found, now: now, key: key}
	schedule, err := ScheduleOf(run.spec.Schedule)
	if err != nil {
		target.SetCondition(obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonChannelMisconfigured, "ownerDigests."+err.Error(), now)
		return time.Time{}, nil
	}
	run.start, run.next = PeriodOf(schedule, now)
	run.last, _ = PeriodOf(schedule, run.start.Add(-time.Second))
	if run.relay, err = s.Relays.Digests(ctx, obj, &run.spec.Email); err != nil {
		target.SetCondition(obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonChannelMisconfigured, target.OneLine(err.Error()), now)
		return now.Add(target.MisconfiguredRecheck), nil
	}
	if run.book, err = s.Ledger.Load(ctx, target.LedgerOwner(obj)); err != nil {
		return target.LedgerRefused(obj, s.Events, err, now)
	}
	late := run.rollOver()
	if err := s.sendLate(ctx, run, late); err != nil {
		return target.LedgerRefused(obj, s.Events, err, now)
	}
	g, err := owners.Grant()
	if err != nil {
		return time.Time{}, nil // the check says why; nobody is mailed meanwhile
	}
	h.SignInsKnown = target.SignInsRead(obj)
	expired, apps := run.plan(t, h)
	run.bindOwners(s, g, expired, apps)
	if err := s.readOwners(ctx, owners, g, run, expired, apps); err != nil {
		return time.Time{}, err
	}
	if err := s.sendDigests(ctx, run, expired, apps, h); err != nil {
		return target.LedgerRefused(obj, s.Events, err, now)
	}
	return run.next, nil
}

// rollOver starts the status of a new period, and returns the last period's status when its
// digests did not all go out. A schedule that changed starts afresh, as a new watch does: the
// period under way gets no digest, so that editing the schedule sends nothing again.
func (run *digestRun) rollOver() *v1alpha1.DigestsStatus {
	schedule := ScheduleText(run.spec.Schedule)
	st := run.obj.Status.OwnerDigests
	switch {
	case st == nil:
		st = &v1alpha1.DigestsStatus{Since: metav1.NewTime(run.now.Truncate(time.Second)), Period: metav1.NewTime(run.start), Schedule: schedule}
	case st.Schedule != schedule:
		// Nor does a period that begins more than half a period before the one the old schedule
		// had next: an edit to come an hour earlier keeps its next digest, one to come sooner
		// does not (and the twenty hours between two digests hold either way).
		half := run.next.Sub(run.start) / 2
		since := metav1.NewTime(policy.Latest(run.now.Truncate(time.Second), st.NextPeriod.Add(-half)))
		st = &v1alpha1.DigestsStatus{Since: since, Period: metav1.NewTime(run.start), Schedule: schedule}
	}
	var late *v1alpha1.DigestsStatus
	if !st.Period.Equal(&metav1.Time{Time: run.start}) {
		if !st.Period.Before(&st.Since) && (st.Sent < st.Recipients || st.OwnersUnread > 0) {
			late = st.DeepCopy()
		}
		st = &v1alpha1.DigestsStatus{Since: st.Since, Period: metav1.NewTime(run.start), Schedule: schedule}
	}
	st.NextPeriod = metav1.NewTime(run.next)
	run.prevMessage, st.Message = st.Message, ""
	run.obj.Status.OwnerDigests = st
	run.st = st
	return late
}

// due reports whether the period's digests go out: not those of a period under way when the
// watch first had ownerDigests, or its schedule last changed.
func (run *digestRun) due() bool { return !run.start.Before(run.st.Since.Time) }

// plan lists the credentials that expired this period, and the applications the period's digests
// list; none once every digest went.
func (run *digestRun) plan(t policy.Thresholds, h policy.Hygiene) ([]v1alpha1.Credential, []DigestApp) {
	expired := ExpiredBetween(run.found.Credentials, run.found.OptedOut, run.noticeSince(), run.now)
	if !run.due() || (run.st.Recipients > 0 && run.st.Sent == run.st.Recipients) {
		return expired, nil
	}
	within := t.Warning
	if run.spec.Within != "" {
		if d, err := run.spec.Within.Parse(); err == nil {
			within = d
		}
	}
	return expired, DigestApps(DigestInputs{All: run.found.Credentials, SAML: run.found.SAML, OptedOut: run.found.OptedOut,
		Thresholds: t, Hygiene: h, Within: within, Since: run.last, Start: run.start, Now: run.now})
}

// noticeSince is when the credentials whose expiry is news began to expire: the period's start,
// or when the digests were set up.
func (run *digestRun) noticeSince() time.Time { return policy.Latest(run.start, run.st.Since.Time) }

// messages are what may go this reconcile: one message to each recipient of the credentials that
// expired and were not told of, then, once every owner is read, a digest for each recipient.
func (run *digestRun) messages(s Scan, expired []v1alpha1.Credential, apps []DigestApp, h policy.Hygiene) (out []message, nowhere int, built bool) {
	period := Period{Start: run.start, Schedule: run.spec.Schedule, OptOutTag: run.spec.OptOutTag}
	out, nowhere = run.notices(s, expired, period)
	rcpt, unread := DigestRecipients(apps, run.owners)
	if len(unread) > 0 || len(apps) == 0 {
		return out, nowhere, false
	}
	fallback := recipientsOf(run.spec.Email.Fallback)
	names := slices.Sorted(maps.Keys(rcpt))
	run.st.Recipients = 0
	lastDigests := LastDigests(run.book.Entries)
	for _, name := range names {
		to := []string{name}
		if name == Fallback {
			if to = fallback; len(to) == 0 {
				nowhere += len(rcpt[name])
				continue
			}
		}
		if entry, ok := run.book.Get(DigestKey(run.start, name)); ok && DeliveryOf(entry).Sent {
			run.st.Recipients++
			continue // counted from the ledger
		}
		// An address that had a digest of this tenant within DigestGap (another period's, a
		// schedule before an edit, another watch's) waits, and is not counted: it is not late.
		if last, ok := lastDigests[RecipientHash(name)]; ok && run.now.Before(last.Add(DigestGap)) {
			run.next = policy.Earliest(run.next, last.Add(DigestGap))
			continue
		}
		if ok, when := s.Digests.DigestDue(run.obj.Spec.Target.TenantID(), run.gateKey(name), run.now); !ok {
			run.next = policy.Earliest(run.next, when)
			continue
		}
		run.st.Recipients++
		listed := make([]DigestApp, 0, len(rcpt[name]))
		for _, i := range rcpt[name] {
			listed = append(listed, apps[i])
		}
		out = append(out, message{keys: []string{DigestKey(run.start, name)}, recipient: name, to: to, mail: func() (email.Mail, error) {
			return email.DigestMail(Digest(run.obj, name, listed, period, h))
		}})
	}
	return out, nowhere, true
}

// notices groups the expired credentials by recipient, each told of each once: one message a
// recipient, within the expiry messages an address may get in a day.
func (run *digestRun) notices(s Scan, expired []v1alpha1.Credential, period Period) ([]message, int) {
	fallback := recipientsOf(run.spec.Email.Fallback)
	byRecipient := map[string][]v1alpha1.Credential{}
	nowhere := 0
	for _, c := range expired {
		var names []string
		mails, known := []string(nil), true
		if c.AppObjectID != "" {
			mails, known = run.owners(c.AppObjectID)
		}
		switch {
		case !known:
		case len(mails) > 0:
			for _, m := range mails {
				names = append(names, strings.ToLower(m))
			}
		case len(fallback) > 0:
			names = []string{Fallback}
		default:
			nowhere++
		}
		for _, name := range names {
			k := ExpiredKey(c, name)
			if entry, ok := run.book.Get(k); (ok && DeliveryOf(entry).Sent) || s.Digests.Sent(run.key, run.obj.UID, run.start, k) {
				continue
			}
			byRecipient[name] = append(byRecipient[name], c)
		}
	}
	tenant := run.obj.Spec.Target.TenantID()
	var out []message
	for _, name := range slices.Sorted(maps.Keys(byRecipient)) {
		if ok, when := s.Digests.NoticeDue(tenant, run.gateKey(name), run.now); !ok {
			run.next = policy.Earliest(run.next, when) // the next digest lists them, if it comes first
			continue
		}
		creds := byRecipient[name]
		to := []string{name}
		if name == Fallback {
			to = fallback
		}
		keys := make([]string, 0, len(creds))
		for _, c := range creds {
			keys = append(keys, ExpiredKey(c, name))
		}
		out = append(out, message{keys: keys, recipient: name, to: to, notice: true, mail: func() (email.Mail, error) {
			return email.DigestMail(ExpiredDigest(run.obj, name, creds, period))
		}})
	}
	return out, nowhere
}

// gateKey is the address the operator-wide limits count a recipient under: the fallback is the
// watch's own list of addresses, which two watches of one tenant need not share.
func (run *digestRun) gateKey(recipient string) string {
	if recipient != Fallback {
		return recipient
	}
	to := recipientsOf(run.spec.Email.Fallback)
	for i := range to {
		to[i] = strings.ToLower(to[i])
	}
	slices.Sort(to)
	return strings.Join(to, ",")
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
