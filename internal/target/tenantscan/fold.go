package tenantscan

import (
	"cmp"
	"slices"
	"strings"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// Found is what a tenant scan found, as status and metrics need it.
type Found struct {
	// Applications and ServicePrincipals count the objects listed.
	Applications, ServicePrincipals int32
	// Credentials are every credential of both, each with its application, by appId and then
	// soonest expiry first.
	Credentials []v1alpha1.Credential
	// SAML holds the appIds whose service principal is set up for SAML single sign-on, whose
	// long-lived secret and signing certificate are there by design.
	SAML map[string]bool
	// OptedOut holds the appIds whose application carries the fold's OptOutTag.
	OptedOut map[string]bool
	// Unreadable counts the applications registered in the tenant, by their service principal's
	// appOwnerOrganizationId, that the listing left out: the identity may not read them, and
	// their credentials are not in Credentials. UnreadableApp is the appId of the first, by appId.
	Unreadable    int32
	UnreadableApp string
}

// Fold gathers the objects of a tenant scan into a Found as they arrive, keeping of each no more
// than its credentials and its application's names. Its zero value is ready to use.
type Fold struct {
	// OptOutTag, when set, is the application tag that opts an application out of owner digests.
	OptOutTag string
	// TenantID is the tenant scanned: a service principal whose application it registers and the
	// listing left out is one the identity may not read, not one of another tenant's.
	TenantID string

	found Found
	// apps names each application seen, for the credentials of its service principal, which may
	// be listed before it.
	apps map[string]app
}

// app is an appId as the scan saw it: its application listed, with its names, and whether a
// service principal says the tenant registers it. One map holds both, as nearly every service
// principal of the tenant's shares its appId with an application: a set of the service
// principals waiting for their application would grow to half the tenant in a scan answered
// from delta rounds, which hands objects over in no order.
type app struct {
	objectID, displayName string
	listed, ownSP         bool
}

// Grow makes room for n credentials more.
func (f *Fold) Grow(n int) {
	f.found.Credentials = slices.Grow(f.found.Credentials, n)
}

// Add folds in one object. Graph's objects are not retained.
func (f *Fold) Add(o graph.Object) {
	if f.apps == nil {
		f.apps = map[string]app{}
	}
	if o.Source == graph.Application {
		f.found.Applications++
		a := f.apps[o.AppID]
		a.objectID, a.displayName, a.listed = o.ObjectID, o.DisplayName, true
		f.apps[o.AppID] = a
		if f.OptOutTag != "" && slices.ContainsFunc(o.Tags, func(t string) bool { return strings.EqualFold(t, f.OptOutTag) }) {
			if f.found.OptedOut == nil {
				f.found.OptedOut = map[string]bool{}
			}
			f.found.OptedOut[o.AppID] = true
		}
	} else {
		f.found.ServicePrincipals++
		if f.TenantID != "" && strings.EqualFold(o.AppOwnerTenantID, f.TenantID) {
			a := f.apps[o.AppID]
			a.ownSP = true
			f.apps[o.AppID] = a
		}
		if strings.EqualFold(o.SingleSignOnMode, target.SAML) {
			if f.found.SAML == nil {
				f.found.SAML = map[string]bool{}
			}
			f.found.SAML[o.AppID] = true
		}
	}
	for _, c := range o.Credentials {
		cred := target.Credential(c)
		cred.AppID, cred.AppDisplayName = o.AppID, o.DisplayName
		if o.Source == graph.Application {
			cred.AppObjectID = o.ObjectID
		}
		f.found.Credentials = append(f.found.Credentials, cred)
	}
}

// Found is what was folded in. The service principals' credentials take their application's
// names, when the tenant holds it: a service principal's display name is a copy, which may lag.
func (f *Fold) Found() Found {
	out := f.found
	for appID, a := range f.apps {
		if a.ownSP && !a.listed {
			if out.Unreadable++; out.UnreadableApp == "" || appID < out.UnreadableApp {
				out.UnreadableApp = appID
			}
		}
	}
	for i := range out.Credentials {
		c := &out.Credentials[i]
		if a, ok := f.apps[c.AppID]; ok && a.listed && c.Source == v1alpha1.SourceServicePrincipal {
			c.AppObjectID, c.AppDisplayName = a.objectID, a.displayName
		}
	}
	// A total order: a scan from a tenant held in memory hands its objects in no set order, and
	// its status must list what ties the same way every time.
	slices.SortFunc(out.Credentials, func(a, b v1alpha1.Credential) int {
		return cmp.Or(strings.Compare(a.AppID, b.AppID), policy.BySoonestEnd(a, b), strings.Compare(string(a.Source), string(b.Source)))
	})
	return out
}
