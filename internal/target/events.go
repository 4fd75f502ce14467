package target

import "k8s.io/apimachinery/pkg/runtime"

// Events raises Kubernetes events about an object: client-go's EventRecorder is one, and a
// kind's tests fake it with a list.
type Events interface {
	Event(object runtime.Object, eventtype, reason, message string)
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}
