package channels

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/egress"
	"github.com/credwatch/credwatch/internal/notify"
)

func secret(ns, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// labelled marks s with label=true.
func labelled(s *corev1.Secret, label string) *corev1.Secret {
	s.Labels = map[string]string{label: "true"}
	return s
}

func TestChannelIDs(t *testing.T) {
	a := &v1alpha1.SlackAlerts{Channel: "#ops", TokenSecretRef: &v1alpha1.SecretKeyRef{Name: "slack", Key: "token"}}
	b := &v1alpha1.SlackAlerts{Channel: "#platform", TokenSecretRef: &v1alpha1.SecretKeyRef{Name: "slack", Key: "token"}}
	if first, again := channelID("slack", "team", a), channelID("slack", "team", a); first != again {
		t.Error("the same channel has two IDs")
	}
	if channelID("slack", "team", a) == channelID("slack", "team", b) {
		t.Error("posting to another Slack channel keeps the ID: the new channel would never hear of the current step")
	}
	if channelID("slack", "team", a) == channelID("slack", "ops", a) {
		t.Error("the same references in another namespace share an ID")
	}
}

func TestNotifiesOwnersFollowsTheChannelsInEffect(t *testing.T) {
	smtp := v1alpha1.SMTPServer{Host: "smtp.example", From: "c@example.com"}
	b := &Builder{Defaults: &v1alpha1.Alerts{Email: &v1alpha1.EmailAlerts{NotifyOwners: true, SMTP: smtp}}, DefaultsNamespace: "ops"}
	own := &v1alpha1.Alerts{Email: &v1alpha1.EmailAlerts{To: []string{"a@example.com"}, SMTP: smtp}}
	marked := access.Identity{Kind: v1alpha1.KindClusterAzureIdentity, Name: "ops", DefaultOwnerMail: true}
	if !b.NotifiesOwners(&v1alpha1.CredentialWatch{}, marked) {
		t.Error("a watch on the default channels, which mail owners, with an identity the admin marked, does not read owners")
	}
	for _, id := range []access.Identity{
		{Kind: v1alpha1.KindClusterAzureIdentity, Name: "ops"},
		// A namespace's identity cannot carry the admin's mark, whatever its annotations.
		{Kind: v1alpha1.KindAzureIdentity, Namespace: "team", Name: "mine", DefaultOwnerMail: true},
	} {
		if b.NotifiesOwners(&v1alpha1.CredentialWatch{}, id) {
			t.Errorf("the default channels mail the owners read with %s %s, which the admin did not mark", id.Kind, id.Name)
		}
	}
	if b.NotifiesOwners(&v1alpha1.CredentialWatch{Spec: v1alpha1.CredentialWatchSpec{Alerts: own}}, marked) {
		t.Error("a watch with its own email, without notifyOwners, reads owners")
	}
	own.Email.NotifyOwners = true
	if !b.NotifiesOwners(&v1alpha1.CredentialWatch{Spec: v1alpha1.CredentialWatchSpec{Alerts: own}}, access.Identity{Kind: v1alpha1.KindAzureIdentity}) {
		t.Error("a watch's own relay, told to mail owners, does not read them")
	}
}

func TestRecipientsOnce(t *testing.T) {
	got := recipients([]string{"Ada@example.com", "ops@example.com"}, []string{"ada@example.com", "bob@example.com"})
	if strings.Join(got, ",") != "Ada@example.com,ops@example.com,bob@example.com" {
		t.Errorf("recipients = %v", got)
	}
}

func TestFor(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		secret("team", "slack", map[string]string{"token": "xoxb-TOKEN", "hook": "https://hooks.slack.com/services/T/B/SECRETPATH"}),
		labelled(secret("team", "smtp", map[string]string{"username": "alerts", "password": "SMTP-PASSWORD"}), v1alpha1.SMTPAuthLabel),
		// Some other workload's credentials, which a watch's author would like a relay of theirs to get.
		secret("team", "db", map[string]string{"username": "app", "password": "SMTP-PASSWORD"}),
		secret("team", "ca", map[string]string{"ca.crt": "not a certificate"}),
		secret("team", "empty", map[string]string{"url": "\n"}),
		secret("ops", "default-hook", map[string]string{"url": "https://bridge.example/hook?token=SECRET"}),
	).Build()
	defaults := &v1alpha1.Alerts{Webhook: &v1alpha1.WebhookAlerts{URLSecretRef: v1alpha1.SecretKeyRef{Name: "default-hook", Key: "url"}}}
	b := &Builder{Secrets: reader, Defaults: defaults, DefaultsNamespace: "ops"}
	no := false
	smtp := v1alpha1.SMTPServer{Host: "smtp.example", Port: 587, TLS: v1alpha1.SMTPStartTLS, From: "credwatch@example.com",
		AuthSecretRef: &corev1.LocalObjectReference{Name: "smtp"}}

	tests := map[string]struct {
		alerts         *v1alpha1.Alerts
		owners         []string
		wantConfigured string
		wantBuilt      string
		wantErr        string // a ConfigError saying this
	}{
		"no alerts: the defaults":   {alerts: nil, wantConfigured: "webhook", wantBuilt: "webhook"},
		"opted out of the defaults": {alerts: &v1alpha1.Alerts{UseDefaultChannels: &no}},
		"own channels replace them": {
			alerts:         &v1alpha1.Alerts{Slack: &v1alpha1.SlackAlerts{Channel: "#ops", TokenSecretRef: &v1alpha1.SecretKeyRef{Name: "slack", Key: "token"}}},
			wantConfigured: "slack", wantBuilt: "slack",
		},
		"slack webhook": {
			alerts:         &v1alpha1.Alerts{Slack: &v1alpha1.SlackAlerts{WebhookSecretRef: &v1alpha1.SecretKeyRef{Name: "slack", Key: "hook"}}},
			wantConfigured: "slack", wantBuilt: "slack",
		},
		"email with auth": {
			alerts:         &v1alpha1.Alerts{Email: &v1alpha1.EmailAlerts{To: []string{"platform@example.com"}, SMTP: smtp}},
			wantConfigured: "email", wantBuilt: "email",
		},
		"email to owners only": {
			alerts:         &v1alpha1.Alerts{Email: &v1alpha1.EmailAlerts{NotifyOwners: true, SMTP: smtp}},
			owners:         []string{"owner@example.com"},
			wantConfigured: "email", wantBuilt: "email",
		},
		"email to owners, but none has a mail address": {
			alerts:         &v1alpha1.Alerts{Email: &v1alpha1.EmailAlerts{NotifyOwners: true, SMTP: smtp}},
			wantConfigured: "email", wantErr: "email: no recipients",
		},
		"missing Secret; the other channel still works": {
			alerts: &v1alpha1.Alerts{
				Teams:   &v1alpha1.TeamsAlerts{WebhookSecretRef: v1alpha1.SecretKeyRef{Name: "teams", Key: "url"}},
				Webhook: &v1alpha1.WebhookAlerts{URLSecretRef: v1alpha1.SecretKeyRef{Name: "slack", Key: "hook"}},
			},
			wantConfigured: "teams,webhook", wantBuilt: "webhook",
			wantErr: "teams.webhookSecretRef: Secret team/teams does not exist",
		},
		"empty key": {
			alerts:         &v1alpha1.Alerts{Webhook: &v1alpha1.WebhookAlerts{URLSecretRef: v1alpha1.SecretKeyRef{Name: "empty", Key: "url"}}},
			wantConfigured: "webhook", wantErr: `webhook.urlSecretRef: Secret team/empty has no key "url", or it is empty`,
		},
		"auth from a Secret not labelled for it": {
			alerts: &v1alpha1.Alerts{Email: &v1alpha1.EmailAlerts{To: []string{"a@example.com"},
				SMTP: v1alpha1.SMTPServer{Host: "smtp.example", From: "c@example.com", AuthSecretRef: &corev1.LocalObjectReference{Name: "db"}}}},
			wantConfigured: "email", wantErr: "email.smtp.authSecretRef: Secret team/db is not labelled credwatch.dev/smtp-auth=true",
		},
		"CA that is not PEM": {
			alerts: &v1alpha1.Alerts{Email: &v1alpha1.EmailAlerts{To: []string{"a@example.com"},
				SMTP: v1alpha1.SMTPServer{Host: "smtp.example", From: "c@example.com", CASecretRef: &corev1.LocalObjectReference{Name: "ca"}}}},
			wantConfigured: "email", wantErr: "email.smtp.caSecretRef: key ca.crt of Secret team/ca holds no PEM certificate",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "w"}, Spec: v1alpha1.CredentialWatchSpec{Alerts: tc.alerts}}
			if tc.owners != nil {
				w.Status.ServicePrincipal = &v1alpha1.ServicePrincipalStatus{OwnerEmails: tc.owners}
			}
			set, err := b.For(context.Background(), w, access.Identity{})
			var configured, built []string
			for _, c := range set {
				kind, _, _ := strings.Cut(c.ID, "-")
				configured = append(configured, kind)
				if c.Notifier != nil {
					built = append(built, c.Notifier.Name())
				}
			}
			if got := strings.Join(configured, ","); got != tc.wantConfigured {
				t.Errorf("configured = %q, want %q", got, tc.wantConfigured)
			}
			if got := strings.Join(built, ","); got != tc.wantBuilt {
				t.Errorf("built = %q, want %q", got, tc.wantBuilt)
			}
			var ce *ConfigError
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error = %v", err)
			case tc.wantErr != "" && (!errors.As(err, &ce) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error = %v, want a ConfigError saying %q", err, tc.wantErr)
			}
			if err != nil {
				for _, s := range []string{"xoxb-TOKEN", "SECRETPATH", "SMTP-PASSWORD", "token=SECRET"} {
					if strings.Contains(err.Error(), s) {
						t.Errorf("error %q holds a secret", err)
					}
				}
			}
		})
	}
}

const refused = "refused by the operator's destination policy"

// peers are local listeners for every kind of channel, counting what reaches them.
type peers struct {
	http     *httptest.Server
	requests atomic.Int32
	smtp     net.Listener
	conns    atomic.Int32
}

func startPeers(t *testing.T) *peers {
	t.Helper()
	p := &peers{}
	p.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		if strings.HasSuffix(r.URL.Path, "/chat.postMessage") {
			_, _ = io.WriteString(w, `{"ok":true,"channel":"C0","ts":"1.0"}`)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(p.http.Close)
	var err error
	if p.smtp, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.smtp.Close() })
	go func() {
		for {
			conn, err := p.smtp.Accept()
			if err != nil {
				return
			}
			p.conns.Add(1)
			_ = conn.Close()
		}
	}()
	return p
}

func (p *peers) reached() int { return int(p.requests.Load() + p.conns.Load()) }

// The destinations a watch names are judged by the destination policy; the operator's own
// (the default channels, Slack's API root) are not.
func TestWhoNamedTheDestination(t *testing.T) {
	p := startPeers(t)
	smtpPort := p.smtp.Addr().(*net.TCPAddr).Port
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	var objs []client.Object
	for _, ns := range []string{"team", "ops"} {
		objs = append(objs, secret(ns, "hooks", map[string]string{
			"url":   p.http.URL + "/hooks/SECRETPATH",
			"slack": p.http.URL + "/services/T0/B0/SECRETPATH",
			"token": "xoxb-TOKEN",
		}))
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	ref := func(key string) v1alpha1.SecretKeyRef { return v1alpha1.SecretKeyRef{Name: "hooks", Key: key} }
	kinds := map[string]*v1alpha1.Alerts{
		"webhook":       {Webhook: &v1alpha1.WebhookAlerts{URLSecretRef: ref("url")}},
		"teams":         {Teams: &v1alpha1.TeamsAlerts{WebhookSecretRef: ref("url")}},
		"slack webhook": {Slack: &v1alpha1.SlackAlerts{WebhookSecretRef: ptr(ref("slack"))}},
		"email": {Email: &v1alpha1.EmailAlerts{To: []string{"ops@example.com"}, SMTP: v1alpha1.SMTPServer{
			Host: "localhost", Port: int32(smtpPort), TLS: v1alpha1.SMTPNoTLS, From: "credwatch@example.com"}}},
	}
	loopback := egress.Policy{Allow: egress.Prefixes{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	for kind, alerts := range kinds {
		for name, tc := range map[string]struct {
			policy      egress.Policy
			defaults    bool // the operator's default channels name it, not the watch
			wantRefused bool
		}{
			"named by the watch":              {wantRefused: true},
			"named by the watch, allowlisted": {policy: loopback},
			"a default channel":               {defaults: true},
		} {
			t.Run(kind+", "+name, func(t *testing.T) {
				b := &Builder{Secrets: reader, DefaultsNamespace: "ops", Destinations: tc.policy}
				w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "w"}}
				if tc.defaults {
					b.Defaults = alerts
				} else {
					w.Spec.Alerts = alerts
				}
				sendOne(t, b, w, p, tc.wantRefused)
			})
		}
	}

	// Mail in the clear goes only to an allowlisted relay, as plain http does: a public address
	// the policy permits is refused before anything is sent (192.0.2.1, TEST-NET-1, is public to
	// the policy and never dialled).
	t.Run("email in the clear to a public relay the watch names", func(t *testing.T) {
		b := &Builder{Secrets: reader, Destinations: loopback}
		w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "w"}, Spec: v1alpha1.CredentialWatchSpec{Alerts: &v1alpha1.Alerts{
			Email: &v1alpha1.EmailAlerts{To: []string{"ops@example.com"}, SMTP: v1alpha1.SMTPServer{Host: "192.0.2.1", Port: 25, TLS: v1alpha1.SMTPNoTLS, From: "credwatch@example.com"}}}}}
		set, err := b.For(context.Background(), w, access.Identity{})
		if err != nil || len(set) != 1 || set[0].Notifier == nil {
			t.Fatalf("For = %v, %v", set, err)
		}
		err = set[0].Notifier.Send(context.Background(), notify.Alert{ID: "a1", Kind: alertkind.Reminder, Namespace: "team", Name: "w"})
		var re *egress.RefusedError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), "TLS for SMTP") {
			t.Errorf("Send() = %v, want the unencrypted connection refused", err)
		}
	})

	// A bot token posts to Slack's API root, which the operator names, whoever names the token.
	t.Run("a slack bot token the watch names", func(t *testing.T) {
		b := &Builder{Secrets: reader, SlackAPIURL: p.http.URL + "/api/"}
		w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "w"},
			Spec: v1alpha1.CredentialWatchSpec{Alerts: &v1alpha1.Alerts{Slack: &v1alpha1.SlackAlerts{Channel: "#ops", TokenSecretRef: ptr(ref("token"))}}}}
		sendOne(t, b, w, p, false)
	})
}

// sendOne builds w's one channel and sends it an alert, which must reach p unless refused.
func sendOne(t *testing.T, b *Builder, w *v1alpha1.CredentialWatch, p *peers, wantRefused bool) {
	t.Helper()
	set, err := b.For(context.Background(), w, access.Identity{})
	if err != nil || len(set) != 1 || set[0].Notifier == nil {
		t.Fatalf("For = %v, %v", set, err)
	}
	before := p.reached()
	err = set[0].Notifier.Send(context.Background(), notify.Alert{ID: "a1", Kind: alertkind.Reminder, Namespace: "team", Name: "w"})
	if reached := p.reached() > before; reached == wantRefused {
		t.Errorf("reached the peer: %v, want %v (Send: %v)", reached, !wantRefused, err)
	}
	if wantRefused && (err == nil || err.Error() != refused) {
		t.Errorf("Send() = %v, want %q", err, refused)
	}
}

func ptr[T any](v T) *T { return &v }

// Owners a check recorded while the watch had its own email channel (or before the admin's mark
// was removed) reach the default relay only while the identity is marked now.
func TestRecordedOwnersReachTheDefaultRelayOnlyForAMarkedIdentity(t *testing.T) {
	smtp := v1alpha1.SMTPServer{Host: "smtp.example", From: "c@example.com"}
	b := &Builder{Defaults: &v1alpha1.Alerts{Email: &v1alpha1.EmailAlerts{To: []string{"ops@example.com"}, NotifyOwners: true, SMTP: smtp}}, DefaultsNamespace: "ops"}
	w := &v1alpha1.CredentialWatch{Status: v1alpha1.CredentialWatchStatus{ServicePrincipal: &v1alpha1.ServicePrincipalStatus{OwnerEmails: []string{"ada@example.com"}}}}
	if got := b.owners(w, access.Identity{Kind: v1alpha1.KindAzureIdentity, Namespace: "team", Name: "mine"}); got != nil {
		t.Errorf("the default relay mails %v for a namespace's identity", got)
	}
	if got := b.owners(w, access.Identity{}); got != nil {
		t.Errorf("the default relay mails %v for a watch whose identity is not found", got)
	}
	if got := b.owners(w, access.Identity{Kind: v1alpha1.KindClusterAzureIdentity, Name: "ops", DefaultOwnerMail: true}); len(got) != 1 {
		t.Errorf("owners %v for a marked identity; want Ada", got)
	}
}
