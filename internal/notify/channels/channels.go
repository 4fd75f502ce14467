package channels

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/egress"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/email"
	"github.com/credwatch/credwatch/internal/notify/slack"
	"github.com/credwatch/credwatch/internal/notify/teams"
	"github.com/credwatch/credwatch/internal/notify/webhook"
)

// Keys of the Secret named by smtp.authSecretRef and smtp.caSecretRef.
const (
	keyUsername = "username"
	keyPassword = "password"
	keyCA       = "ca.crt"
)

// Builder makes a watch's channels.
type Builder struct {
	// Secrets reads Secrets one at a time; it should not be a cache, which would list and watch
	// every Secret in the cluster.
	Secrets client.Reader
	// Defaults are the operator's default channels, for watches that name none; nil for none.
	Defaults *v1alpha1.Alerts
	// DefaultsNamespace holds the Secrets the default channels name: the operator's namespace.
	DefaultsNamespace string
	// HTTPClient carries the requests of the default channels, and of Slack bot tokens to
	// SlackAPIURL; nil means each channel's default.
	HTTPClient *http.Client
	// SlackAPIURL replaces Slack's API root, for tests and GovSlack; empty means Slack's.
	SlackAPIURL string
	// Destinations judges the destinations a watch names itself: its webhook, Teams and Slack
	// webhook URLs and its SMTP host. The default channels and Slack's API are the operator's
	// configuration, and are not judged. The zero Policy refuses the built-in ranges.
	Destinations egress.Policy

	watchReach     reach
	watchReachOnce sync.Once
}

// watchTimeout bounds a request to a watch's webhook, as each channel's own default does.
const watchTimeout = 15 * time.Second

// reach is how the channels of one alert spec connect to their destinations.
type reach struct {
	http   *http.Client // nil: each channel's default
	dialer *net.Dialer  // nil: a plain one
	// clear dials SMTP without TLS; nil: dialer.
	clear *net.Dialer
	// watch: the watch named the destination, not the admin.
	watch bool
}

// reachFor returns how channels connect: the defaults as configured, a watch's own through the
// destination policy, whose client is built once so that its connections are reused.
func (b *Builder) reachFor(s source) reach {
	if !s.watch {
		return reach{http: b.HTTPClient}
	}
	b.watchReachOnce.Do(func() {
		b.watchReach = reach{http: b.Destinations.HTTPClient(watchTimeout), dialer: b.Destinations.Dialer(),
			clear: b.Destinations.PlainDialer(), watch: true}
	})
	return b.watchReach
}

// source is the alert spec in effect for a watch, and who wrote it.
type source struct {
	spec *v1alpha1.Alerts
	// namespace holds the Secrets the spec names.
	namespace string
	// watch: the watch's own spec, written by whoever may create watches; else the operator's
	// defaults, written by its admin.
	watch bool
}

// ConfigError is a channel configuration that a person must fix: a Secret or key that is
// missing, a value that does not parse. Its message names the Secret and key, never a value.
type ConfigError struct{ msg string }

func (e *ConfigError) Error() string { return e.msg }

// Channel is one destination of a watch's alerts.
type Channel struct {
	// ID names the destination in the ledger: the kind and a hash of its non-secret settings
	// (channel, recipients, Secret names), so that pointing a channel elsewhere sends the current
	// step there, while a Secret rotated in place changes nothing.
	ID string
	// Notifier delivers; nil when the channel could not be built (see the error of For).
	Notifier notify.Channel
}

// Set is every channel a watch's alerts go to, built or not: what was sent to a channel whose
// Secret is broken for a while must not be forgotten.
type Set []Channel

// IDs lists the channels' IDs.
func (s Set) IDs() []string {
	ids := make([]string, len(s))
	for i, c := range s {
		ids[i] = c.ID
	}
	return ids
}

// For returns the channels alerts of obj go to: its own, or the defaults when it names none and
// has not opted out. Channels that cannot be built have a nil Notifier, and the error says why,
// as a ConfigError where a person must act; one broken Secret silences only its channel. The
// owners status lists are mailed only where NotifiesOwners allows it for the watch's identity
// id now, whatever allowed reading them before.
func (b *Builder) For(ctx context.Context, obj *v1alpha1.CredentialWatch, id access.Identity) (Set, error) {
	src := b.effective(obj)
	if src.spec == nil {
		return nil, nil
	}
	spec, ns, via := src.spec, src.namespace, b.reachFor(src)
	r := secretReader{ctx: ctx, reader: b.Secrets, namespace: ns}
	var set Set
	var errs []error
	add := func(kind string, settings any, build func() (notify.Channel, error)) {
		c, err := build()
		if err != nil {
			errs = append(errs, err)
		}
		set = append(set, Channel{ID: channelID(kind, ns, settings), Notifier: c})
	}
	if s := spec.Slack; s != nil {
		add(notify.ChannelSlack, s, func() (notify.Channel, error) { return b.slack(r, s, via) })
	}
	if e := spec.Email; e != nil {
		add(notify.ChannelEmail, e, func() (notify.Channel, error) { return b.email(r, e, b.owners(obj, id), via) })
	}
	if t := spec.Teams; t != nil {
		add(notify.ChannelTeams, t, func() (notify.Channel, error) { return b.teams(r, t, via) })
	}
	if w := spec.Webhook; w != nil {
		add(notify.ChannelWebhook, w, func() (notify.Channel, error) { return b.webhook(r, w, via) })
	}
	return set, errors.Join(errs...)
}

// channelID is kind-<hash>: the spec of a channel holds no secret, only references to Secrets,
// so hashing it identifies the destination without revealing or depending on a secret.
func channelID(kind, namespace string, settings any) string {
	data, _ := json.Marshal(settings)
	sum := sha256.Sum256(append([]byte(namespace+"\x00"), data...))
	return kind + "-" + hex.EncodeToString(sum[:4])
}

// NotifiesOwners reports whether obj's alerts mail the application's owners, so that the check
// reads them with the watch's identity id: the watch's own email channel, or the defaults' when
// the watch uses them and id is a ClusterAzureIdentity the admin marked for it.
func (b *Builder) NotifiesOwners(obj *v1alpha1.CredentialWatch, id access.Identity) bool {
	src := b.effective(obj)
	if src.spec == nil || src.spec.Email == nil || !src.spec.Email.NotifyOwners {
		return false
	}
	return src.watch || id.Kind == v1alpha1.KindClusterAzureIdentity && id.DefaultOwnerMail
}

// effective picks the alert spec that applies to obj: its own, or the operator's defaults.
func (b *Builder) effective(obj *v1alpha1.CredentialWatch) source {
	a := obj.Spec.Alerts
	if a != nil && (a.Slack != nil || a.Email != nil || a.Teams != nil || a.Webhook != nil) {
		return source{spec: a, namespace: obj.Namespace, watch: true}
	}
	if a != nil && a.UseDefaultChannels != nil && !*a.UseDefaultChannels {
		return source{}
	}
	return source{spec: b.Defaults, namespace: b.DefaultsNamespace}
}

// owners are the application owners' addresses the last check found, when the alerts in effect
// ask for them and may mail them for the identity id.
func (b *Builder) owners(obj *v1alpha1.CredentialWatch, id access.Identity) []string {
	if !b.NotifiesOwners(obj, id) || obj.Status.ServicePrincipal == nil {
		return nil
	}
	return obj.Status.ServicePrincipal.OwnerEmails
}

func (b *Builder) slack(r secretReader, s *v1alpha1.SlackAlerts, via reach) (notify.Channel, error) {
	o := slack.Options{Channel: s.Channel}
	var err error
	if s.TokenSecretRef != nil {
		// A bot token posts to Slack's API or to --slack-api-url, whoever names the token: the
		// destination is the operator's.
		o.Token, err = r.key(*s.TokenSecretRef, "slack.tokenSecretRef")
		o.APIURL, o.HTTPClient = b.SlackAPIURL, b.HTTPClient
	} else if s.WebhookSecretRef != nil {
		o.WebhookURL, err = r.key(*s.WebhookSecretRef, "slack.webhookSecretRef")
		o.HTTPClient = via.http
	}
	if err != nil {
		return nil, err
	}
	c, err := slack.New(o)
	if err != nil {
		return nil, &ConfigError{err.Error()}
	}
	return c, nil
}

func (b *Builder) email(r secretReader, e *v1alpha1.EmailAlerts, owners []string, via reach) (notify.Channel, error) {
	to := recipients(e.To, owners)
	if len(to) == 0 {
		return nil, &ConfigError{"email: no recipients: to is empty and the application has no owner with a mail address"}
	}
	c, err := b.relay(r, e, to, via)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Digests is the relay of a tenant scan's owner digests, e: each owner, and the fallback, is
// reached with SendTo. The relay is a destination the watch names, judged by the destination
// policy as any other.
func (b *Builder) Digests(ctx context.Context, obj *v1alpha1.CredentialWatch, e *v1alpha1.DigestEmail) (*email.Channel, error) {
	r := secretReader{ctx: ctx, reader: b.Secrets, namespace: obj.Namespace}
	return b.relay(r, &v1alpha1.EmailAlerts{SMTP: e.SMTP}, nil, b.reachFor(source{watch: true}))
}

// relay builds the email channel of e sending to to by default.
func (b *Builder) relay(r secretReader, e *v1alpha1.EmailAlerts, to []string, via reach) (*email.Channel, error) {
	o := email.Options{
		Host:            e.SMTP.Host,
		Port:            int(e.SMTP.Port),
		TLS:             tlsModes[e.SMTP.TLS],
		From:            e.SMTP.From,
		To:              to,
		RecipientsLater: len(to) == 0,
		Dialer:          via.dialer,
	}
	if o.TLS == email.NoTLS && via.clear != nil {
		// What goes in the clear goes only where the admin allowlisted, as plain http does.
		o.Dialer = via.clear
	}
	if ref := e.SMTP.AuthSecretRef; ref != nil {
		// The password goes to the relay the watch names: only a Secret its owner marked for
		// that, never any Secret of the namespace with a username and a password. One read, so
		// that the label and both keys are of one version.
		label := ""
		if via.watch {
			label = v1alpha1.SMTPAuthLabel
		}
		keys, err := r.keys(ref.Name, label, "email.smtp.authSecretRef", keyUsername, keyPassword)
		if err != nil {
			return nil, err
		}
		o.Username, o.Password = keys[0], keys[1]
	}
	if ref := e.SMTP.CASecretRef; ref != nil {
		pem, err := r.key(v1alpha1.SecretKeyRef{Name: ref.Name, Key: keyCA}, "email.smtp.caSecretRef")
		if err != nil {
			return nil, err
		}
		o.RootCAs = x509.NewCertPool()
		if !o.RootCAs.AppendCertsFromPEM([]byte(pem)) {
			return nil, &ConfigError{fmt.Sprintf("email.smtp.caSecretRef: key %s of Secret %s/%s holds no PEM certificate", keyCA, r.namespace, ref.Name)}
		}
	}
	c, err := email.New(o)
	if err != nil {
		return nil, &ConfigError{err.Error()}
	}
	return c, nil
}

// recipients joins to and owners, each address once whatever its case: an owner who is also on
// the list gets one mail.
func recipients(to, owners []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range append(append([]string(nil), to...), owners...) {
		if k := strings.ToLower(strings.TrimSpace(a)); k != "" && !seen[k] {
			seen[k] = true
			out = append(out, a)
		}
	}
	return out
}

var tlsModes = map[v1alpha1.SMTPTLS]email.TLSMode{
	"":                       email.StartTLS,
	v1alpha1.SMTPStartTLS:    email.StartTLS,
	v1alpha1.SMTPImplicitTLS: email.ImplicitTLS,
	v1alpha1.SMTPNoTLS:       email.NoTLS,
}

func (b *Builder) teams(r secretReader, t *v1alpha1.TeamsAlerts, via reach) (notify.Channel, error) {
	url, err := r.key(t.WebhookSecretRef, "teams.webhookSecretRef")
	if err != nil {
		return nil, err
	}
	c, err := teams.New(url, via.http)
	if err != nil {
		return nil, &ConfigError{err.Error()}
	}
	return c, nil
}

func (b *Builder) webhook(r secretReader, w *v1alpha1.WebhookAlerts, via reach) (notify.Channel, error) {
	url, err := r.key(w.URLSecretRef, "webhook.urlSecretRef")
	if err != nil {
		return nil, err
	}
	var key []byte
	if ref := w.SigningKeySecretRef; ref != nil {
		k, err := r.key(*ref, "webhook.signingKeySecretRef")
		if err != nil {
			return nil, err
		}
		key = []byte(k)
	}
	c, err := webhook.New(url, key, via.http)
	if err != nil {
		return nil, &ConfigError{err.Error()}
	}
	return c, nil
}

// secretReader reads keys of Secrets in one namespace.
type secretReader struct {
	ctx       context.Context
	reader    client.Reader
	namespace string
}

// keys returns keys of the Secret name, all of which must be there and non-empty, refusing it
// unless it carries label set to "true" when label is not empty; field names the spec field that
// points at it, for the message.
func (r secretReader) keys(name, label, field string, keys ...string) ([]string, error) {
	var s corev1.Secret
	if err := r.reader.Get(r.ctx, types.NamespacedName{Namespace: r.namespace, Name: name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &ConfigError{fmt.Sprintf("%s: Secret %s/%s does not exist", field, r.namespace, name)}
		}
		return nil, fmt.Errorf("%s: reading Secret %s/%s: %w", field, r.namespace, name, err)
	}
	if label != "" && s.Labels[label] != "true" {
		return nil, &ConfigError{fmt.Sprintf("%s: Secret %s/%s is not labelled %s=true: the relay the watch names gets its password, so credwatch sends only one labelled for it (kubectl label secret -n %s %s %s=true)",
			field, r.namespace, name, label, r.namespace, name, label)}
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		if out[i] = value(s, k); out[i] == "" {
			return nil, &ConfigError{fmt.Sprintf("%s: Secret %s/%s has no key %q, or it is empty", field, r.namespace, name, k)}
		}
	}
	return out, nil
}

// key returns one key of a Secret; field names the spec field that points at it, for the message.
func (r secretReader) key(ref v1alpha1.SecretKeyRef, field string) (string, error) {
	v, err := r.keys(ref.Name, "", field, ref.Key)
	if err != nil {
		return "", err
	}
	return v[0], nil
}

// value is key of s, without the trailing newline `kubectl create secret --from-file` keeps from
// an editor.
func value(s corev1.Secret, key string) string {
	return strings.TrimRight(string(s.Data[key]), "\r\n")
}
