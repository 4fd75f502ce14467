package tenantscan

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/target"
)

// Scan does what a tenantScan watch asks, one reconcile at a time. What its scans found is kept
// in Store between reconciles, and what its digests know of their period in Digests.
type Scan struct {
	Events  target.Events
	Store   *Store
	Digests *DigestStore
	// Pace bounds the owner digests and messages sent a minute, by all watches together; nil
	// for no bound.
	Pace   *Pace
	Ledger target.Ledger
	Relays Relays
	// Own tells credwatch's rotations' secrets from others added; nil, every one counts.
	Own OwnSecrets
	// Added counts n credentials added by something other than credwatch, by tenant, at every
	// scan (n may be 0); nil counts nothing.
	Added func(tenantID string, n int)
}

// Read lists the tenant's applications and service principals through tc, folding them as they
// arrive into what the scan keeps. about is how many credentials the scan before found: the fold
// makes room for them at once, where growing a slice of 100,000 credentials as they come leaves
// several times its size of garbage.
func Read(ctx context.Context, tc graph.TenantClient, spec *v1alpha1.TenantScanTarget, about int) (Found, error) {
	fold := Fold{TenantID: spec.TenantID}
	fold.Grow(about + about/16)
	if d := spec.OwnerDigests; d != nil {
		fold.OptOutTag = d.OptOutTag
	}
	filter := spec.Filter
	err := tc.Scan(ctx, filter, fold.Add)
	var ae *azerr.Error
	if errors.As(err, &ae) && ae.Status == http.StatusBadRequest {
		err = &filterError{filter: filter, err: err}
	}
	if err != nil {
		return Found{}, err
	}
	return fold.Found(), nil
}

// filterError is Graph refusing a tenant scan's query, which only a change of its filter mends.
type filterError struct {
	filter string
	err    error
}

func (e *filterError) Error() string {
	return fmt.Sprintf("Graph refused to list with the filter %q (%v): check spec.target.tenantScan.filter", e.filter, e.err)
}
func (e *filterError) Unwrap() error { return e.err }

// Reason is ReasonFilterRejected.
func (e *filterError) Reason() string { return v1alpha1.ReasonFilterRejected }

// Record keeps what a tenant scan found for status and metrics, with the sign-ins read beside
// it, counts it in status, and tells of the credentials added since the scan before.
func (s Scan) Record(ctx context.Context, obj *v1alpha1.CredentialWatch, found Found, signIns target.TenantSignIns, now time.Time) {
	var before []v1alpha1.Credential
	prev, scanned := s.Store.Get(target.KeyOf(obj))
	if scanned {
		before = prev.Credentials
	}
	// Sign-ins not read now are those the last scan knew.
	if last := signIns.Show(obj, s.Events, target.LastSignInsOf(before, ""), now); last != nil {
		last.Apply(found.Credentials, "")
	}
	counts := &v1alpha1.TenantScanStatus{}
	if prev := obj.Status.TenantScan; prev != nil {
		*counts = *prev // the states are counted at every reconcile, by the evaluation of expiry
	}
	counts.Applications, counts.ServicePrincipals = found.Applications, found.ServicePrincipals
	counts.Credentials = int32(len(found.Credentials))
	wasUnreadable := counts.UnreadableApplications
	counts.UnreadableApplications = found.Unreadable
	s.markAdded(ctx, obj, before, scanned, found, counts, now)
	s.Store.Put(target.KeyOf(obj), found)
	obj.Status.TenantScan = counts
	obj.Status.ServicePrincipal, obj.Status.AKSCluster = nil, nil
	msg := fmt.Sprintf("Scanned %d applications and %d service principals of the tenant: %d credentials", counts.Applications, counts.ServicePrincipals, counts.Credentials)
	if n := found.Unreadable; n > 0 {
		unreadable := fmt.Sprintf("%d applications registered in the tenant could not be read, such as appId %s: their service principals were listed and they were not, "+
			"so their credentials are not counted: the identity needs %s, unless they were deleted a moment ago", n, found.UnreadableApp, needsList)
		msg += "; " + unreadable
		if wasUnreadable == 0 {
			s.Events.Event(obj, corev1.EventTypeWarning, EventApplicationsUnreadable, unreadable)
		}
	}
	target.SetCondition(obj, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked, msg, now)
}

// EventApplicationsUnreadable: a scan found applications of the tenant the identity may not read.
const EventApplicationsUnreadable = "ApplicationsUnreadable"

// needsList is what lets an identity list every application of a tenant.
const needsList = "Application.Read.All"
