package metrics

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// GraphRequests counts HTTP requests to Microsoft Graph by status code, "error" when no response
// came back.
type GraphRequests struct {
	counter *prometheus.CounterVec
}

// NewGraphRequests returns the counter, registered with reg.
func NewGraphRequests(reg prometheus.Registerer) (*GraphRequests, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "credwatch_graph_requests_total",
		Help: "HTTP requests sent to Microsoft Graph, by response status code (\"error\" when none arrived).",
	}, []string{"code"})
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return &GraphRequests{counter: c}, nil
}

// RoundTripper wraps next so that every request through it is counted. promhttp's
// InstrumentRoundTripperCounter is not used because it counts nothing when the round trip fails,
// and an unreachable Graph is the case an operator most needs to see.
func (g *GraphRequests) RoundTripper(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		code := "error"
		if err == nil {
			code = strconv.Itoa(resp.StatusCode)
		}
		g.counter.WithLabelValues(code).Inc()
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// DeltaRounds counts what Graph's delta rounds found.
type DeltaRounds struct {
	resyncs, missed prometheus.Counter
}

// NewDeltaRounds returns the counters, registered with reg.
func NewDeltaRounds(reg prometheus.Registerer) (*DeltaRounds, error) {
	d := &DeltaRounds{
		resyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "credwatch_graph_delta_resyncs_total",
			Help: "Times reading Microsoft Graph's changes started again from now: Graph lost the state, or the kept one was too old.",
		}),
		missed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "credwatch_graph_delta_missed_total",
			Help: "Reads (every --delta-full-every) that found a change Graph's delta rounds had not reported.",
		}),
	}
	for _, c := range []prometheus.Collector{d.resyncs, d.missed} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Resynced counts a log started again.
func (d *DeltaRounds) Resynced() { d.resyncs.Inc() }

// Missed counts a change the rounds missed.
func (d *DeltaRounds) Missed() { d.missed.Inc() }

// CredentialsAdded counts credentials added to watched applications by something other than
// credwatch, by tenant.
type CredentialsAdded struct {
	counter *prometheus.CounterVec
}

// NewCredentialsAdded returns the counter, registered with reg.
func NewCredentialsAdded(reg prometheus.Registerer) (*CredentialsAdded, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "credwatch_credentials_added_total",
		Help: "Credentials that appeared on a watched application or service principal, added by something other than credwatch's rotation, by tenant.",
	}, []string{"tenant"})
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return &CredentialsAdded{counter: c}, nil
}

// Added counts one in tenant.
// Added counts n in tenantID, 0 as well: a tenant's series starts at zero, and the rule sees its
// first increase. Tenant IDs are GUIDs, written in any case: one series each.
func (c *CredentialsAdded) Added(tenantID string, n int) {
	c.counter.WithLabelValues(strings.ToLower(tenantID)).Add(float64(n))
}
