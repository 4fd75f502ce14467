package target

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
)

// EarlyChecksPerNamespace bounds the checks that the watches of one namespace make in any minute
// before their schedule calls for them (asked for with credwatch.dev/check, or a spec change): the
// Graph budget is every namespace's, and a tenant scan reads a whole tenant. Each watch makes
// such a check at most once a minute besides (policy.EarlyCheckGap).
const EarlyChecksPerNamespace = 10

// EarlyChecks is each namespace's allowance of early checks, refilled at
// EarlyChecksPerNamespace a minute, and the checks it granted that have not been made yet (a
// read the planner answers later comes back for its check, which is paid for already). Held in
// memory: a restarted operator grants a full allowance once, which its own restart costs far
// more than. The zero value is ready to use.
type EarlyChecks struct {
	mu      sync.Mutex
	by      map[string]*rate.Limiter
	granted map[types.NamespacedName]string
}

// Allow takes one early check of the watch key's namespace's allowance at now, if there is one
// left, for the check that ask names; a check granted before for the same ask is allowed again.
func (e *EarlyChecks) Allow(key types.NamespacedName, ask string, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.by == nil {
		e.by, e.granted = map[string]*rate.Limiter{}, map[types.NamespacedName]string{}
	}
	if e.granted[key] == ask {
		return true
	}
	l := e.by[key.Namespace]
	if l == nil {
		l = rate.NewLimiter(rate.Every(time.Minute/EarlyChecksPerNamespace), EarlyChecksPerNamespace)
		e.by[key.Namespace] = l
	}
	if !l.AllowN(now, 1) {
		return false
	}
	e.granted[key] = ask
	return true
}

// Forget drops what is held of the deleted watch key.
func (e *EarlyChecks) Forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.granted, key)
}
