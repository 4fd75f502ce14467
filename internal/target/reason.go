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
// reason, so that a new one needs no new case here. An empty reason defers to what it wraps.
type Reasoned interface {
	error
	Reason() string
}

// ReasonFor is the one place failures become a watch's Ready reasons: a Reasoned error anywhere
// in err's chain, the outermost first; then the failures of other packages that say what a
// person must mend; then Azure's failures by kind, read as Graph's.
func ReasonFor(err error) string {
	if r := reasonIn(err); r != "" {
		return r
	}
	for _, f := range foreign {
		if f.is(err) {
			return f.reason
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

// reasonIn is the reason of the outermost Reasoned error in err's tree that names one. It walks
// the tree itself, where errors.As would stop at the first Reasoned error even when that one
// defers to what it wraps.
func reasonIn(err error) string {
	if err == nil {
		return ""
	}
	if r, ok := err.(Reasoned); ok && r.Reason() != "" { //nolint:errorlint // one node of the walk
		return r.Reason()
	}
	switch u := err.(type) { //nolint:errorlint // one node of the walk
	case interface{ Unwrap() error }:
		return reasonIn(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if r := reasonIn(e); r != "" {
				return r
			}
		}
	}
	return ""
}

// ClusterError is a failure of Resource Manager to give a cluster, or a fleet's listing of
// clusters, told apart from Graph's failures by its reason.
type ClusterError struct{ Err error }

func (e *ClusterError) Error() string { return e.Err.Error() }
func (e *ClusterError) Unwrap() error { return e.Err }

// Reason is ReasonClusterNotFound or ReasonResourceManagerUnreachable; any other failure reads
// as Graph's would.
func (e *ClusterError) Reason() string {
	switch azerr.KindOf(e.Err) {
	case azerr.KindNotFound:
		return v1alpha1.ReasonClusterNotFound
	case azerr.KindUnavailable:
		return v1alpha1.ReasonResourceManagerUnreachable
	}
	return ""
}
