package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slacktest"

	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/egress"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/notifytest"
)

const token = "xoxb-1234-5678-SECRETTOKEN"

func TestMessageGolden(t *testing.T) {
	for name, a := range notifytest.Every() {
		t.Run(name, func(t *testing.T) {
			body, err := json.MarshalIndent(message(a), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			notifytest.Golden(t, name, append(body, '\n'))
		})
	}
}

func TestBlocksStayWithinSlackLimits(t *testing.T) {
	long := notifytest.Alerts()["check-failing"]
	long.DisplayName = strings.Repeat("very-long-service-principal-name-", 6)
	long.Cluster = "aks-prod-weu"
	long.Problem = strings.Repeat("x", 3000)
	long.Credential = notifytest.Alerts()["reminder"].Credential // every fact at once: more than ten fields
	tests := map[string]notify.Alert{"long": long, "escaped": {Kind: alertkind.CheckFailing, AppID: "a<b>&c", Fix: "run <this> && that"}}
	for name, a := range tests {
		t.Run(name, func(t *testing.T) {
			fields := 0
			for _, b := range blocks(a) {
				switch b := b.(type) {
				case *slack.HeaderBlock:
					if n := len([]rune(b.Text.Text)); n > maxHeader {
						t.Errorf("header has %d characters", n)
					}
				case *slack.SectionBlock:
					if len(b.Fields) > maxFields {
						t.Errorf("section has %d fields", len(b.Fields))
					}
					for _, f := range b.Fields {
						if n := len([]rune(f.Text)); n > maxField {
							t.Errorf("field has %d characters", n)
						}
						// Values from Azure are shown as plain text, where nothing is markup.
						if f.Type != slack.PlainTextType {
							t.Errorf("field %q is %s, want plain_text", f.Text, f.Type)
						}
					}
					fields += len(b.Fields)
				}
			}
			if fields != len(a.Lines()) {
				t.Errorf("%d fields for %d lines", fields, len(a.Lines()))
			}
		})
	}
}

func TestIsCommand(t *testing.T) {
	tests := map[string]bool{
		"az ad app credential reset --id 3f2c8a5e --append":                             true,
		"kubectl -n platform annotate credentialwatch aks-prod credwatch.dev/check=now": true,
		"Grant the operator's identity Application.Read.All.":                           false,
		"ask the owner of the app to renew it.":                                         false,
		"":                                                                              false,
	}
	for fix, want := range tests {
		if got := isCommand(fix); got != want {
			t.Errorf("isCommand(%q) = %v, want %v", fix, got, want)
		}
	}
}

// listen connects an RTM client to srv: slacktest relays what chat.postMessage received over its
// websocket and nowhere else, so this is how a test sees what Slack got.
func listen(t *testing.T, srv *slacktest.Server) *slack.RTM {
	rtm := slack.New("xoxb-listener", slack.OptionAPIURL(srv.GetAPIURL())).NewRTM()
	done := make(chan struct{})
	go func() {
		defer close(done)
		rtm.ManageConnection()
	}()
	t.Cleanup(func() {
		_ = rtm.Disconnect()
		<-done
	})
	return rtm
}

func received(t *testing.T, rtm *slack.RTM) *slack.MessageEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-rtm.IncomingEvents:
			if m, ok := ev.Data.(*slack.MessageEvent); ok {
				return m
			}
		case <-timeout:
			t.Fatal("slacktest relayed no message")
			return nil
		}
	}
}

func TestSendPostsToTheChannel(t *testing.T) {
	srv := slacktest.NewTestServer()
	srv.Start()
	t.Cleanup(srv.Stop)
	rtm := listen(t, srv)
	ch, err := New(Options{Token: token, Channel: "C0CREDWATCH", APIURL: strings.TrimSuffix(srv.GetAPIURL(), "/")})
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range notifytest.Every() {
		t.Run(name, func(t *testing.T) {
			if err := ch.Send(context.Background(), a); err != nil {
				t.Fatalf("Send: %v", err)
			}
			got := received(t, rtm)
			want := message(a)
			if got.Channel != "C0CREDWATCH" || got.Text != want.Text {
				t.Errorf("received channel %q, text %q; want C0CREDWATCH, %q", got.Channel, got.Text, want.Text)
			}
			gotBlocks, _ := json.Marshal(got.Blocks.BlockSet)
			wantBlocks, _ := json.Marshal(want.Blocks.BlockSet)
			if !bytes.Equal(gotBlocks, wantBlocks) {
				t.Errorf("received blocks\n%s\nwant\n%s", gotBlocks, wantBlocks)
			}
		})
	}
}

func TestSendClassifiesSlackErrors(t *testing.T) {
	tests := map[string]struct {
		status         int
		retryAfter     string
		body           string
		wantPermanent  bool
		wantRetryAfter time.Duration
		wantText       string
	}{
		"rate limited": {
			status: 429, retryAfter: "7", body: `{"ok":false,"error":"ratelimited"}`,
			wantRetryAfter: 7 * time.Second, wantText: "rate limit",
		},
		"bad token": {
			status: 200, body: `{"ok":false,"error":"invalid_auth"}`,
			wantPermanent: true, wantText: "invalid_auth (Slack rejected the token",
		},
		"unknown channel": {
			status: 200, body: `{"ok":false,"error":"channel_not_found"}`,
			wantPermanent: true, wantText: "channel C0CREDWATCH: channel_not_found",
		},
		"rejected blocks": {
			status: 200, body: `{"ok":false,"error":"invalid_blocks"}`,
			wantPermanent: true, wantText: "invalid_blocks",
		},
		"Slack had a problem": {status: 200, body: `{"ok":false,"error":"internal_error"}`, wantText: "internal_error"},
		"Slack is down":       {status: 503, body: `<html>`, wantText: "503"},
		"bad request":         {status: 400, body: `<html>`, wantPermanent: true, wantText: "400"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := slacktest.NewTestServer(func(c slacktest.Customize) {
				c.Handle("/chat.postMessage", func(w http.ResponseWriter, r *http.Request) {
					if r.FormValue("token") != token {
						t.Errorf("chat.postMessage got token %q", r.FormValue("token"))
					}
					if tc.retryAfter != "" {
						w.Header().Set("Retry-After", tc.retryAfter)
					}
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tc.status)
					_, _ = io.WriteString(w, tc.body)
				})
			})
			srv.Start()
			t.Cleanup(srv.Stop)
			ch, err := New(Options{Token: token, Channel: "C0CREDWATCH", APIURL: srv.GetAPIURL()})
			if err != nil {
				t.Fatal(err)
			}
			err = ch.Send(context.Background(), notifytest.Alerts()["expired"])
			checkDeliveryError(t, err, tc.wantPermanent, tc.wantRetryAfter, tc.wantText)
		})
	}
}

func TestSendToWebhook(t *testing.T) {
	a := notifytest.Alerts()["reminder"]
	var got slack.WebhookMessage
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/services/T000/B000/SECRETHOOK" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("got %s with Content-Type %q", r.URL.Path, r.Header.Get("Content-Type"))
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("decoding the webhook body: %v", err)
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	ch, err := New(Options{WebhookURL: srv.URL + "/services/T000/B000/SECRETHOOK", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Send(context.Background(), a); err != nil {
		t.Fatalf("Send: %v", err)
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(message(a))
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("webhook received\n%s\nwant\n%s", gotJSON, wantJSON)
	}
}

func TestSendToWebhookClassifiesFailures(t *testing.T) {
	tests := map[string]struct {
		status         int
		retryAfter     string
		wantPermanent  bool
		wantRetryAfter time.Duration
	}{
		"no_service: webhook revoked": {status: 404, wantPermanent: true},
		"invalid_payload":             {status: 400, wantPermanent: true},
		"channel_is_archived":         {status: 410, wantPermanent: true},
		"rate limited":                {status: 429, retryAfter: "30", wantRetryAfter: 30 * time.Second},
		"rollup_error":                {status: 500},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, name)
			}))
			defer srv.Close()
			ch, err := New(Options{WebhookURL: srv.URL + "/services/T000/B000/SECRETHOOK"})
			if err != nil {
				t.Fatal(err)
			}
			checkDeliveryError(t, ch.Send(context.Background(), notifytest.Alerts()["reminder"]), tc.wantPermanent, tc.wantRetryAfter, "webhook")
		})
	}
}

func TestSendTransportFailuresAreRetriedAndRedacted(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	tests := map[string]Options{
		"token":   {Token: token, Channel: "C0CREDWATCH", APIURL: srv.URL + "/api/"},
		"webhook": {WebhookURL: srv.URL + "/services/T000/B000/SECRETHOOK"},
	}
	for name, o := range tests {
		t.Run(name, func(t *testing.T) {
			ch, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			checkDeliveryError(t, ch.Send(context.Background(), notifytest.Alerts()["reminder"]), false, 0, "connect")
		})
	}
}

// checkDeliveryError asserts err is a *notify.DeliveryError classified as wanted whose message
// says wantText and holds neither the token nor the webhook URL.
func checkDeliveryError(t *testing.T, err error, permanent bool, retryAfter time.Duration, wantText string) {
	t.Helper()
	var de *notify.DeliveryError
	if !errors.As(err, &de) {
		t.Fatalf("error %T %v is not a *notify.DeliveryError", err, err)
	}
	t.Logf("error: %v", err)
	if de.Permanent != permanent || de.RetryAfter != retryAfter {
		t.Errorf("Permanent = %v, RetryAfter = %v; want %v, %v", de.Permanent, de.RetryAfter, permanent, retryAfter)
	}
	if !strings.Contains(err.Error(), wantText) {
		t.Errorf("error %q does not say %q", err, wantText)
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("error %q quotes the token or the webhook URL", err)
	}
}

func TestNewRejectsIncompleteOrMixedOptions(t *testing.T) {
	hook := "https://hooks.slack.com/services/T000/B000/SECRETHOOK"
	tests := map[string]struct {
		o       Options
		wantErr string
	}{
		"token mode":              {o: Options{Token: token, Channel: "C0CREDWATCH"}},
		"webhook mode":            {o: Options{WebhookURL: hook}},
		"nothing":                 {o: Options{}, wantErr: "set a bot token and a channel, or a webhook URL"},
		"token without channel":   {o: Options{Token: token}, wantErr: "a token needs a channel"},
		"channel without token":   {o: Options{Channel: "C0CREDWATCH"}, wantErr: "a channel needs a bot token"},
		"both":                    {o: Options{Token: token, Channel: "C0CREDWATCH", WebhookURL: hook}, wantErr: "not both"},
		"webhook with a channel":  {o: Options{Channel: "C0CREDWATCH", WebhookURL: hook}, wantErr: "not both"},
		"webhook with an API URL": {o: Options{WebhookURL: hook, APIURL: "http://127.0.0.1/api/"}, wantErr: "token mode only"},
		"webhook URL not a URL":   {o: Options{WebhookURL: "hooks.slack.com/services/SECRETHOOK"}, wantErr: "not an absolute"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ch, err := New(tc.o)
			if tc.wantErr == "" {
				if err != nil || ch.Name() != "slack" {
					t.Fatalf("New() = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New() = %v, want an error saying %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error %q quotes a secret", err)
			}
		})
	}
}

// A webhook a watch names goes through the destination policy's client; Slack's webhooks are
// not inside, a local listener is.
func TestSendToWebhookThroughTheDestinationPolicy(t *testing.T) {
	const refused = "refused by the operator's destination policy"
	var received atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		received.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	ch, err := New(Options{WebhookURL: srv.URL + "/services/T000/B000/SECRETHOOK", HTTPClient: egress.Policy{}.HTTPClient(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	err = ch.Send(context.Background(), notifytest.Alerts()["reminder"])
	checkDeliveryError(t, err, true, 0, refused)
	if err.Error() != refused {
		t.Errorf("Send() = %q, want %q and nothing of where it led", err, refused)
	}
	if n := received.Load(); n != 0 {
		t.Errorf("the listener got %d requests, want none", n)
	}
}
