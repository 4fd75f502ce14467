// Package compact makes the informer's copy of each CredentialWatch small. The cache holds every
// watch for the life of the process, and most of a watch's text is the same in thousands of
// them: its kind, namespace and tenant, its conditions' types, reasons and messages, its
// credentials' types and states. Each decoded copy would hold that text again.
package compact

import (
	"strconv"
	"strings"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// Transform is the informers' transform: it drops managedFields, which nothing reads and which
// are as large as the rest of a watch, and shares a watch's repeated text with the other watches.
func Transform(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return nil, err
	}
	if w, ok := obj.(*v1alpha1.CredentialWatch); ok {
		Watch(w)
	}
	return obj, nil
}

var stripManagedFields = cache.TransformStripManagedFields()

// Watch replaces w's strings that other watches are likely to hold too by one shared copy of
// each. Strings nearly always unique to w (its name, UID, key IDs) are left alone: sharing a
// string that nobody else holds costs an entry in the shared table for nothing. The table is
// the standard library's unique package, whose entries last until the next collection: text
// decoded after it gets a new shared copy, so a text's copies number the collections that
// decoded it, not the watches that hold it, and none outlives its last watch.
func Watch(w *v1alpha1.CredentialWatch) {
	in(&w.APIVersion)
	in(&w.Kind)
	in(&w.Namespace)
	for i := range w.Finalizers {
		in(&w.Finalizers[i])
	}
	spec(&w.Spec)
	status(&w.Status)
	within(w)
}

func spec(s *v1alpha1.CredentialWatchSpec) {
	if t := s.Target.ServicePrincipal; t != nil {
		in(&t.TenantID)
	}
	if t := s.Target.AKSCluster; t != nil {
		in(&t.TenantID)
		in(&t.SubscriptionID)
		in(&t.ResourceGroup)
	}
	if t := s.Target.TenantScan; t != nil {
		in(&t.TenantID)
	}
	if t := s.Target.AKSFleet; t != nil {
		in(&t.TenantID)
	}
	if r := s.IdentityRef; r != nil {
		in(&r.Kind)
		in(&r.Name)
	}
	in((*string)(&s.CheckInterval))
	in((*string)(&s.Thresholds.Warning))
	in((*string)(&s.Thresholds.Critical))
}

func status(s *v1alpha1.CredentialWatchStatus) {
	s.Conditions = fit(s.Conditions)
	// Messages name an application quoted, as %q writes it: a short name unquoted ("api") would
	// also match messages every watch shares.
	var app string
	if sp := s.ServicePrincipal; sp != nil && sp.DisplayName != "" {
		app = strconv.Quote(sp.DisplayName)
	}
	for i := range s.Conditions {
		condition(&s.Conditions[i], app)
	}
	s.Credentials = fit(s.Credentials)
	for i := range s.Credentials {
		// A tenant scan lists many credentials of one application: its appId, object ID and
		// name repeat within the watch.
		c := &s.Credentials[i]
		in((*string)(&c.Type))
		in((*string)(&c.Source))
		in((*string)(&c.State))
		in(&c.DisplayName)
		in(&c.AppID)
		in(&c.AppDisplayName)
		in(&c.AppObjectID)
	}
	if f := s.Findings; f != nil {
		f.Items = fit(f.Items)
		for i := range f.Items {
			it := &f.Items[i]
			in((*string)(&it.Kind))
			in((*string)(&it.Type))
			in((*string)(&it.Source))
			in(&it.AppDisplayName)
		}
	}
	in((*string)(&s.State))
	in(&s.ExpiresIn)
	if c := s.AKSCluster; c != nil {
		in((*string)(&c.Identity))
		in(&c.ProvisioningState)
		in(&c.PowerState)
	}
}

func condition(c *metav1.Condition, app string) {
	in(&c.Type)
	in((*string)(&c.Status))
	in(&c.Reason)
	// Most messages say the same of every watch ("No credential has expired"). One that names
	// the watch's application ("Read 2 credentials of \"payroll\" ...") is nearly always its
	// own: shared, it would cost an entry in the table and save nothing.
	if app == "" || !strings.Contains(c.Message, app) {
		in(&c.Message)
	}
}

// within makes a watch's fields that repeat another of its fields hold that one: the appId the
// watch found is its target's, its earliest expiry is one of its credentials' ends, and its last
// check is when its conditions last moved, when they moved at it.
func within(w *v1alpha1.CredentialWatch) {
	s := &w.Status
	if sp, t := s.ServicePrincipal, w.Spec.Target.ServicePrincipal; sp != nil && t != nil && sp.AppID == t.ClientID {
		sp.AppID = t.ClientID
	}
	s.EarliestExpiry = pointInto(s.EarliestExpiry, s.Credentials, func(c *v1alpha1.Credential) *metav1.Time { return &c.EndTime })
	s.LastCheckTime = pointInto(s.LastCheckTime, s.Conditions, func(c *metav1.Condition) *metav1.Time { return &c.LastTransitionTime })
}

// pointInto returns the time in items equal to t, if any, in place of t. Items are the watch's
// own, so the pointer lives as long as they do; a deep copy of the watch copies the time apart.
func pointInto[T any](t *metav1.Time, items []T, at func(*T) *metav1.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	for i := range items {
		if p := at(&items[i]); *p == *t {
			return p
		}
	}
	return t
}

// fit copies s into an array of its length when decoding left room to grow: a cached slice
// never grows.
func fit[T any](s []T) []T {
	if cap(s) == len(s) {
		return s
	}
	return append(make([]T, 0, len(s)), s...)
}

func in(s *string) {
	if *s != "" {
		*s = unique.Make(*s).Value()
	}
}
