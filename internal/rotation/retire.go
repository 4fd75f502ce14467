package rotation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
)

// inUse moves the rotation to Retiring: the new secret is in use.
func (m *Machine) inUse() {
	m.st.Step, m.st.RetireTime = v1alpha1.StepRetiring, nil
	m.st.Message = "The new secret is in use; handing it to Secret " + m.Settings.SecretName
}

// replaceGone starts the rotation over when its new secret was removed after it was put in use:
// whatever still runs on an old secret is all that signs in, so none is retired, and a new
// secret is added and put in use as the first was (an AKS cluster reset onto it, or held for a
// person if resets have failed before).
func (m *Machine) replaceGone(ctx context.Context) error {
	m.Events.Event(corev1.EventTypeWarning, EventSecretVanished,
		"The new secret "+m.st.KeyID+" was removed from Graph after it was put in use; no old secret is retired, and a new one is added")
	return m.startOver(ctx, "The new secret disappeared from Graph after it was put in use; adding another, and retiring nothing meanwhile")
}

// retire hands the new secret to the sinks of spec.rotation.publish and the watch's Secret, then
// removes the old secrets that removeOld allows once the grace period, counted from then, is
// over and every sink still holds the new one, and completes the rotation.
func (m *Machine) retire(ctx context.Context) (time.Time, error) {
	if m.st.RetireTime == nil {
		if next, stop, err := m.handOver(ctx); stop {
			return next, err
		}
	}
	if t := m.st.RetireTime; m.Now.Before(t.Time) {
		return m.wait(t.Time, "The new secret is in use, and in Secret "+m.Settings.SecretName+"; old secrets go at "+t.UTC().Format(time.RFC3339))
	}
	secrets, err := m.App.Secrets(ctx)
	if err != nil {
		return m.fail(err, policy.PropagationBackoff(m.st.Failures+1))
	}
	if !slices.ContainsFunc(secrets, func(s Secret) bool { return s.KeyID == m.st.KeyID }) {
		return time.Time{}, m.replaceGone(ctx)
	}
	// The old secrets go only while the Secret holds the one that replaced them.
	if _, err := m.text(ctx); err != nil {
		return m.fail(err, policy.PropagationBackoff(m.st.Failures+1))
	}
	var expiry time.Time // none recorded: nothing outlives it, so nothing is retired
	if m.st.Expiry != nil {
		expiry = m.st.Expiry.Time
	}
	old := policy.Retirable(credentials(secrets), append([]string{m.Settings.Prefix}, m.Settings.Prefixes...), m.st.KeyID, expiry, m.Settings.RemoveOld)
	if next, quiet := m.quiet(old); !quiet {
		return next, nil
	}
	if next, ready, err := m.sinksReady(ctx, old); !ready {
		return next, err
	}
	var removed []string
	for _, c := range old {
		if err := m.App.Remove(ctx, c.KeyID); err != nil {
			return m.fail(err, policy.PropagationBackoff(m.st.Failures+1))
		}
		removed = append(removed, c.KeyID)
	}
	if err := m.Ledger.Finish(ctx, v1alpha1.LastRotation{Time: metav1.NewTime(m.Now), KeyID: m.st.KeyID, Request: m.st.Request,
		NewSecretSignIn: m.st.NewSecretSignIn}); err != nil {
		return time.Time{}, err
	}
	m.done = fmt.Sprintf("Rotated the client secret of %s: secret %s is in use until %s", m.Settings.Target, m.st.KeyID, expiry.UTC().Format(time.RFC3339))
	if len(removed) > 0 {
		m.done += fmt.Sprintf("; removed %d old secrets (%s)", len(removed), strings.Join(removed, ", "))
	}
	m.Events.Event(corev1.EventTypeNormal, EventRotated, m.done)
	// The check reads the new secret in at once: expiry and the next rotation are reckoned from it.
	return m.Now.Add(time.Second), nil
}

// handOver hands the new secret to the sinks of spec.rotation.publish and to the watch's Secret,
// and starts the grace period; stop says retire returns next and err.
func (m *Machine) handOver(ctx context.Context) (next time.Time, stop bool, err error) {
	if m.gone(ctx) {
		return time.Time{}, true, m.replaceGone(ctx)
	}
	// The digest is checked as the text is copied; Graph's hint, for a rotation begun before
	// digests were kept, here.
	if _, err := m.text(ctx); err != nil {
		next, err = m.fail(err, policy.PropagationBackoff(m.st.Failures+1))
		return next, true, err
	}
	if _, err := m.publish(ctx, false); err != nil {
		next, err = m.publishFailed(err)
		return next, true, err
	}
	if err := m.Store.Publish(ctx, m.st.KeyID, m.st.SecretDigest); err != nil {
		next, err = m.fail(err, policy.PropagationBackoff(m.st.Failures+1))
		return next, true, err
	}
	t := metav1.NewTime(m.Now.Add(m.Settings.GracePeriod))
	m.st.RetireTime = &t
	if err := m.moveOn(ctx); err != nil {
		return time.Time{}, true, err
	}
	return time.Time{}, false, nil
}

// sinksReady checks, as old secrets are about to go, that every sink still holds the new one, and
// disables their versions of the old: a sink written only now gives the old secrets a grace
// period more. ready is false when retire returns next and err.
func (m *Machine) sinksReady(ctx context.Context, old []v1alpha1.Credential) (next time.Time, ready bool, err error) {
	written, err := m.publish(ctx, true)
	if err != nil {
		next, err = m.publishFailed(err)
		return next, false, err
	}
	if written > 0 {
		t := metav1.NewTime(m.Now.Add(m.Settings.GracePeriod))
		m.st.RetireTime = &t
		if err := m.moveOn(ctx); err != nil {
			return time.Time{}, false, err
		}
		next, err = m.wait(t.Time, "A sink got the new secret only now; old secrets go at "+t.UTC().Format(time.RFC3339)+", a grace period later")
		return next, false, err
	}
	keyIDs := make([]string, 0, len(old))
	for _, c := range old {
		keyIDs = append(keyIDs, c.KeyID)
	}
	if err := m.disableRetired(ctx, keyIDs); err != nil {
		next, err = m.publishFailed(err)
		return next, false, err
	}
	return time.Time{}, true, nil
}

// credentials lists secrets as status records credentials, for policy.Retirable.
func credentials(secrets []Secret) []v1alpha1.Credential {
	out := make([]v1alpha1.Credential, 0, len(secrets))
	for _, s := range secrets {
		out = append(out, v1alpha1.Credential{KeyID: s.KeyID, DisplayName: s.DisplayName, EndTime: metav1.NewTime(s.End),
			Source: v1alpha1.SourceApplication, Type: v1alpha1.CredentialTypePassword})
	}
	return out
}
