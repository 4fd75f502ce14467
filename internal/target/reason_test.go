package target

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/saissuer"
)

type reasoned struct{ reason string }

func (r reasoned) Error() string  { return "reasoned" }
func (r reasoned) Reason() string { return r.reason }

func TestUnitReasonFor(t *testing.T) {
	azure := func(k azerr.Kind) error { return &azerr.Error{Kind: k, Err: errors.New("from Azure")} }
	refusal := &access.Refusal{Identity: "AzureIdentity team/x", Rule: "tenant t is not allowed"}
	cases := map[string]struct {
		err  error
		want string
	}{
		"a reasoned error names its reason":          {reasoned{v1alpha1.ReasonTooManyFleets}, v1alpha1.ReasonTooManyFleets},
		"wrapped":                                    {fmt.Errorf("checking: %w", reasoned{v1alpha1.ReasonNoIdentity}), v1alpha1.ReasonNoIdentity},
		"joined":                                     {errors.Join(errors.New("other"), reasoned{v1alpha1.ReasonNoIdentity}), v1alpha1.ReasonNoIdentity},
		"the outermost reasoned error wins":          {fmt.Errorf("%w", errors.Join(reasoned{v1alpha1.ReasonNoIdentity}, reasoned{v1alpha1.ReasonTooManyFleets})), v1alpha1.ReasonNoIdentity},
		"a reasoned error inside a cluster's":        {&ClusterError{Err: &azerr.Error{Kind: azerr.KindUnavailable, Err: reasoned{v1alpha1.ReasonCredentialSecretInvalid}}}, v1alpha1.ReasonCredentialSecretInvalid},
		"an empty reason says nothing":               {reasoned{""}, v1alpha1.ReasonGraphError},
		"an endpoint unreachable":                    {&saissuer.EndpointError{Endpoint: "https://a", Err: errors.New("refused")}, v1alpha1.ReasonEndpointUnreachable},
		"not an API server":                          {&saissuer.NotAPIServerError{Endpoint: "https://a"}, v1alpha1.ReasonEndpointNotAllowed},
		"no canary":                                  {&saissuer.CanaryError{Endpoint: "https://a", Err: errors.New("no")}, v1alpha1.ReasonCanaryUnavailable},
		"an identity's refusal":                      {refusal, v1alpha1.ReasonIdentityNotAllowed},
		"a cluster not found":                        {&ClusterError{Err: azure(azerr.KindNotFound)}, v1alpha1.ReasonClusterNotFound},
		"Resource Manager unreachable":               {&ClusterError{Err: azure(azerr.KindUnavailable)}, v1alpha1.ReasonResourceManagerUnreachable},
		"Resource Manager refusing reads as Graph's": {&ClusterError{Err: azure(azerr.KindForbidden)}, v1alpha1.ReasonAccessDenied},
		"a fleet's listing refused by its identity":  {&ClusterError{Err: refusal}, v1alpha1.ReasonIdentityNotAllowed},
		"a refusal beside a cluster not found":       {errors.Join(&ClusterError{Err: azure(azerr.KindNotFound)}, refusal), v1alpha1.ReasonIdentityNotAllowed},
		"a refusal inside a cluster not found":       {&ClusterError{Err: fmt.Errorf("%w: %w", refusal, azure(azerr.KindNotFound))}, v1alpha1.ReasonIdentityNotAllowed},
		"a cluster's failure read from the chain":    {errors.Join(&ClusterError{Err: context.Canceled}, azure(azerr.KindNotFound)), v1alpha1.ReasonClusterNotFound},
		"Resource Manager unreachable, joined":       {errors.Join(azure(azerr.KindUnavailable), &ClusterError{Err: errors.New("other")}), v1alpha1.ReasonResourceManagerUnreachable},
		"a cluster's other failure reads as Graph's": {&ClusterError{Err: context.DeadlineExceeded}, v1alpha1.ReasonGraphError},
		"an application not found":                   {azure(azerr.KindNotFound), v1alpha1.ReasonServicePrincipalNotFound},
		"forbidden":                                  {azure(azerr.KindForbidden), v1alpha1.ReasonAccessDenied},
		"unauthenticated":                            {azure(azerr.KindUnauthenticated), v1alpha1.ReasonAuthenticationFailed},
		"throttled":                                  {azure(azerr.KindThrottled), v1alpha1.ReasonThrottled},
		"unavailable":                                {azure(azerr.KindUnavailable), v1alpha1.ReasonGraphUnreachable},
		"anything else":                              {context.DeadlineExceeded, v1alpha1.ReasonGraphError},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ReasonFor(tc.err); got != tc.want {
				t.Errorf("ReasonFor(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}
