package teams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/notifytest"
)

func TestCardGolden(t *testing.T) {
	for name, a := range notifytest.Every() {
		t.Run(name, func(t *testing.T) {
			body, err := json.MarshalIndent(render(a), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			notifytest.Golden(t, name, append(body, '\n'))
		})
	}
}

// workflow stands in for a Workflows webhook trigger: it rejects what the "Post card in a chat or
// channel" step could not post, the way the real trigger's schema check does, and answers 202.
func workflow(t *testing.T, gotFacts *[][2]string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := checkSchema(body, gotFacts); err != nil {
			t.Errorf("payload rejected: %v\n%s", err, body)
			http.Error(w, `{"error":{"code":"TriggerInputSchemaMismatch"}}`, http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}

func checkSchema(body []byte, gotFacts *[][2]string) error {
	var m struct {
		Type        string `json:"type"`
		Attachments []struct {
			ContentType string           `json:"contentType"`
			ContentURL  *json.RawMessage `json:"contentUrl"`
			Content     struct {
				Schema  string `json:"$schema"`
				Type    string `json:"type"`
				Version string `json:"version"`
				Body    []struct {
					Type  string `json:"type"`
					Text  string `json:"text"`
					Facts []struct{ Title, Value string }
				} `json:"body"`
			} `json:"content"`
		} `json:"attachments"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return err
	}
	if m.Type != "message" || len(m.Attachments) != 1 {
		return errors.New(`want "type":"message" with one attachment`)
	}
	att := m.Attachments[0]
	if att.ContentType != "application/vnd.microsoft.card.adaptive" || !bytes.Contains(body, []byte(`"contentUrl":null`)) {
		return errors.New("want an inline adaptive card attachment with contentUrl null")
	}
	c := att.Content
	if c.Type != "AdaptiveCard" || c.Schema != "http://adaptivecards.io/schemas/adaptive-card.json" || c.Version != "1.4" {
		return errors.New("want an AdaptiveCard 1.4 with $schema")
	}
	if len(c.Body) == 0 || c.Body[0].Type != "TextBlock" || c.Body[0].Text == "" {
		return errors.New("want a title TextBlock first")
	}
	for _, e := range c.Body {
		if e.Type == "FactSet" {
			for _, f := range e.Facts {
				*gotFacts = append(*gotFacts, [2]string{f.Title, f.Value})
			}
			return nil
		}
	}
	return errors.New("want a FactSet")
}

func TestSendPostsTheCard(t *testing.T) {
	for name, a := range notifytest.Every() {
		t.Run(name, func(t *testing.T) {
			var facts [][2]string
			srv := httptest.NewServer(workflow(t, &facts))
			defer srv.Close()
			ch, err := New(srv.URL+"/workflows/0c1d/triggers/manual/paths/invoke?api-version=1&sig=SECRET-SIG", srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			if err := ch.Send(context.Background(), a); err != nil {
				t.Fatalf("Send: %v", err)
			}
			want := a.Lines()
			for i := range want {
				want[i][1] = escapeMarkdown(want[i][1])
			}
			if !reflect.DeepEqual(facts, want) {
				t.Errorf("facts = %q, want the alert's lines %q", facts, want)
			}
		})
	}
}

func TestSendClassifiesFailures(t *testing.T) {
	tests := map[string]struct {
		status         int
		retryAfter     string
		wantPermanent  bool
		wantRetryAfter time.Duration
	}{
		"429 throttled names its wait":     {status: 429, retryAfter: "30", wantRetryAfter: 30 * time.Second},
		"400 schema mismatch is permanent": {status: 400, wantPermanent: true},
		"401 bad signature is permanent":   {status: 401, wantPermanent: true},
		"404 flow deleted is permanent":    {status: 404, wantPermanent: true},
		"502 gateway is retried":           {status: 502},
		"408 timed out reading is retried": {status: 408},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				http.Error(w, `{"error":{"message":"echo `+r.URL.RawQuery+`"}}`, tc.status)
			}))
			defer srv.Close()
			ch, err := New(srv.URL+"/workflows/0c1d/triggers/manual/paths/invoke?api-version=1&sig=SECRET-SIG", nil)
			if err != nil {
				t.Fatal(err)
			}
			err = ch.Send(context.Background(), notifytest.Alerts()["expired"])
			checkDeliveryError(t, err, tc.wantPermanent, tc.wantRetryAfter)
		})
	}
}

func TestSendTransportFailureIsRetriedAndRedacted(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	hook := srv.URL + "/workflows/SECRET-ID/triggers/manual/paths/invoke?api-version=1&sig=SECRET-SIG"
	srv.Close()
	ch, err := New(hook, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkDeliveryError(t, ch.Send(context.Background(), notifytest.Alerts()["reminder"]), false, 0)
}

// checkDeliveryError asserts err is a *notify.DeliveryError classified as wanted that quotes
// neither the webhook's secret parts nor the response body.
func checkDeliveryError(t *testing.T, err error, permanent bool, retryAfter time.Duration) {
	t.Helper()
	var de *notify.DeliveryError
	if !errors.As(err, &de) {
		t.Fatalf("error %T %v is not a *notify.DeliveryError", err, err)
	}
	t.Logf("error: %v", err)
	if de.Permanent != permanent || de.RetryAfter != retryAfter {
		t.Errorf("Permanent = %v, RetryAfter = %v; want %v, %v", de.Permanent, de.RetryAfter, permanent, retryAfter)
	}
	if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "echo") {
		t.Errorf("error message %q quotes the URL or the response", err)
	}
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, raw := range []string{"", "prod-12.westeurope.logic.azure.com/SECRET", "ftp://x/SECRET"} {
		if _, err := New(raw, nil); err == nil || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("New(%q) = %v, want an error that does not quote the URL", raw, err)
		}
	}
}

func TestNameIsTeams(t *testing.T) {
	ch, err := New("https://example.invalid/x", nil)
	if err != nil || ch.Name() != "teams" {
		t.Errorf("New() = %v, Name() = %q", err, ch.Name())
	}
}

func TestAzureTextCannotBecomeALink(t *testing.T) {
	a := notify.Alert{Kind: alertkind.CheckFailing, DisplayName: "[Renew here](https://evil.example) *now*", AppID: "x"}
	card := render(a).Attachments[0].Content
	for _, text := range []string{card.Body[0].Text, card.Body[1].Facts[0].Value} {
		if strings.Contains(text, "[Renew here](") || strings.Contains(text, " *now*") {
			t.Errorf("%q keeps markdown from Azure", text)
		}
		if !strings.Contains(text, `\[Renew here\]\(https://evil.example\) \*now\*`) {
			t.Errorf("%q does not show the display name as written", text)
		}
	}
}
