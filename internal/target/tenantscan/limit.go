package tenantscan

import (
	"context"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/target"
)

// limit bounds the tenantScan watches a namespace runs, as fleets are bounded: each reads every
// application and service principal of its tenant at each check, from the Graph budget every
// namespace shares, and holds what it read in the operator's memory.
var limit = target.Limit{Max: 3, Kind: "tenantScan", Reason: v1alpha1.ReasonTooManyScans,
	Fix: "delete one, or let one of them scan what this one would",
	Is:  func(w *v1alpha1.CredentialWatch) bool { return w.Spec.Target.TenantScan != nil }}

// Allowed refuses a tenant scan beyond the oldest three of its namespace.
func Allowed(ctx context.Context, watches target.Lister, obj *v1alpha1.CredentialWatch) error {
	return limit.Allows(ctx, watches, obj)
}
