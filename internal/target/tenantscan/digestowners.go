package tenantscan

import (
	"context"
	"errors"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// bindOwners sets how the run looks owners up: as read this period, except that the owners of an
// application the identity may not read owners of are never mailed (its lines go to the
// fallback), nor, past the period's deadline, owners that could not be read.
func (run *digestRun) bindOwners(s Scan, g access.Grant, expired []v1alpha1.Credential, apps []DigestApp) {
	tenant := run.obj.Spec.Target.TenantID()
	denied := map[string]bool{}
	judge := func(appID, objectID string) {
		if _, seen := denied[objectID]; !seen && objectID != "" {
			denied[objectID] = g.Allow(access.Request{Operation: v1alpha1.OperationReadOwners, TenantID: tenant, AppID: appID}) != nil
		}
	}
	for _, a := range apps {
		judge(a.AppID, a.ObjectID)
	}
	for _, c := range expired {
		judge(c.AppID, c.AppObjectID)
	}
	lookup := s.Digests.Lookup(run.key, run.start)
	past := !run.now.Before(run.start.Add(digestOwnersDeadline))
	run.owners = func(objectID string) ([]string, bool) {
		if denied[objectID] {
			return nil, true
		}
		mails, known := lookup(objectID)
		// Owners that could not be read by the deadline go to the fallback; owners not read yet
		// (a restart) are read.
		first := s.Digests.FailedSince(run.key, run.start, objectID)
		return mails, known || (past && !first.IsZero() && run.now.Sub(first) >= digestReadsFailFor)
	}
	for _, d := range denied {
		if d {
			run.denied++
		}
	}
}

// unread lists the object IDs whose owners the messages need and this period has not read.
func (run *digestRun) unread(expired []v1alpha1.Credential, apps []DigestApp) []string {
	_, out := DigestRecipients(apps, run.owners)
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
// through the watch's identity.
func (s Scan) readOwners(ctx context.Context, owners Owners, g access.Grant, run *digestRun, expired []v1alpha1.Credential, apps []DigestApp) error {
	unread := run.unread(expired, apps)
	run.st.OwnersUnread = int32(len(unread))
	if len(unread) == 0 {
		return nil
	}
	tc, err := owners.Tenant(ctx, g)
	if err != nil || tc == nil {
		return err // none: the check says why
	}
	batch := unread[:min(len(unread), digestOwnerReads)]
	var failed error
	for i, read := range tc.ReadOwners(ctx, batch) {
		switch kind := azerr.KindOf(read.Err); {
		case read.Err == nil:
			s.Digests.Put(run.key, run.start, batch[i], mailsOf(read.Owners))
		case kind == azerr.KindNotFound:
			s.Digests.Put(run.key, run.start, batch[i], nil) // gone since the scan: the fallback hears
		default:
			s.Digests.Failed(run.key, run.start, batch[i], run.now)
			failed = read.Err
		}
	}
	run.st.OwnersUnread = int32(len(run.unread(expired, apps)))
	switch {
	case failed != nil:
		// Throttled or refused: back off, as Graph asks, rather than come back at once.
		run.refuse(s, "reading the owners of its applications failed, retried with backoff: "+redactAddresses(target.OneLine(failed.Error())))
		wait := time.Minute
		var ae *azerr.Error
		if errors.As(failed, &ae) {
			wait = max(wait, ae.RetryAfter)
		}
		run.next = policy.Earliest(run.st.NextPeriod.Time, run.now.Add(wait))
	case run.st.OwnersUnread > 0:
		run.next = policy.Earliest(run.next, run.now.Add(digestsAgain))
	}
	return nil
}

// refuse says in status, condition and one event what holds the digests up.
func (run *digestRun) refuse(s Scan, msg string) {
	if run.prevMessage != msg {
		s.Events.Event(run.obj, corev1.EventTypeWarning, eventOwnersUnread, msg)
	}
	run.st.Message = msg
	target.SetCondition(run.obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonDeliveryFailed, "Owner digests: "+msg, run.now)
	run.next = policy.Earliest(run.next, run.now.Add(time.Minute))
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
