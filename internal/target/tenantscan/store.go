package tenantscan

import "github.com/credwatch/credwatch/internal/target"

// Store keeps what each tenant scan last found: a tenant's credentials are too many for a
// status, which lists those that need attention, while metrics report all.
type Store = target.Store[Found]

// NewStore returns an empty Store.
func NewStore() *Store { return target.NewStore[Found]() }
