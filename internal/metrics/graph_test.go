package metrics

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestGraphRequestsCountsFailuresToo(t *testing.T) {
	reg := prometheus.NewRegistry()
	g, err := NewGraphRequests(reg)
	if err != nil {
		t.Fatal(err)
	}
	rt := g.RoundTripper(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == "/down" {
			return nil, errors.New("connection refused")
		}
		return &http.Response{StatusCode: http.StatusTooManyRequests, Body: http.NoBody}, nil
	}))
	for _, path := range []string{"/a", "/a", "/down"} {
		req, _ := http.NewRequest(http.MethodGet, "https://graph.example"+path, nil)
		if resp, err := rt.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	want := `
# HELP credwatch_graph_requests_total HTTP requests sent to Microsoft Graph, by response status code ("error" when none arrived).
# TYPE credwatch_graph_requests_total counter
credwatch_graph_requests_total{code="429"} 2
credwatch_graph_requests_total{code="error"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if _, err := NewGraphRequests(reg); err == nil {
		t.Error("registering the counter twice succeeded")
	}
}
