package budget

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

const threeReads = `{"requests":[
	{"id":"1","method":"GET","url":"/applications(appId='a')?$select=id,passwordCredentials"},
	{"id":"2","method":"GET","url":"/servicePrincipals(appId='a')?$select=id,passwordCredentials"},
	{"id":"3","method":"GET","url":"applications(appId='b')"}]}`

func gzipped(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := io.WriteString(w, s); err != nil || w.Close() != nil {
		panic("gzip into memory failed")
	}
	return b.Bytes()
}

func TestBatchCostsWhatItsRequestsCost(t *testing.T) {
	tests := []struct {
		name     string
		body     []byte
		encoding string
		noRewind bool
		want     int
	}{
		{"three reads", []byte(threeReads), "", false, 1 + 1 + 2},
		{"gzipped, as Kiota sends it", gzipped(threeReads), "gzip", false, 4},
		{"not JSON", []byte("{"), "", false, unreadableBatchCost},
		{"no requests", []byte(`{"requests":[]}`), "", false, unreadableBatchCost},
		{"a body that cannot be read twice", []byte(threeReads), "", true, unreadableBatchCost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := http.NewRequest("POST", "https://graph.microsoft.com/v1.0/$batch", bytes.NewReader(tt.body))
			r.Header.Set("Content-Encoding", tt.encoding)
			if tt.noRewind {
				r.GetBody = nil
			}
			if got := Cost(r); got != tt.want {
				t.Errorf("Cost = %d, want %d", got, tt.want)
			}
			if sent, _ := io.ReadAll(r.Body); !bytes.Equal(sent, tt.body) {
				t.Error("costing the batch consumed the body it must send")
			}
		})
	}
}

// TestThrottledRequestInABatchPausesTheScope: Graph answers a batch 200 with a 429 inside; the
// limiter must see that Retry-After, and the caller must still get the whole answer.
func TestThrottledRequestInABatchPausesTheScope(t *testing.T) {
	answer := `{"responses":[{"id":"2","status":200,"headers":{},"body":{"id":"x"}},` +
		`{"id":"1","status":429,"headers":{"Retry-After":"5"},"body":{"error":{"code":"TooManyRequests"}}}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	c := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	l := New(c, LargeTenant)
	req, _ := http.NewRequestWithContext(WithScope(context.Background(), "app-a"), "POST", srv.URL+"/v1.0/$batch", strings.NewReader(threeReads))
	resp, err := l.RoundTripper(http.DefaultTransport).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(got) != answer {
		t.Errorf("the caller got %q, want the whole answer", got)
	}
	if d := waitTook(t, c, l, "app-a", 1); d < 5*time.Second {
		t.Errorf("after a sub-request's Retry-After: 5 the next request went after %v", d)
	}
}

// TestBatchBodyReadableOnceIsCostedAndSent: Kiota's gzipped bodies cannot be re-read; the limiter
// must still charge what the batch holds and send it whole.
func TestBatchBodyReadableOnceIsCostedAndSent(t *testing.T) {
	body := gzipped(threeReads)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got, _ := io.ReadAll(r.Body); !bytes.Equal(got, body) {
			t.Error("the batch arrived altered")
		}
		_, _ = io.WriteString(w, `{"responses":[]}`)
	}))
	t.Cleanup(srv.Close)
	c := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	l := New(c, 10)
	req, _ := http.NewRequestWithContext(WithScope(context.Background(), "app-a"), "POST", srv.URL+"/v1.0/$batch", io.NopCloser(bytes.NewReader(body)))
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := l.RoundTripper(http.DefaultTransport).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if d := waitTook(t, c, l, "app-a", 6); d != 0 {
		t.Errorf("6 of 10 units waited %v: the batch of 4 was overcharged", d)
	}
	if d := waitTook(t, c, l, "app-a", 1); d == 0 {
		t.Error("the batch was undercharged: the bucket still had room")
	}
}

func TestCostAboveTheBudgetSpendsAllOfIt(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	l := New(c, 10)
	if d := waitTook(t, c, l, "app-a", unreadableBatchCost); d != 0 {
		t.Errorf("a cost of %d on a full bucket of 10 waited %v", unreadableBatchCost, d)
	}
	if d := waitTook(t, c, l, "app-a", 1); d == 0 {
		t.Error("the bucket was not emptied")
	}
}
