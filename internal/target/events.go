package target

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// Events raises Kubernetes events about an object: client-go's EventRecorder is one, and a
// kind's tests fake it with a list.
type Events interface {
	Event(object runtime.Object, eventtype, reason, message string)
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// StateEventReasons are the reasons of the events that tell of a credential, or a cluster's
// service principal, entering a state worth telling someone about.
var StateEventReasons = map[v1alpha1.CredentialState]string{
	v1alpha1.StateWarning:  "CredentialWarning",
	v1alpha1.StateCritical: "CredentialCritical",
	v1alpha1.StateExpired:  "CredentialExpired",
}

// MaxStateEvents bounds the events one reconcile raises about credentials changing state: a
// first scan of a tenant can find hundreds, and status and metrics list them all.
const MaxStateEvents = 5
