package rotation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/keyvault"
	"github.com/credwatch/credwatch/internal/secret"
)

// KeyVaults are the Key Vaults a rotation publishes to, as its identity (package keyvault).
type KeyVaults interface {
	List(ctx context.Context, vaultURL, name string) ([]keyvault.Version, error)
	Set(ctx context.Context, vaultURL, name string, value secret.Text, appID, keyID string, expires time.Time) (string, error)
	Disable(ctx context.Context, vaultURL, name, version string) error
}

var errNoVaults = errors.New("no Key Vault client: the operator cannot reach Key Vault here")

// ErrSinkForeign: a sink holds something credwatch did not write there for the application.
var ErrSinkForeign = errors.New("the sink holds what credwatch did not write for this application")

// Event reasons of publishing.
const (
	EventPublished     = "RotationPublished"
	EventPublishFailed = "RotationPublishFailed"
)

// publishError is a sink that could not be written.
type publishError struct {
	sink string
	err  error
}

func (e *publishError) Error() string {
	return fmt.Sprintf("publishing to %s failed, and no old secret is retired until it is done: %v", e.sink, e.err)
}
func (e *publishError) Unwrap() error { return e.err }

// publish writes the new secret to each sink of spec.rotation.publish it is not in yet, each
// recorded in status before the next is written, and returns how many it wrote. A sink is asked
// first whether it holds the secret already: a Key Vault version tagged with its keyId, made
// since the rotation began, enabled; a GitHub secret updated since the write was recorded as
// begun. A rotation resumed after a restart between the write and its record writes nothing
// twice. With recheck, the sinks recorded are asked again, and one that no longer holds it (its
// version disabled or deleted, the secret gone) is written again: old secrets go only while every
// sink holds the new one.
func (m *Machine) publish(ctx context.Context, recheck bool) (int, error) {
	// A sink no longer in the spec is no longer the rotation's, and its record goes.
	// A copy: the status the rotation was read from shares the array, and must keep what it held.
	m.st.Published = slices.DeleteFunc(slices.Clone(m.st.Published), func(p v1alpha1.PublishedSink) bool {
		return !slices.ContainsFunc(m.Settings.Publish, func(s v1alpha1.PublishSink) bool { return sinkName(s) == p.Sink })
	})
	written := 0
	for _, sink := range m.Settings.Publish {
		name := sinkName(sink)
		i := slices.IndexFunc(m.st.Published, func(p v1alpha1.PublishedSink) bool { return p.Sink == name })
		var prev *v1alpha1.PublishedSink
		if i >= 0 {
			p := m.st.Published[i]
			prev = &p
		}
		if name == "" || prev != nil && prev.Version != "" && !recheck {
			continue
		}
		version, wrote, err := m.toSink(ctx, sink, prev)
		if err != nil {
			return written, &publishError{sink: name, err: err}
		}
		if prev != nil && prev.Version == version && !wrote {
			continue
		}
		if err := m.record(ctx, v1alpha1.PublishedSink{Sink: name, Version: version, Time: metav1.NewTime(m.Now)}); err != nil {
			return written, err
		}
		if wrote {
			written++
		}
		m.Events.Event(corev1.EventTypeNormal, EventPublished, fmt.Sprintf("The new secret %s is in %s (%s)", m.st.KeyID, name, version))
	}
	return written, nil
}

// record replaces what status says of p's sink with p, and saves it.
func (m *Machine) record(ctx context.Context, p v1alpha1.PublishedSink) error {
	m.st.Published = append(slices.DeleteFunc(slices.Clone(m.st.Published), func(o v1alpha1.PublishedSink) bool { return o.Sink == p.Sink }), p)
	return m.save(ctx)
}

// sinkName is how status names sink; empty for a sink of no known kind.
func sinkName(s v1alpha1.PublishSink) string {
	switch {
	case s.KeyVault != nil:
		return s.KeyVault.Name()
	case s.GitHubActions != nil:
		return s.GitHubActions.Name()
	}
	return ""
}

// toSink writes the new secret to sink unless it holds it already; prev is what status recorded
// of the sink, nil when nothing. It returns what the sink names the copy, and whether it wrote.
func (m *Machine) toSink(ctx context.Context, sink v1alpha1.PublishSink, prev *v1alpha1.PublishedSink) (string, bool, error) {
	if sink.GitHubActions != nil {
		return m.toGitHub(ctx, sink.GitHubActions, prev)
	}
	return m.toKeyVault(ctx, sink.KeyVault)
}

// toKeyVault writes the new secret to kv, unless a version holds it already, and returns the
// version, and whether it wrote it. A secret whose versions credwatch did not write for this
// application is someone else's, and is not written to.
func (m *Machine) toKeyVault(ctx context.Context, kv *v1alpha1.KeyVaultSink) (string, bool, error) {
	vaults, err := m.vaultsOf(ctx, kv)
	if err != nil {
		return "", false, err
	}
	versions, err := vaults.List(ctx, kv.VaultURL, kv.SecretName)
	if err != nil {
		return "", false, err
	}
	if v, ok := holding(versions, m.st.AppID, m.st.KeyID, m.st.StartTime.Time); ok {
		return v, false, nil
	}
	if foreign(versions, m.st.AppID) {
		return "", false, fmt.Errorf("%w: secret %s has versions credwatch did not write for application %s; name another secretName, or delete that secret",
			ErrSinkForeign, kv.SecretName, m.st.AppID)
	}
	text, err := m.text(ctx)
	if err != nil {
		return "", false, err
	}
	var expires time.Time
	if m.st.Expiry != nil {
		expires = m.st.Expiry.Time
	}
	version, err := vaults.Set(ctx, kv.VaultURL, kv.SecretName, text, m.st.AppID, m.st.KeyID, expires)
	return version, err == nil, err
}

// vaultsOf are the Key Vaults as kv is written: by its identityRef, or by the rotation's identity.
func (m *Machine) vaultsOf(ctx context.Context, kv *v1alpha1.KeyVaultSink) (KeyVaults, error) {
	if m.Vaults == nil {
		return nil, errNoVaults
	}
	return m.Vaults(ctx, kv)
}

// foreign reports whether a secret with versions holds one credwatch did not write for appID:
// it is someone else's, and not written to.
func foreign(versions []keyvault.Version, appID string) bool {
	return slices.ContainsFunc(versions, func(v keyvault.Version) bool { return !strings.EqualFold(v.AppID, appID) })
}

// holding is the version of versions that holds keyID of appID, when it is the one a consumer
// reads, the latest: enabled, and made since the rotation began (a version tagged with it before
// then was not credwatch's: the keyId did not exist yet). One of ours behind a newer version
// someone else wrote, the old secret say, is not held.
func holding(versions []keyvault.Version, appID, keyID string, since time.Time) (string, bool) {
	if len(versions) == 0 {
		return "", false
	}
	latest := versions[0]
	for _, v := range versions[1:] {
		if !v.Created.Before(latest.Created) {
			latest = v
		}
	}
	v := latest
	if v.Enabled && strings.EqualFold(v.AppID, appID) && strings.EqualFold(v.KeyID, keyID) && (v.Created.IsZero() || !v.Created.Before(since)) {
		return v.Version, true
	}
	return "", false
}

// disableRetired disables, in each Key Vault sink, the versions that hold keyIDs: secrets about to
// be retired, which nothing may be handed any more.
func (m *Machine) disableRetired(ctx context.Context, keyIDs []string) error {
	for _, sink := range m.Settings.Publish {
		kv := sink.KeyVault
		if kv == nil || len(keyIDs) == 0 {
			continue
		}
		vaults, err := m.vaultsOf(ctx, kv)
		if err != nil {
			return &publishError{sink: kv.Name(), err: err}
		}
		versions, err := vaults.List(ctx, kv.VaultURL, kv.SecretName)
		if err != nil {
			return &publishError{sink: kv.Name(), err: err}
		}
		for _, v := range versions {
			if v.Enabled && strings.EqualFold(v.AppID, m.st.AppID) && slices.ContainsFunc(keyIDs, func(k string) bool { return strings.EqualFold(k, v.KeyID) }) {
				if err := vaults.Disable(ctx, kv.VaultURL, kv.SecretName, v.Version); err != nil {
					return &publishError{sink: kv.Name(), err: err}
				}
			}
		}
	}
	return nil
}

// publishFailed waits to publish again, telling of the sink that failed.
func (m *Machine) publishFailed(err error) (time.Time, error) {
	var pe *publishError
	if !errors.As(err, &pe) {
		return time.Time{}, err
	}
	next, _ := m.fail(err, publishBackoff(m.st.Failures+1))
	m.Events.Event(corev1.EventTypeWarning, EventPublishFailed, pe.Error())
	return next, nil
}

// publishBackoff is the wait before publishing again after n failures: a minute, doubling, at
// most an hour.
func publishBackoff(n int32) time.Duration {
	d := time.Minute
	for i := int32(1); i < n && d < time.Hour; i++ {
		d *= 2
	}
	return min(d, time.Hour)
}

// trySinks is what a dry run finds of each sink, for its plan, by what a write would need and
// nothing more: a Key Vault's versions are listed as the identity (their properties only, which
// its reader role allows), and a secret that is someone else's named; a GitHub repository's or
// environment's public key is read with the sink's token. Nothing is written.
func (ro *Run) trySinks(ctx context.Context, g access.Grant) string {
	if len(ro.spec.Publish) == 0 {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	m, err := ro.machine(ctx, g)
	if err != nil {
		return "; the sinks could not be tried: " + err.Error()
	}
	var out strings.Builder
	for _, sink := range ro.spec.Publish {
		if name := sinkName(sink); name != "" {
			fmt.Fprintf(&out, "; %s %s", name, m.trySink(ctx, sink, ro.pin.AppID))
		}
	}
	return out.String()
}

// trySink is what a dry run of a rotation of appID finds of sink: "can be read (...)", or why not.
func (m *Machine) trySink(ctx context.Context, sink v1alpha1.PublishSink, appID string) string {
	if gh := sink.GitHubActions; gh != nil {
		token, err := m.token(ctx, gh)
		if err == nil {
			err = m.GitHub.Readable(ctx, gh.APIURL, token, targetOf(gh))
		}
		if err != nil {
			return "cannot be read: " + err.Error()
		}
		return "can be read (its public key)"
	}
	kv := sink.KeyVault
	vaults, err := m.vaultsOf(ctx, kv)
	if err != nil {
		return "cannot be tried: " + err.Error()
	}
	versions, err := vaults.List(ctx, kv.VaultURL, kv.SecretName)
	switch {
	case err != nil:
		return "cannot be read: " + err.Error()
	case foreign(versions, appID):
		return "holds versions credwatch did not write for this application, and would be refused"
	}
	return fmt.Sprintf("can be read (%d versions)", len(versions))
}
