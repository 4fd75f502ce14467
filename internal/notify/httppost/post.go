// Package httppost POSTs JSON for the channels that are webhooks (Teams, the generic webhook) and
// keeps the URL, which is their credential, out of every error.
package httppost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/credwatch/credwatch/internal/notify"
)

// PostJSON POSTs body as JSON to rawURL and returns nil on any 2xx answer, otherwise a
// *notify.DeliveryError. Its message names the host and the HTTP status but never the URL, whose
// path or query is the credential for Slack, Teams and most bridges, nor the response body, which
// receivers fill with echoes of the request. header adds to Content-Type and User-Agent.
func PostJSON(ctx context.Context, client *http.Client, rawURL string, body []byte, header http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return &notify.DeliveryError{Permanent: true, Err: notify.Redact(err, URLSecrets(rawURL)...)}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "credwatch")
	}
	resp, err := client.Do(req)
	if err != nil {
		if refused := notify.Refused(err); refused != nil {
			return refused
		}
		return &notify.DeliveryError{Err: notify.Redact(err, URLSecrets(rawURL)...)}
	}
	defer func() { _ = resp.Body.Close() }() // its answer is read: a failed close tells nothing more
	// Drained so the connection is reused; bounded so a chatty receiver cannot stall us.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err = fmt.Errorf("%s answered %s", req.URL.Host, resp.Status)
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// Only a watch's client stops at one: where it points is up to whoever answered.
		err = fmt.Errorf("%w, a redirect, which is not followed: set the URL it points to", err)
	}
	return &notify.DeliveryError{
		Permanent:  PermanentStatus(resp.StatusCode),
		RetryAfter: retryAfter(resp.Header.Get("Retry-After")),
		Err:        err,
	}
}

// PermanentStatus reports whether an HTTP status means sending again cannot help until someone
// changes configuration: a 4xx, except 408 and 429 which ask us to come back.
func PermanentStatus(code int) bool {
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests
}

// ValidateURL checks that rawURL is an absolute http or https URL. Its error never quotes the URL,
// because the URL is the credential.
func ValidateURL(rawURL string) error {
	if rawURL == "" {
		return errors.New("the URL is empty")
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errors.New("the URL is not an absolute http(s) URL")
	}
	return nil
}

// retryAfter reads a Retry-After header in seconds, the form Slack, Teams and most bridges use.
func retryAfter(v string) time.Duration {
	s, err := strconv.Atoi(v)
	if err != nil || s < 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}

// URLSecrets are the spellings in which rawURL can appear in a net/http error: as given, as
// re-encoded by url.URL, and its path and query alone, which a redirect can carry to another host.
func URLSecrets(rawURL string) []string {
	s := []string{rawURL}
	if u, err := url.Parse(rawURL); err == nil {
		s = append(s, u.String())
		if p := u.RequestURI(); len(p) > 1 {
			s = append(s, p)
		}
	}
	return s
}
