package aksfleet

import "github.com/credwatch/credwatch/internal/policy/policytest"

const day = policytest.Day

var (
	now        = policytest.Now
	std        = policytest.Std
	credential = policytest.Credential
)
