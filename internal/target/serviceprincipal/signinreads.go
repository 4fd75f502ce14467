package serviceprincipal

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/credwatch/credwatch/internal/graph"
)

// Reports bounds what the watches of every namespace ask of Graph's reports service, whose
// budget is small (5 requests in 10 seconds per application and tenant) and shared by all of
// them: each application's sign-ins are read once an hour, whatever number of watches ask, and
// each identity asks at most graph.ReportsPer10s times in ten seconds in a tenant. Held in memory: a
// restarted operator reads each application once more.
type Reports struct {
	mu     sync.Mutex
	reads  map[string]reportRead
	limits map[string]*rate.Limiter
}

type reportRead struct {
	at   time.Time
	uses []graph.KeyUse
	err  error
}

// Read returns the sign-ins of appID as asker (an identity in a tenant) read them within
// SignInsEvery of now, and when, or reads them with read when asker's allowance lets it; ok is
// false when it does not, and the read waits for a later check.
func (r *Reports) Read(asker, appID string, now time.Time, read func() ([]graph.KeyUse, error)) (uses []graph.KeyUse, at time.Time, err error, ok bool) {
	key := asker + "\x00" + appID
	r.mu.Lock()
	if r.reads == nil {
		r.reads, r.limits = map[string]reportRead{}, map[string]*rate.Limiter{}
	}
	if c, found := r.reads[key]; found && now.Sub(c.at) < SignInsEvery {
		r.mu.Unlock()
		return c.uses, c.at, c.err, true
	}
	l := r.limits[asker]
	if l == nil {
		l = rate.NewLimiter(rate.Every(10*time.Second/graph.ReportsPer10s), graph.ReportsPer10s)
		r.limits[asker] = l
	}
	allowed := l.AllowN(now, 1)
	r.mu.Unlock()
	if !allowed {
		return nil, time.Time{}, nil, false
	}
	uses, err = read()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, c := range r.reads {
		if now.Sub(c.at) >= SignInsEvery {
			delete(r.reads, k)
		}
	}
	r.reads[key] = reportRead{at: now, uses: uses, err: err}
	return uses, now, err, true
}
