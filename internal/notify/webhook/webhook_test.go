package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/egress"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/notifytest"
)

func TestPayloadGolden(t *testing.T) {
	for name, a := range notifytest.Every() {
		t.Run(name, func(t *testing.T) {
			body, err := json.Marshal(NewPayload(a))
			if err != nil {
				t.Fatal(err)
			}
			var indented bytes.Buffer
			if err := json.Indent(&indented, body, "", "  "); err != nil {
				t.Fatal(err)
			}
			indented.WriteByte('\n')
			notifytest.Golden(t, name, indented.Bytes())
		})
	}
}

// receiver is what a careful receiver checks: method, headers, signature, schema. It records what
// it got, and answers status.
type receiver struct {
	t       *testing.T
	key     []byte
	status  int
	got     Payload
	headers http.Header
}

func (rv *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rv.headers = r.Header.Clone()
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("User-Agent") != "credwatch" {
		rv.t.Errorf("got %s with Content-Type %q, User-Agent %q", r.Method, r.Header.Get("Content-Type"), r.Header.Get("User-Agent"))
	}
	if rv.key != nil {
		if err := Verify(body, r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderSignature), rv.key); err != nil {
			rv.t.Errorf("Verify: %v", err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rv.got); err != nil {
		rv.t.Errorf("payload does not decode as Payload: %v", err)
	}
	w.WriteHeader(rv.status)
}

func TestSendDeliversThePayload(t *testing.T) {
	a := notifytest.Alerts()["reminder"]
	tests := map[string]struct {
		key        []byte
		wantSigned bool
	}{
		"signed":   {key: []byte("s3cret-signing-key-of-32-bytes-at-least"), wantSigned: true},
		"unsigned": {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rv := &receiver{t: t, key: tc.key, status: http.StatusNoContent}
			srv := httptest.NewServer(rv)
			defer srv.Close()
			ch, err := New(srv.URL+"/hook", tc.key, srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			ch.now = func() time.Time { return notifytest.At.Add(time.Minute) }

			if err := ch.Send(context.Background(), a); err != nil {
				t.Fatalf("Send: %v", err)
			}
			if got := rv.headers.Get(HeaderDelivery); got != a.ID {
				t.Errorf("%s = %q, want the alert ID %q", HeaderDelivery, got, a.ID)
			}
			signed := rv.headers.Get(HeaderSignature) != ""
			if signed != tc.wantSigned || (rv.headers.Get(HeaderTimestamp) != "") != tc.wantSigned {
				t.Errorf("signature headers present = %v, want %v", signed, tc.wantSigned)
			}
			if tc.wantSigned && rv.headers.Get(HeaderTimestamp) != "1796202060" {
				t.Errorf("%s = %q, want the sending time 1796202060", HeaderTimestamp, rv.headers.Get(HeaderTimestamp))
			}
			if rv.got.SchemaVersion != SchemaVersion || rv.got.ID != a.ID || rv.got.Kind != alertkind.Reminder ||
				rv.got.Watch != (Watch{"platform", "aks-prod"}) || rv.got.Credential == nil || rv.got.Credential.KeyID != "k1" {
				t.Errorf("received %+v", rv.got)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	key := []byte("s3cret-signing-key")
	body := []byte(`{"schemaVersion":"credwatch.dev/v1"}`)
	sig := sign(key, "1796202060", body)
	tests := map[string]struct {
		body           []byte
		timestamp, sig string
		key            []byte
		wantErr        bool
	}{
		"as sent":               {body: body, timestamp: "1796202060", sig: sig, key: key},
		"wrong key":             {body: body, timestamp: "1796202060", sig: sig, key: []byte("another-key"), wantErr: true},
		"body changed":          {body: []byte(`{"schemaVersion":"credwatch.dev/v2"}`), timestamp: "1796202060", sig: sig, key: key, wantErr: true},
		"timestamp changed":     {body: body, timestamp: "1796202061", sig: sig, key: key, wantErr: true},
		"no prefix":             {body: body, timestamp: "1796202060", sig: strings.TrimPrefix(sig, "sha256="), key: key, wantErr: true},
		"not hex":               {body: body, timestamp: "1796202060", sig: "sha256=zz", key: key, wantErr: true},
		"timestamp not seconds": {body: body, timestamp: "2026-12-02T09:01:00Z", sig: sig, key: key, wantErr: true},
		"no key":                {body: body, timestamp: "1796202060", sig: sig, wantErr: true},
		"the worked example in docs/webhook.md": {
			body:      []byte(`{"schemaVersion":"credwatch.dev/v1","id":"e97d60480a7a89d295ca34bf409ec4b1"}`),
			timestamp: "1796202060", sig: "sha256=4df21e6a7bd26c2a171cc00027d0bd847b8d3519de3b866cb985f13288f93f0d",
			key: []byte("example-key"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Verify(tc.body, tc.timestamp, tc.sig, tc.key)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Verify() = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidSignature) {
				t.Errorf("Verify() = %v, not an ErrInvalidSignature", err)
			}
		})
	}
}

func TestSendClassifiesAnswers(t *testing.T) {
	tests := map[string]struct {
		status         int
		retryAfter     string
		wantErr        bool
		wantPermanent  bool
		wantRetryAfter time.Duration
	}{
		"200 delivered":            {status: 200},
		"202 accepted":             {status: 202},
		"500 retried":              {status: 500, wantErr: true},
		"503 names its wait":       {status: 503, retryAfter: "30", wantErr: true, wantRetryAfter: 30 * time.Second},
		"429 names its wait":       {status: 429, retryAfter: "7", wantErr: true, wantRetryAfter: 7 * time.Second},
		"429 with a date":          {status: 429, retryAfter: "Wed, 02 Dec 2026 09:01:00 GMT", wantErr: true},
		"408 retried":              {status: 408, wantErr: true},
		"410 gone is permanent":    {status: 410, wantErr: true, wantPermanent: true},
		"400 rejected, permanent":  {status: 400, wantErr: true, wantPermanent: true},
		"401 unauthorized, perm.":  {status: 401, wantErr: true, wantPermanent: true},
		"404 unknown, permanent":   {status: 404, wantErr: true, wantPermanent: true},
		"502 from a proxy retried": {status: 502, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte("echo of " + r.URL.Path))
			}))
			defer srv.Close()
			hook := srv.URL + "/hooks/SECRET-PATH?sig=SECRET-SIG"
			ch, err := New(hook, []byte("SECRET-KEY-0123456789abcdef0123456789"), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = ch.Send(context.Background(), notifytest.Alerts()["expired"])
			if (err != nil) != tc.wantErr {
				t.Fatalf("Send() = %v, want error %v", err, tc.wantErr)
			}
			if err == nil {
				return
			}
			checkDeliveryError(t, err, tc.wantPermanent, tc.wantRetryAfter, "SECRET", "echo of")
		})
	}
}

func TestSendTransportFailureIsRetriedAndRedacted(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	hook := srv.URL + "/hooks/SECRET-PATH?sig=SECRET-SIG"
	srv.Close()
	ch, err := New(hook, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = ch.Send(context.Background(), notifytest.Alerts()["reminder"])
	if err == nil {
		t.Fatal("Send to a closed server succeeded")
	}
	checkDeliveryError(t, err, false, 0, "SECRET")
	if !strings.Contains(err.Error(), "connect") {
		t.Errorf("error %q does not say why the receiver was not reached", err)
	}
}

// checkDeliveryError asserts err is a *notify.DeliveryError classified as wanted whose message
// holds none of the forbidden strings.
func checkDeliveryError(t *testing.T, err error, permanent bool, retryAfter time.Duration, forbidden ...string) {
	t.Helper()
	var de *notify.DeliveryError
	if !errors.As(err, &de) {
		t.Fatalf("error %T %q is not a *notify.DeliveryError", err, err)
	}
	t.Logf("error: %v", err)
	if de.Permanent != permanent || de.RetryAfter != retryAfter {
		t.Errorf("Permanent = %v, RetryAfter = %v; want %v, %v (%v)", de.Permanent, de.RetryAfter, permanent, retryAfter, err)
	}
	for _, f := range forbidden {
		if strings.Contains(err.Error(), f) {
			t.Errorf("error message %q contains %q", err, f)
		}
	}
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, raw := range []string{"", "hooks.example.com/x", "ftp://hooks.example.com/SECRET", "https:///SECRET", "http://[::1/SECRET"} {
		t.Run(raw, func(t *testing.T) {
			_, err := New(raw, nil, nil)
			if err == nil {
				t.Fatal("New accepted it")
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error %q quotes the URL", err)
			}
		})
	}
}

func TestNewRefusesAShortSigningKey(t *testing.T) {
	_, err := New("https://hooks.example/x", []byte("SECRET-0123456789abcdef01234567"), nil)
	if err == nil || !strings.Contains(err.Error(), "shorter than 32 bytes") || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("New with a 31-byte key = %v, want it refused without quoting the key", err)
	}
	if _, err := New("https://hooks.example/x", []byte("SECRET-0123456789abcdef012345678"), nil); err != nil {
		t.Errorf("New with a 32-byte key = %v", err)
	}
}

// A webhook a watch names goes through the destination policy's client: refused inside, with
// nothing said of where the name led, and no redirect followed.
func TestSendThroughTheDestinationPolicy(t *testing.T) {
	const refused = "refused by the operator's destination policy"
	loopback := egress.Policy{Allow: egress.Prefixes{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	tests := map[string]struct {
		policy       egress.Policy
		host         string // in place of 127.0.0.1
		redirect     bool
		wantErr      string // exactly
		wantReceived int
	}{
		"to 127.0.0.1":                      {wantErr: refused},
		"to a name that resolves there":     {host: "localhost", wantErr: refused},
		"to loopback, allowlisted":          {policy: loopback, wantReceived: 1},
		"to a name for it, allowlisted":     {policy: loopback, host: "localhost", wantReceived: 1},
		"to a redirect, which is an answer": {policy: loopback, redirect: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rv := &receiver{t: t, status: http.StatusNoContent}
			var received atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				received.Add(1)
				rv.ServeHTTP(w, r)
			}))
			defer srv.Close()
			first := srv
			if tc.redirect {
				first = httptest.NewServer(http.RedirectHandler(srv.URL+"/hook", http.StatusFound))
				defer first.Close()
			}
			hook := first.URL + "/hooks/SECRET-PATH"
			if tc.host != "" {
				hook = strings.Replace(hook, "127.0.0.1", tc.host, 1)
			}
			ch, err := New(hook, nil, tc.policy.HTTPClient(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			err = ch.Send(context.Background(), notifytest.Alerts()["reminder"])
			switch {
			case tc.wantErr != "":
				checkDeliveryError(t, err, true, 0)
				if err.Error() != tc.wantErr {
					t.Errorf("Send() = %q, want %q and nothing of where it led", err, tc.wantErr)
				}
			case tc.redirect:
				checkDeliveryError(t, err, false, 0, "SECRET")
				if !strings.Contains(err.Error(), "302 Found, a redirect, which is not followed") {
					t.Errorf("Send() = %q, want it to say the redirect was not followed", err)
				}
			case err != nil:
				t.Errorf("Send() = %v", err)
			}
			if n := int(received.Load()); n != tc.wantReceived {
				t.Errorf("the receiver got %d requests, want %d", n, tc.wantReceived)
			}
		})
	}
}
