// Package serviceprincipal is the servicePrincipal kind of target: one application's
// credentials, on the application object and its service principal, read from Graph, recorded
// in status with its owners, and held to the clock and the watch's hygiene policy. The
// aksCluster kind reads and records its cluster's service principal through it too.
package serviceprincipal

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// Azure is Graph, as a watch's identity sees it.
type Azure interface {
	// Application is app, and its service principal, in id's tenant.
	Application(id azure.Identity, app graph.AppRef) (graph.AppClient, error)
}

// Kind reads and records service principals, one reconcile at a time.
type Kind struct {
	Azure  Azure
	Events target.Events
	// MailsOwners reports whether the watch's alerts mail the application's owners, read with
	// the identity: only then are they read.
	MailsOwners func(*v1alpha1.CredentialWatch, access.Identity) bool
	// OwnerDomains are the domains owners' mail may go to; empty, the tenant's verified domains.
	OwnerDomains []string
	// SignInsUnavailable says why this cloud has no sign-in activity reports; empty in the
	// global cloud, which has them.
	SignInsUnavailable string
	// Reports shares the sign-in reads of every watch; nil, each watch reads for itself (tests).
	Reports *Reports
	// Added counts n credentials added to a watched application by something other than
	// credwatch, by tenant, at every check (n may be 0); nil counts nothing.
	Added func(tenantID string, n int)
	// Own tells other watches' rotations' secrets from others added; nil, only this watch's
	// rotation is known.
	Own OwnSecrets
	// Seen is what every watch's checks found; nil, each watch knows only its own.
	Seen *Seen
}

// Found is what a check read of an application, and who read it: the owners are read as the
// same identity, if it allows that.
type Found struct {
	AppID string
	Snap  graph.Snapshot
	Grant access.Grant
	ID    azure.Identity
}

const (
	eventOwnersUnreadable = "OwnersUnreadable"
	eventOwnersNotMailed  = "OwnersNotMailed"
)

// Read reads the credentials of application appID in tenant as id, which g allows to. ask is
// how the read planner knows the watch; whether it may answer from a listing of the whole
// tenant is decided here.
func (k Kind) Read(ctx context.Context, g access.Grant, id azure.Identity, tenant, appID string, ask graph.Ask) (Found, error) {
	f := Found{AppID: appID, Grant: g, ID: id}
	app, err := k.Azure.Application(id, graph.AppRef{AppID: appID})
	if err != nil {
		return f, err
	}
	// An identity allowed to scan the tenant may read a sweep's watches in one listing of it.
	ask.MayList = g.Allow(access.Request{Operation: v1alpha1.OperationTenantScan, TenantID: tenant}) == nil
	f.Snap, err = app.Check(ctx, ask)
	return f, err
}

// Record puts what a check found into status: the application, its owners when the watch mails
// them, its credentials, and Ready.
func (k Kind) Record(ctx context.Context, obj *v1alpha1.CredentialWatch, f Found, now time.Time) {
	obj.Status.TenantScan, obj.Status.Fleet = nil, nil // a watch that scanned a tenant or a fleet before its spec changed
	snap := f.Snap
	var owners []string
	readFor := ""
	if obj.Status.ServicePrincipal != nil {
		owners, readFor = obj.Status.ServicePrincipal.OwnerEmails, obj.Status.ServicePrincipal.AppID
	}
	obj.Status.ServicePrincipal = &v1alpha1.ServicePrincipalStatus{
		AppID:                    f.AppID,
		DisplayName:              snap.DisplayName,
		ApplicationObjectID:      snap.ApplicationObjectID,
		ServicePrincipalObjectID: snap.ServicePrincipalObjectID,
		SingleSignOnMode:         snap.SingleSignOnMode,
		OwnerEmails:              k.ownerEmails(ctx, obj, f, owners),
	}
	before := obj.Status.Credentials
	obj.Status.Credentials = target.Credentials(snap)
	first := readFor == "" || !strings.EqualFold(readFor, f.AppID)
	if readFor != "" && first {
		// Sign-ins read of another application say nothing of this one's credentials.
		obj.Status.SignInsReadTime, before = nil, nil
		meta.RemoveStatusCondition(&obj.Status.Conditions, v1alpha1.ConditionSignInsRead)
	}
	// What the first check of an application finds was there before credwatch looked.
	k.markAdded(ctx, obj, f, before, first, now)
	k.signIns(ctx, obj, f, before, now)
	target.SetCondition(obj, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked, checkedMessage(snap), now)
	logr.FromContextOrDiscard(ctx).V(1).Info("Read credentials", "credentials", len(snap.Credentials), "nextCheck", obj.Status.NextCheckTime.UTC().Format(time.RFC3339))
}

// ownerEmails reads the application's owners when the watch mails them, keeping what was known
// when they cannot be read: the credentials were read, and that is what the check is for.
func (k Kind) ownerEmails(ctx context.Context, obj *v1alpha1.CredentialWatch, f Found, known []string) []string {
	snap := f.Snap
	if !k.MailsOwners(obj, f.Grant.Identity) || snap.ApplicationObjectID == "" {
		return nil
	}
	if err := f.Grant.Allow(access.Request{Operation: v1alpha1.OperationReadOwners, TenantID: f.ID.TenantID, AppID: snap.AppID}); err != nil {
		// Not allowed any more: what was read while it was is not kept either.
		k.Events.Eventf(obj, corev1.EventTypeWarning, eventOwnersUnreadable, "The application's owners are not read, so they are not mailed: %v", err)
		return nil
	}
	var owners []string
	app, err := k.Azure.Application(f.ID, graph.AppRef{AppID: snap.AppID, ObjectID: snap.ApplicationObjectID})
	if err == nil {
		if owners, err = app.ReadOwnerEmails(ctx); err == nil {
			if owners, err = k.mailable(ctx, obj, app, owners, known); err == nil {
				return owners
			}
			// The domains owners' mail may go to are not known: nobody is mailed, not even
			// whom an earlier version mailed without asking.
			k.Events.Eventf(obj, corev1.EventTypeWarning, eventOwnersUnreadable, "The application's owners are not mailed: %v", err)
			return nil
		}
	}
	logr.FromContextOrDiscard(ctx).Info("Reading the application's owners failed", "error", err.Error())
	k.Events.Eventf(obj, corev1.EventTypeWarning, eventOwnersUnreadable, "Reading the application's owners failed, so they are not mailed: %v", err)
	return known
}

// mailable keeps of owners the addresses in the domains owners' mail may go to: OwnerDomains, or
// the tenant's verified domains (policy.MailableOwners). Those dropped are said in an event when
// what is kept changes from known.
func (k Kind) mailable(ctx context.Context, obj *v1alpha1.CredentialWatch, app graph.AppClient, owners, known []string) ([]string, error) {
	domains, from := k.OwnerDomains, "--owner-mail-domains"
	if len(domains) == 0 {
		var err error
		if domains, err = app.VerifiedDomains(ctx); err != nil {
			return nil, err
		}
		from = "the tenant's verified domains"
	}
	keep, dropped := policy.MailableOwners(owners, domains)
	if dropped > 0 && !slices.Equal(keep, known) {
		k.Events.Eventf(obj, corev1.EventTypeWarning, eventOwnersNotMailed,
			"%d of the application's %d owners are not mailed: a guest, or an address outside %s", dropped, len(owners), from)
	}
	return keep, nil
}

func checkedMessage(snap graph.Snapshot) string {
	var where string
	switch {
	case snap.ApplicationObjectID != "" && snap.ServicePrincipalObjectID != "":
		where = "the application and its service principal"
	case snap.ApplicationObjectID != "":
		where = "the application; the tenant has no service principal for it"
	default:
		where = "the service principal; the application object is not in this tenant, so credentials on it are not seen"
	}
	return fmt.Sprintf("Read %d credentials of %q from %s", len(snap.Credentials), snap.DisplayName, where)
}

// Evaluate holds the credentials status lists to the clock and to the hygiene policy h: their
// states, the summary, Expiring and Expired, an event for each that got worse since before (the
// watch as stored), and status.findings. It returns when the clock alone next changes any of it.
func Evaluate(obj, before *v1alpha1.CredentialWatch, events target.Events, s target.Settings, now time.Time) time.Time {
	st := &obj.Status
	t, h := s.Thresholds, s.Hygiene
	summary := policy.Evaluate(st.Credentials, now, t)
	target.ShowExpiry(obj, before, target.Expiry{Summary: summary, Groups: policy.GroupsOf(st.Credentials), Total: len(st.Credentials)}, events, t, now)
	next := policy.Earliest(summary.NextTransition, summary.NextDisplayChange)
	st.InUse = ""
	if s.Usage.On() {
		next = policy.Earliest(next, policy.MarkInUse(st.Credentials, s.Usage.ActiveWithin, now))
		st.InUse = policy.InUseSummary(st.Credentials)
	}
	if st.LastCheckTime == nil {
		return next
	}
	saml := st.ServicePrincipal != nil && strings.EqualFold(st.ServicePrincipal.SingleSignOnMode, target.SAML)
	// Only sign-ins read tell an unused credential from one whose use nobody asked about.
	h.SignInsKnown = target.SignInsRead(obj)
	f := policy.FindingsOf(st.Credentials, func(string) bool { return saml }, now, h, policy.MaxListedFindings)
	st.Findings = target.FindingsStatus(obj, f, h)
	return policy.Earliest(next, f.NextChange)
}

// WithKnown is ask carrying what obj's status knows of its application, as of its last check:
// the read may then be answered from Graph's changes since.
func WithKnown(ask graph.Ask, obj *v1alpha1.CredentialWatch) graph.Ask {
	ask.Known, ask.KnownAt = known(obj)
	return ask
}

// known is what obj's status knows of its application, nil when it holds no check of the
// application the spec names.
func known(obj *v1alpha1.CredentialWatch) (*graph.Snapshot, time.Time) {
	st := obj.Status
	t := obj.Spec.Target.ServicePrincipal
	if t == nil || st.ServicePrincipal == nil || st.LastCheckTime == nil || !strings.EqualFold(st.ServicePrincipal.AppID, t.ClientID) {
		return nil, time.Time{}
	}
	sp := st.ServicePrincipal
	s := &graph.Snapshot{AppID: strings.ToLower(sp.AppID), DisplayName: sp.DisplayName, ApplicationObjectID: sp.ApplicationObjectID,
		ServicePrincipalObjectID: sp.ServicePrincipalObjectID, SingleSignOnMode: sp.SingleSignOnMode}
	for _, c := range st.Credentials {
		gc := graph.Credential{KeyID: c.KeyID, Type: graph.Type(c.Type), Source: graph.Source(c.Source), DisplayName: c.DisplayName, Hint: c.Hint, End: c.EndTime.Time}
		if c.StartTime != nil {
			gc.Start = c.StartTime.Time
		}
		s.Credentials = append(s.Credentials, gc)
	}
	return s, st.LastCheckTime.Time
}
