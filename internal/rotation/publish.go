package rotation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/secret"
)

// KeyVaults are the Key Vaults a rotation publishes to, as its identity (package keyvault).
type KeyVaults interface {
	// Find is the version of secret name that holds keyID of appID, when one does.
	Find(ctx context.Context, vaultURL, name, appID, keyID string) (version string, enabled, found bool, err error)
	Set(ctx context.Context, vaultURL, name string, value secret.Text, appID, keyID string, expires time.Time) (string, error)
	Disable(ctx context.Context, vaultURL, name, version string) error
}

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
	return fmt.Sprintf("publishing the new secret to %s failed, and no old secret is retired until it is done: %v", e.sink, e.err)
}
func (e *publishError) Unwrap() error { return e.err }

// publish writes the new secret to each sink of spec.rotation.publish it is not in yet, each
// recorded in status before the next is written. A sink is asked first whether it holds the
// secret already (a Key Vault version tagged with its keyId): a rotation resumed after a restart
// between the write and its record writes nothing twice.
func (m *Machine) publish(ctx context.Context) error {
	for _, sink := range m.Settings.Publish {
		kv := sink.KeyVault
		if kv == nil || slices.ContainsFunc(m.st.Published, func(p v1alpha1.PublishedSink) bool { return p.Sink == kv.Name() }) {
			continue
		}
		version, err := m.toKeyVault(ctx, kv)
		if err != nil {
			return &publishError{sink: kv.Name(), err: err}
		}
		m.st.Published = append(m.st.Published, v1alpha1.PublishedSink{Sink: kv.Name(), Version: version, Time: metav1.NewTime(m.Now)})
		if err := m.save(ctx); err != nil {
			return err
		}
		m.Events.Event(corev1.EventTypeNormal, EventPublished, fmt.Sprintf("The new secret %s is in %s, version %s", m.st.KeyID, kv.Name(), version))
	}
	return nil
}

// toKeyVault writes the new secret to kv, unless a version holds it already, and returns that
// version.
func (m *Machine) toKeyVault(ctx context.Context, kv *v1alpha1.KeyVaultSink) (string, error) {
	if m.Vaults == nil {
		return "", errors.New("no Key Vault client: the rotation's identity cannot reach Key Vault here")
	}
	version, _, found, err := m.Vaults.Find(ctx, kv.VaultURL, kv.SecretName, m.st.AppID, m.st.KeyID)
	if err != nil || found {
		return version, err
	}
	text, err := m.text(ctx)
	if err != nil {
		return "", err
	}
	var expires time.Time
	if m.st.Expiry != nil {
		expires = m.st.Expiry.Time
	}
	return m.Vaults.Set(ctx, kv.VaultURL, kv.SecretName, text, m.st.AppID, m.st.KeyID, expires)
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
