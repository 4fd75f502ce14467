package tenantscan

import (
	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy/policytest"
)

const day = policytest.Day

var (
	now     = policytest.Now
	std     = policytest.Std
	scanned = policytest.Credential
)

// onSP is c as its service principal's.
func onSP(c v1alpha1.Credential) v1alpha1.Credential {
	c.Source = v1alpha1.SourceServicePrincipal
	return c
}
