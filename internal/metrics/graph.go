package metrics

import (
	"net/http"
	"strconv"

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
