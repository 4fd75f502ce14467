package serviceprincipal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/target"
)

// SignInsEvery is target.SignInsEvery, which the reads of all kinds keep to.
const SignInsEvery = target.SignInsEvery

// signIns reads, as spec.usage.signIns asks, when each credential last signed in, into the
// credentials status now lists; before is what it listed, whose sign-ins are kept between reads.
func (k Kind) signIns(ctx context.Context, obj *v1alpha1.CredentialWatch, f Found, before []v1alpha1.Credential, now time.Time) {
	if u := obj.Spec.Usage; u == nil || !u.SignIns {
		obj.Status.SignInsReadTime = nil
		meta.RemoveStatusCondition(&obj.Status.Conditions, v1alpha1.ConditionSignInsRead)
		return
	}
	target.LastSignInsOf(before, f.AppID).Apply(obj.Status.Credentials, f.AppID)
	unread := func(reason, msg string) { target.SignInsUnread(obj, k.Events, reason, msg, now) }
	if err := f.Grant.Allow(access.Request{Operation: v1alpha1.OperationReadSignIns, TenantID: f.ID.TenantID, AppID: f.AppID}); err != nil {
		unread(v1alpha1.ReasonIdentityNotAllowed, "Sign-ins are not read: "+err.Error())
		return
	}
	if k.SignInsUnavailable != "" {
		unread(v1alpha1.ReasonSignInsUnavailable, "Sign-ins are not read: "+k.SignInsUnavailable)
		return
	}
	if t := obj.Status.SignInsReadTime; t != nil && now.Before(t.Add(SignInsEvery)) {
		return
	}
	read := func() ([]graph.KeyUse, error) {
		app, err := k.Azure.Application(f.ID, graph.AppRef{AppID: f.AppID, ObjectID: f.Snap.ApplicationObjectID})
		if err != nil {
			return nil, err
		}
		return app.ReadSignIns(ctx)
	}
	var uses []graph.KeyUse
	var err error
	at := now
	if k.Reports != nil {
		var ok bool
		// A read another watch made this hour is as old as it is: the retire margin counts from it.
		if uses, at, err, ok = k.Reports.Read(f.ID.TenantID+"/"+f.ID.ClientID+"/"+f.Grant.Identity.String(), strings.ToLower(f.AppID), now, read); !ok {
			return // the identity's share of the reports service is spent: the next check reads
		}
	} else {
		uses, err = read()
	}
	asked := metav1.NewTime(at)
	obj.Status.SignInsReadTime = &asked
	switch {
	case errors.Is(err, graph.ErrSignInsUnlicensed):
		unread(v1alpha1.ReasonSignInsUnavailable, "Sign-ins are not read: "+err.Error())
	case err != nil:
		unread(target.ReasonFor(err), target.OneLine("Reading sign-ins failed, and is tried again in an hour: "+err.Error()))
	default:
		last := target.LastSignIns{}
		for _, u := range uses {
			u.AppID = cmp.Or(u.AppID, f.AppID) // the report was asked for this application's
			last.Add(u)
		}
		n := last.Apply(obj.Status.Credentials, f.AppID)
		target.SetCondition(obj, v1alpha1.ConditionSignInsRead, metav1.ConditionTrue, v1alpha1.ReasonSignInsRead,
			fmt.Sprintf("Read the sign-ins of %d credentials, %d of which signed in; Graph's report is hours behind", len(obj.Status.Credentials), n), now)
	}
}
