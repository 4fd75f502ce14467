package serviceprincipal

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// EventCredentialAdded tells of a credential that appeared on a watched application, added by
// something other than credwatch's rotation.
const EventCredentialAdded = "CredentialAdded"

// markAdded marks the credentials of obj's status that before, its last check of the same
// application (or, at its first, the last check of any watch: Seen), did not hold and
// credwatch's rotation did not add (policy.MarkAdded), says who added them where the identity
// may read the directory audit log, and tells of each in an event, at most
// target.MaxStateEvents, and of those no other watch's check claimed first to Added: none as well,
// so that the tenant's count starts at zero. Every watch that marks a credential tells its own
// namespace: a check another namespace makes first must not take the event away.
func (k Kind) markAdded(ctx context.Context, obj *v1alpha1.CredentialWatch, f Found, before []v1alpha1.Credential, first bool, now time.Time) {
	st := &obj.Status
	own := func(c v1alpha1.Credential) bool {
		if k.Own == nil {
			return false
		}
		// A failed look-up counts it: a false alarm costs less than a missed intrusion.
		ok, err := k.Own.OwnSecret(ctx, obj.Spec.Target.TenantID(), f.AppID, c.DisplayName)
		return err == nil && ok
	}
	tenant := obj.Spec.Target.TenantID()
	if seen, ok := k.Seen.Before(tenant, f.ID.ClientID, f.AppID); ok && first {
		// Another watch, or this one before it was created again, checked the application.
		before, first = seen, false
	}
	added := policy.MarkAdded(st.Credentials, before, first, st.Rotation, st.LastRotation, own, metav1.NewTime(now))
	claimed := k.Seen.Claim(tenant, f.ID.ClientID, f.AppID, st.Credentials, added, now)
	k.whoAdded(ctx, obj, f, now)
	if k.Added != nil {
		k.Added(tenant, len(claimed))
	}
	for i, c := range added {
		switch {
		case i == target.MaxStateEvents:
			k.Events.Eventf(obj, corev1.EventTypeWarning, EventCredentialAdded, "%d more credentials were added; status.credentials marks each with addedTime", len(added)-i)
		case i < target.MaxStateEvents:
			c = st.Credentials[slices.IndexFunc(st.Credentials, func(d v1alpha1.Credential) bool {
				return d.KeyID == c.KeyID && d.Source == c.Source && d.Type == c.Type
			})]
			k.Events.Event(obj, corev1.EventTypeWarning, EventCredentialAdded, AddedMessage(st.ServicePrincipal, c))
		}
	}
}

// OwnSecrets tells the secrets other watches' rotations created by their names; the rotation
// pacing records know them (pacing.Store).
type OwnSecrets interface {
	OwnSecret(ctx context.Context, tenantID, appID, displayName string) (bool, error)
}

// Who added a credential, when the audit log cannot say. Each is looked for again at the checks
// of the day after the credential was marked: the log trails, a read may fail for a while, and
// an admin may allow ReadAuditLog meanwhile.
const (
	notYetLogged    = "not in the directory audit log yet (it trails by minutes); credwatch looks again at the next checks for a day"
	auditNotAllowed = "credwatch cannot tell who: the identity does not allow ReadAuditLog (Graph permission AuditLog.Read.All)"
	auditFailed     = "credwatch cannot tell who yet: reading the directory audit log failed: "
)

// lookAgainFor is how long after a credential was marked an answer that is no answer is asked
// again.
const lookAgainFor = 24 * time.Hour

// auditLookups bounds the audit log reads of one check.
const auditLookups = 5

// whoAdded fills AddedBy of the credentials marked added that do not say yet, or that the audit
// log did not show yet within a day of their marking, from the directory audit log.
func (k Kind) whoAdded(ctx context.Context, obj *v1alpha1.CredentialWatch, f Found, now time.Time) {
	st := &obj.Status
	lookups := 0
	for i := range st.Credentials {
		c := &st.Credentials[i]
		if c.AddedTime == nil || (c.AddedBy != "" && (found(c.AddedBy) || now.Sub(c.AddedTime.Time) > lookAgainFor)) {
			continue
		}
		if err := f.Grant.Allow(access.Request{Operation: v1alpha1.OperationReadAuditLog, TenantID: f.ID.TenantID, AppID: f.AppID}); err != nil {
			c.AddedBy = auditNotAllowed
			continue
		}
		if lookups == auditLookups {
			return
		}
		lookups++
		c.AddedBy = k.lookUp(ctx, st.ServicePrincipal, f, *c)
	}
}

// lookUp says who added c, as the directory audit log has it.
func (k Kind) lookUp(ctx context.Context, sp *v1alpha1.ServicePrincipalStatus, f Found, c v1alpha1.Credential) string {
	objectID := sp.ApplicationObjectID
	if c.Source == v1alpha1.SourceServicePrincipal {
		objectID = sp.ServicePrincipalObjectID
	}
	// Not from the credential's start, which whoever added it chose.
	since := c.AddedTime.Add(-30 * 24 * time.Hour)
	var audits []graph.Audit
	app, err := k.Azure.Application(f.ID, graph.AppRef{AppID: sp.AppID, ObjectID: sp.ApplicationObjectID})
	if err == nil {
		audits, err = app.ReadCredentialAudits(ctx, objectID, since)
	}
	if err != nil {
		return auditFailed + err.Error()
	}
	// The change that added the keyId: the earliest whose keys after it hold it and before it did
	// not. A later change lists every key of the object, the added one among them.
	var first *graph.Audit
	for i := range audits {
		if a := &audits[i]; slices.Contains(a.KeyIDs, strings.ToLower(c.KeyID)) && (first == nil || a.Time.Before(first.Time)) {
			first = a
		}
	}
	if first == nil {
		return notYetLogged
	}
	// Who, not from where: status, events and alerts are read by the watch's namespace and
	// channels, and an administrator's address is not theirs to know.
	who := "application " + first.App
	if first.User != "" {
		who = "user " + first.User
	}
	return fmt.Sprintf("%s at %s (%s)", who, first.Time.UTC().Format(time.RFC3339), first.Activity)
}

// found reports whether addedBy names who added the credential, rather than why it cannot.
func found(addedBy string) bool {
	return strings.HasPrefix(addedBy, "user ") || strings.HasPrefix(addedBy, "application ")
}

// AddedMessage tells of c, added to the application sp names by something other than credwatch.
func AddedMessage(sp *v1alpha1.ServicePrincipalStatus, c v1alpha1.Credential) string {
	what := "Certificate"
	if c.Type == v1alpha1.CredentialTypePassword {
		what = "Secret"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q (keyId %s", what, c.DisplayName, c.KeyID)
	if c.Hint != "" {
		fmt.Fprintf(&b, ", hint %s", c.Hint)
	}
	fmt.Fprintf(&b, ", on the %s object) appeared on %q (appId %s) at %s, added by something other than credwatch", c.Source, sp.DisplayName, sp.AppID,
		c.AddedTime.UTC().Format(time.RFC3339))
	if c.StartTime != nil {
		fmt.Fprintf(&b, "; valid from %s", c.StartTime.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, " until %s. Added by: %s. If nobody here added it, remove it with: %s",
		c.EndTime.UTC().Format(time.RFC3339), addedBy(c), compose.DeleteCommand(sp.AppID, c))
	return b.String()
}

// addedBy is who added c, as far as credwatch knows.
func addedBy(c v1alpha1.Credential) string {
	if c.AddedBy == "" {
		return "see the directory audit log (activity \"Update application – Certificates and secrets management\")"
	}
	return c.AddedBy
}
