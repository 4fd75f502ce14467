package target

import (
	"errors"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/saissuer"
)

// Reasoned is a failure that names the Ready reason it gives a watch: the errors a kind or the
// reconciler makes itself (an identity missing, a fleet over its namespace's limit) carry their
// reason, so that a new one needs no new case here.
type Reasoned interface {
	error
	Reason() string
}

// ReasonFor is the one place failures become a watch's Ready reasons: a Reasoned error anywhere
// in err's chain, the outermost first; then the failures of other packages that say what a
// person must mend; then Resource Manager's failures; then Azure's by kind, read as Graph's.
func ReasonFor(err error) string {
	var r Reasoned
	if errors.As(err, &r) && r.Reason() != "" {
		return r.Reason()
	}
	for _, f := range foreign {
		if f.is(err) {
			return f.reason
		}
	}
	if is[*ClusterError](err) {
		// Resource Manager's failures, told apart from Graph's; the kind is read from the whole
		// chain, as everywhere.
		switch azerr.KindOf(err) {
		case azerr.KindNotFound:
			return v1alpha1.ReasonClusterNotFound
		case azerr.KindUnavailable:
			return v1alpha1.ReasonResourceManagerUnreachable
		}
	}
	if r, ok := kindReasons[azerr.KindOf(err)]; ok {
		return r
	}
	return v1alpha1.ReasonGraphError
}

// foreign are the failures of packages that know nothing of a watch's reasons, in the order
// they are asked.
var foreign = []struct {
	is     func(error) bool
	reason string
}{
	{is[*saissuer.EndpointError], v1alpha1.ReasonEndpointUnreachable},
	{is[*saissuer.NotAPIServerError], v1alpha1.ReasonEndpointNotAllowed},
	{is[*saissuer.CanaryError], v1alpha1.ReasonCanaryUnavailable},
	{is[*access.Refusal], v1alpha1.ReasonIdentityNotAllowed},
}

// kindReasons are the reasons of Azure's failures, by kind; any other is ReasonGraphError.
var kindReasons = map[azerr.Kind]string{
	azerr.KindNotFound:        v1alpha1.ReasonServicePrincipalNotFound,
	azerr.KindForbidden:       v1alpha1.ReasonAccessDenied,
	azerr.KindUnauthenticated: v1alpha1.ReasonAuthenticationFailed,
	azerr.KindThrottled:       v1alpha1.ReasonThrottled,
	azerr.KindUnavailable:     v1alpha1.ReasonGraphUnreachable,
}

func is[E error](err error) bool {
	var e E
	return errors.As(err, &e)
}

// ClusterError is a failure of Resource Manager to give a cluster, or a fleet's listing of
// clusters: ReasonFor tells a cluster that is not there, and a Resource Manager that does not
// answer, apart from Graph's failures.
type ClusterError struct{ Err error }

func (e *ClusterError) Error() string { return e.Err.Error() }
func (e *ClusterError) Unwrap() error { return e.Err }

// KubernetesError is a failure to talk to the API server while a watch is worked on: not the
// check's fault nor the watch's, so it is retried by controller-runtime instead of counted
// against the watch.
type KubernetesError struct{ Err error }

func (e *KubernetesError) Error() string { return e.Err.Error() }
func (e *KubernetesError) Unwrap() error { return e.Err }
