package planner

import (
	"strings"
	"time"

	"github.com/credwatch/credwatch/internal/graph"
)

// foreignTTL is how long an application confirmed in another tenant is taken as there, under an
// identity, before a list that again returns its service principal alone is confirmed again. An
// application does not move between tenants; the bound is for an identity refused it meanwhile
// in a way Graph answers as not found.
const foreignTTL = 24 * time.Hour

// appUnseen reports whether a read found the service principal of an appId and not its
// application. A list leaves out both an application of another tenant and one the identity may
// not read (Application.ReadWrite.OwnedBy, not an owner): only a point read of the application
// tells the two apart, by 404 or 403.
func appUnseen(s graph.Snapshot) bool {
	return s.ApplicationObjectID == "" && s.ServicePrincipalObjectID != ""
}

// foreignLocked reports whether appID's application was confirmed in another tenant under
// identity; the caller holds p.mu.
func (p *Planner) foreignLocked(identity any, appID string) bool {
	at, ok := p.foreign[key{identity, strings.ToLower(appID)}]
	return ok && p.clock.Since(at) < foreignTTL
}

// pruneForeignLocked drops the confirmations older than foreignTTL; the caller holds p.mu.
func (p *Planner) pruneForeignLocked(now time.Time) {
	for k, at := range p.foreign {
		if now.Sub(at) >= foreignTTL {
			delete(p.foreign, k)
		}
	}
}
