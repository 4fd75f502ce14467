package httppost

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/notify"
)

func TestUnitPostJSON(t *testing.T) {
	var got *http.Request
	status, retry := http.StatusOK, ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		if retry != "" {
			w.Header().Set("Retry-After", retry)
		}
		if status == http.StatusFound {
			w.Header().Set("Location", "https://elsewhere.example/")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte("echo of the request: /hooks/T0KEN"))
	}))
	defer srv.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	url := srv.URL + "/hooks/T0KEN?sig=S1G"
	post := func() error {
		return PostJSON(context.Background(), client, url, []byte(`{"a":1}`), http.Header{"X-Signature": {"v1"}})
	}

	if err := post(); err != nil || got.Header.Get("Content-Type") != "application/json" || got.Header.Get("User-Agent") != "credwatch" || got.Header.Get("X-Signature") != "v1" {
		t.Fatalf("2xx: %v, headers %v", err, got.Header)
	}
	for _, tc := range []struct {
		status        int
		retry         string
		wantPermanent bool
		wantRetry     time.Duration
		wantText      string
	}{
		{status: http.StatusForbidden, wantPermanent: true, wantText: "answered 403 Forbidden"},
		{status: http.StatusTooManyRequests, retry: "30", wantRetry: 30 * time.Second, wantText: "answered 429"},
		{status: http.StatusRequestTimeout, wantText: "answered 408"},
		{status: http.StatusServiceUnavailable, retry: "soon", wantText: "answered 503"},
		{status: http.StatusFound, wantText: "a redirect, which is not followed"},
	} {
		status, retry = tc.status, tc.retry
		err := post()
		var de *notify.DeliveryError
		if !errors.As(err, &de) || de.Permanent != tc.wantPermanent || de.RetryAfter != tc.wantRetry || !strings.Contains(err.Error(), tc.wantText) {
			t.Errorf("%d: %#v, want permanent %v, retry after %v, saying %q", tc.status, err, tc.wantPermanent, tc.wantRetry, tc.wantText)
		}
		if strings.Contains(err.Error(), "T0KEN") || strings.Contains(err.Error(), "S1G") {
			t.Errorf("%d: the error carries the URL or the body: %v", tc.status, err)
		}
	}

	srv.Close()
	err := post()
	var de *notify.DeliveryError
	if !errors.As(err, &de) || de.Permanent || strings.Contains(err.Error(), "T0KEN") || strings.Contains(err.Error(), "S1G") {
		t.Errorf("a receiver gone: %v, want a retried failure that does not quote the URL", err)
	}
}

func TestUnitValidateURLNeverQuotesIt(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://hooks.example/T0KEN": true,
		"http://127.0.0.1:8080/x":     true,
		"":                            false,
		"hooks.example/T0KEN":         false,
		"ftp://hooks.example/T0KEN":   false,
	} {
		err := ValidateURL(raw)
		if (err == nil) != ok || err != nil && strings.Contains(err.Error(), "T0KEN") {
			t.Errorf("ValidateURL(%q) = %v, want ok %v, and never the URL", raw, err, ok)
		}
	}
	secrets := URLSecrets("https://hooks.example/a b?sig=S1G")
	if len(secrets) != 3 || secrets[2] != "/a%20b?sig=S1G" {
		t.Errorf("URLSecrets = %q, want the URL as given, re-encoded, and its path and query", secrets)
	}
}
