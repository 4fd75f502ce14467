package delivery

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alerting"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

// notifier is a channel whose sends fail with err, and which counts them.
type notifier struct {
	err  error
	sent []string
}

func (n *notifier) Name() string { return "fake" }
func (n *notifier) Send(_ context.Context, a notify.Alert) error {
	n.sent = append(n.sent, a.ID)
	return n.err
}

// expiring is a watch whose one secret has reached its 7d reminder.
func expiring() *v1alpha1.CredentialWatch {
	end := metav1.NewTime(now.Add(5 * day))
	last := metav1.NewTime(now.Add(-time.Hour))
	return &v1alpha1.CredentialWatch{Status: v1alpha1.CredentialWatchStatus{LastCheckTime: &last,
		Credentials: []v1alpha1.Credential{{KeyID: "k1", Source: v1alpha1.SourceApplication, Type: v1alpha1.CredentialTypePassword, EndTime: end}}}}
}

func sender(obj *v1alpha1.CredentialWatch, events *targettest.Events, claims *int, claimErr error) Sender {
	return Sender{Obj: obj, Events: events, Now: now,
		Claim: func(context.Context, *v1alpha1.AlertsStatus) error {
			*claims++
			return claimErr
		},
		Compose: func(p alerting.Planned) notify.Alert {
			return notify.Alert{ID: p.Subject + "@" + p.Step.Name, Kind: p.Kind}
		},
	}
}

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

func TestWatchDelivers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		sendErr    error
		claimErr   error
		wantSent   int
		wantLedger int // entries in status.alerts.sent after
		wantReason string
		wantEvent  string
		wantErr    bool
	}{
		{name: "sent", wantSent: 1, wantLedger: 1, wantReason: v1alpha1.ReasonDelivered, wantEvent: "Normal AlertSent"},
		{name: "failing channel gives its claim back", sendErr: errors.New("relay down"), wantSent: 1, wantReason: v1alpha1.ReasonDeliveryFailed,
			wantEvent: "Warning AlertDeliveryFailed"},
		{name: "permanent failure", sendErr: &notify.DeliveryError{Permanent: true, Err: errors.New("token revoked")}, wantSent: 1,
			wantReason: v1alpha1.ReasonDeliveryFailed, wantEvent: "Warning AlertDeliveryFailed"},
		// A stale copy of the watch cannot claim: nothing goes out.
		{name: "claim refused", claimErr: errors.New("conflict"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, events, claims := expiring(), &targettest.Events{}, 0
			ch := &notifier{err: tc.sendErr}
			set := channels.Set{{ID: "slack/abc", Notifier: ch}}
			_, err := sender(obj, events, &claims, tc.claimErr).Watch(context.Background(), set, nil, settings(time.Hour))
			if (err != nil) != tc.wantErr || len(ch.sent) != tc.wantSent || claims != 1 {
				t.Fatalf("Watch = %v after %d claims and sends %v; want error %v and %d sends after one claim", err, claims, ch.sent, tc.wantErr, tc.wantSent)
			}
			if tc.wantErr {
				return
			}
			var sent int
			if obj.Status.Alerts != nil {
				sent = len(obj.Status.Alerts.Sent)
			}
			got := events.Take()
			if c := target.Condition(obj, v1alpha1.ConditionAlertsDelivered); c.Reason != tc.wantReason || sent != tc.wantLedger ||
				len(got) != 1 || !strings.HasPrefix(got[0], tc.wantEvent) {
				t.Fatalf("AlertsDelivered %s (%s), %d in the ledger, events %q; want %s, %d, %s", c.Reason, c.Message, sent, got, tc.wantReason, tc.wantLedger, tc.wantEvent)
			}
			if tc.sendErr == nil {
				return
			}
			f := alerting.Failure(obj.Status.Alerts, "slack/abc")
			wait := f.NextAttemptTime.Sub(now)
			if permanent := strings.Contains(tc.name, "permanent"); f.Failures != 1 || (permanent && wait < time.Hour) || (!permanent && wait != time.Minute) {
				t.Fatalf("failure %+v, next attempt in %s; want one failure, retried in a minute or, permanent, an hour", f, wait)
			}
			// Within its backoff, the channel is not tried again.
			if _, err := sender(obj, events, &claims, nil).Watch(context.Background(), set, nil, settings(time.Hour)); err != nil || len(ch.sent) != 1 {
				t.Fatalf("a second reconcile within the backoff sent %v, %v", ch.sent, err)
			}
		})
	}
}

func TestWatchWithoutChannels(t *testing.T) {
	obj, claims := expiring(), 0
	if next, err := sender(obj, &targettest.Events{}, &claims, nil).Watch(context.Background(), nil, nil, settings(time.Hour)); err != nil || !next.IsZero() || claims != 0 {
		t.Fatalf("Watch = %v, %v after %d claims", next, err, claims)
	}
	if c := target.Condition(obj, v1alpha1.ConditionAlertsDelivered); c.Reason != v1alpha1.ReasonNoChannels {
		t.Fatalf("AlertsDelivered = %s", c.Reason)
	}
}

// A channel whose Secret the API server did not give is looked at again in a while; no person
// need act, so no event is raised.
func TestChannelNotBuilt(t *testing.T) {
	obj, events, claims := expiring(), &targettest.Events{}, 0
	set := channels.Set{{ID: "email/x"}}
	next, err := sender(obj, events, &claims, nil).Watch(context.Background(), set, errors.New("reading Secret smtp: timeout"), settings(time.Hour))
	if err != nil || next.After(now.Add(target.MisconfiguredRecheck)) {
		t.Fatalf("Watch = %v, %v; want a look again within %s", next, err, target.MisconfiguredRecheck)
	}
	if c := target.Condition(obj, v1alpha1.ConditionAlertsDelivered); c.Reason != v1alpha1.ReasonDeliveryFailed || !strings.Contains(c.Message, "timeout") {
		t.Fatalf("AlertsDelivered = %s (%s)", c.Reason, c.Message)
	}
	if got := events.Take(); len(got) != 0 || claims != 0 {
		t.Fatalf("events %q, %d claims; want none for a channel that was not built", got, claims)
	}
}

// settings are a watch's with the default reminders, telling failing checks after checkFailureAfter.
func settings(checkFailureAfter time.Duration) target.Settings {
	return target.Settings{RemindBefore: alerting.DefaultRemindBefore, CheckFailureAfter: checkFailureAfter}
}
