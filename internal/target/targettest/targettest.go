// Package targettest holds the fakes the target kinds' tests share. It is for tests only.
package targettest

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// Events records the events a kind raises, as "Type Reason message"; a target.Events.
type Events struct {
	mu  sync.Mutex
	got []string
}

// Event records one event.
func (e *Events) Event(_ runtime.Object, eventtype, reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, eventtype+" "+reason+" "+message)
}

// Eventf records one event, its message formatted.
func (e *Events) Eventf(o runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	e.Event(o, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// Take returns the events recorded since the last Take.
func (e *Events) Take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	got := e.got
	e.got = nil
	return got
}
