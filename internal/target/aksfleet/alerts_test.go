package aksfleet

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/ledger"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

// notifier is a channel whose sends the outbox's Send func makes.
type notifier struct{}

func (notifier) Name() string                             { return notify.ChannelSlack }
func (notifier) Send(context.Context, notify.Alert) error { return nil }

// outbox is a fleet's ledger in ConfigMaps of a fake API server, one Slack channel, and a Send
// that keeps what it sent and fails while fail is set.
type outbox struct {
	Outbox
	sent []notify.Alert
	fail bool
}

func newOutbox(t *testing.T, obj *v1alpha1.CredentialWatch) *outbox {
	c := fake.NewClientBuilder().Build()
	store := &ledger.Store{Reader: c, Writer: c}
	book, err := store.Load(context.Background(), ledger.Owner{Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID, APIVersion: "credwatch.dev/v1alpha1", Kind: "CredentialWatch"})
	if err != nil {
		t.Fatal(err)
	}
	o := &outbox{}
	o.Outbox = Outbox{Channels: channels.Set{{ID: "slack-1", Notifier: notifier{}}}, Failing: &v1alpha1.AlertsStatus{}, Book: book, Ledger: store,
		Send: func(_ context.Context, _ channels.Channel, a notify.Alert) bool {
			if o.fail {
				return false
			}
			o.sent = append(o.sent, a)
			return true
		}}
	return o
}

func TestUnitTellClaimsSendsAndGivesBackWhatFailed(t *testing.T) {
	obj := fleetWatch()
	f := Fleet{Events: &targettest.Events{}, Store: NewStore()}
	pw := v1alpha1.CredentialTypePassword
	f.Store.Put(target.KeyOf(obj), Found{Subscriptions: 1, Complete: map[string]bool{"s1": true}, Clusters: []Cluster{
		{ID: clusterID("s1", "rg", "a"), SubscriptionID: "s1", ResourceGroup: "rg", AppID: "app-a", Credentials: []v1alpha1.Credential{credential("app-a", "k", pw, -300*day, 10*day)}},
	}})
	o := newOutbox(t, obj)
	tell := func(at int) {
		t.Helper()
		n, _ := f.Evaluate(obj, obj.Status.Fleet, grantOf("s1"), std, now.Add(dayN(at)))
		if _, err := f.Tell(context.Background(), obj, n, o.Outbox, now.Add(dayN(at))); err != nil {
			t.Fatal(err)
		}
	}

	// A channel's first plan records the fleet as it is, and tells nothing.
	tell(0)
	if len(o.sent) != 0 || o.Book.Len() != 2 {
		t.Fatalf("sent %d, ledger of %d: want nothing sent, the baseline and the cluster recorded", len(o.sent), o.Book.Len())
	}
	// Critical four days on, but the channel fails: the claim is given back.
	o.fail = true
	tell(4)
	if note, _ := o.Book.Get(LedgerKey("slack-1", clusterID("s1", "rg", "a"))); note[:7] != "Warning" {
		t.Errorf("ledger %q after a failed send, want the Warning it was told before", note)
	}
	// It works again: told once, and not again.
	o.fail = false
	tell(4)
	tell(4)
	if len(o.sent) != 1 || o.sent[0].Cluster != clusterID("s1", "rg", "a") || o.sent[0].Severity != notify.SeverityCritical {
		t.Errorf("sent %+v, want one critical message about a", o.sent)
	}
}

func dayN(n int) time.Duration { return time.Duration(n) * day }
