package target

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/graph"
)

const eventSignInsUnread = "SignInsUnread"

// SignInsEvery is how often a watch asks for its credentials' sign-ins. Microsoft refreshes the
// report in the background, hours behind, so reading it more often learns nothing, and the
// reports service's budget per tenant is small (5 requests in 10 seconds, Graph's throttling
// limits): an hour between asks, read or refused, leaves it to the others.
const SignInsEvery = time.Hour

// LastSignIns is what Graph's sign-in report says of credentials: when each last signed in, by
// application, object and keyId; those that never did are absent.
type LastSignIns map[string]time.Time

// Add notes one entry of the report. Of two entries of one credential the later counts: a
// credential that signed in is never made to look idle by another entry.
func (l LastSignIns) Add(u graph.KeyUse) {
	key := signInKey(u.AppID, string(u.Source), u.KeyID)
	if !u.LastSignIn.IsZero() && u.LastSignIn.After(l[key]) {
		l[key] = u.LastSignIn
	}
}

// Apply sets each credential's last sign-in from l, and returns how many signed in; a credential
// that does not name its application is appID's.
func (l LastSignIns) Apply(creds []v1alpha1.Credential, appID string) int {
	n := 0
	for i := range creds {
		c := &creds[i]
		c.LastSignIn = nil
		if at, ok := l[signInKey(cmp.Or(c.AppID, appID), string(c.Source), c.KeyID)]; ok {
			t := metav1.NewTime(at)
			c.LastSignIn = &t
			n++
		}
	}
	return n
}

// SignInsRead reports whether obj asks for its credentials' sign-ins and its last read of them
// succeeded: only then does a credential without one tell that nothing signed in with it.
func SignInsRead(obj *v1alpha1.CredentialWatch) bool {
	u := obj.Spec.Usage
	return u != nil && u.SignIns && obj.Status.SignInsReadTime != nil &&
		Condition(obj, v1alpha1.ConditionSignInsRead).Status == metav1.ConditionTrue
}

func signInKey(appID, source, keyID string) string {
	return strings.ToLower(appID) + "/" + source + "/" + strings.ToLower(keyID)
}

// SignInsUnread says on SignInsRead why sign-ins were not read, and by event when the reason is
// new.
func SignInsUnread(obj *v1alpha1.CredentialWatch, events Events, reason, msg string, now time.Time) {
	if c := Condition(obj, v1alpha1.ConditionSignInsRead); c.Reason != reason {
		events.Event(obj, corev1.EventTypeWarning, eventSignInsUnread, msg)
	}
	SetCondition(obj, v1alpha1.ConditionSignInsRead, metav1.ConditionFalse, reason, msg, now)
}

// TenantSignIns is what reading a tenant's sign-in report came to: the last sign-ins, or why there are
// none (Reason and Message, for SignInsRead).
type TenantSignIns struct {
	// Asked is false when the watch does not read sign-ins.
	Asked bool
	Last  LastSignIns
	// Read is false when no request was sent (refused by the identity, or no report here, or
	// read within SignInsEvery: Kept, and what was known stands).
	Read            bool
	Kept            bool
	Reason, Message string
}

// ReadTenantSignIns reads, as spec.usage.signIns asks, when each credential of the tenant last
// signed in: the whole report, page by page, with a check of a tenant scan or a fleet at most
// hourly; held says this process holds what the last check found, sign-ins included. g must allow ReadSignIns; unavailable, when
// set, says why this cloud has no report, and nothing is asked.
func ReadTenantSignIns(ctx context.Context, tc graph.TenantClient, obj *v1alpha1.CredentialWatch, g access.Grant, unavailable string, held bool, now time.Time) TenantSignIns {
	if u := obj.Spec.Usage; u == nil || !u.SignIns {
		return TenantSignIns{}
	}
	out := TenantSignIns{Asked: true}
	if err := g.Allow(access.Request{Operation: v1alpha1.OperationReadSignIns, TenantID: obj.Spec.Target.TenantID()}); err != nil {
		out.Reason, out.Message = v1alpha1.ReasonIdentityNotAllowed, "Sign-ins are not read: "+err.Error()
		return out
	}
	if !slices.Contains(g.Identity.Spec.Allow.Applications, v1alpha1.AllApplications) {
		// The whole tenant's report tells of every application's use.
		out.Reason, out.Message = v1alpha1.ReasonIdentityNotAllowed, fmt.Sprintf(
			"Sign-ins are not read: reading the whole tenant's report needs an identity whose allow.applications is [%q]; %s names some only",
			v1alpha1.AllApplications, g.Identity)
		return out
	}
	if t := obj.Status.SignInsReadTime; held && t != nil && now.Before(t.Add(SignInsEvery)) {
		// Asked within the hour, read or not, and what it found is at hand: the report is hours
		// behind anyway, and the reports service's budget is the tenant's.
		out.Kept = true
		return out
	}
	if unavailable != "" {
		out.Reason, out.Message = v1alpha1.ReasonSignInsUnavailable, "Sign-ins are not read: "+unavailable
		return out
	}
	out.Read = true
	last := LastSignIns{}
	err := tc.ReadSignIns(ctx, last.Add)
	switch {
	case errors.Is(err, graph.ErrSignInsUnlicensed):
		out.Reason, out.Message = v1alpha1.ReasonSignInsUnavailable, "Sign-ins are not read: "+err.Error()
	case err != nil:
		out.Reason, out.Message = ReasonFor(err), OneLine("Reading sign-ins failed, and is tried again with the next check: "+err.Error())
	default:
		out.Last = last
	}
	return out
}

// LastSignInsOf is what creds say of their last sign-ins; a credential that does not name its
// application is appID's.
func LastSignInsOf(creds []v1alpha1.Credential, appID string) LastSignIns {
	l := LastSignIns{}
	for _, c := range creds {
		if c.LastSignIn != nil {
			l[signInKey(cmp.Or(c.AppID, appID), string(c.Source), c.KeyID)] = c.LastSignIn.Time
		}
	}
	return l
}

// Show records on obj what reading the tenant's report came to, and returns the last sign-ins to
// put on the credentials found: those read, or, when none could be, before, what was known; nil
// when the watch does not read sign-ins.
func (in TenantSignIns) Show(obj *v1alpha1.CredentialWatch, events Events, before LastSignIns, now time.Time) LastSignIns {
	st := &obj.Status
	if !in.Asked {
		st.SignInsReadTime = nil
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionSignInsRead)
		return nil
	}
	if in.Read {
		t := metav1.NewTime(now)
		st.SignInsReadTime = &t
	}
	if in.Kept {
		return before
	}
	if in.Last == nil {
		SignInsUnread(obj, events, in.Reason, in.Message, now)
		return before
	}
	SetCondition(obj, v1alpha1.ConditionSignInsRead, metav1.ConditionTrue, v1alpha1.ReasonSignInsRead,
		"Read the tenant's sign-in report, which Graph refreshes hours behind the sign-ins", now)
	return in.Last
}
