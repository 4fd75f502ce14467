package rotation

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/secret"
)

// An addPassword whose answer was lost is given addListLag to show in Graph's list, read every
// addListPoll, before another is sent.
const (
	addListLag  = 2 * time.Minute
	addListPoll = 20 * time.Second
)

// A new secret is used once Entra accepted it acceptancesNeeded times over at least acceptanceSpan.
const (
	acceptancesNeeded = 3
	acceptanceSpan    = time.Minute
)

// verifyTriesBeforeRecheck is how many refusals of a new secret pass before Graph is asked
// whether it still exists: replication takes seconds, so many refusals mean something else.
const verifyTriesBeforeRecheck = 10

// storeTimeout bounds keeping a new secret's text, which a stopping operator still does.
const storeTimeout = 15 * time.Second

// removeOrphans removes the secrets of this rotation in Graph that the Store does not hold, and
// returns the one it holds, if Graph lists it.
func (m *Machine) removeOrphans(ctx context.Context, secrets []Secret, held Held) (*Secret, error) {
	var adopt *Secret
	for _, s := range secrets {
		if s.DisplayName != m.st.DisplayName {
			continue
		}
		if held.DisplayName == m.st.DisplayName && held.KeyID == s.KeyID {
			adopt = &s
			continue
		}
		if err := m.App.Remove(ctx, s.KeyID); err != nil {
			return nil, err
		}
		m.Events.Event(corev1.EventTypeNormal, EventOrphanRemoved,
			fmt.Sprintf("Removed secret %s, created by an earlier attempt whose text was never stored", s.KeyID))
	}
	return adopt, nil
}

// add adds the new secret in Graph, its time saved first, and keeps its text in the Store; a
// secret the Store could not take is removed again.
func (m *Machine) add(ctx context.Context) (time.Time, error) {
	addTime := metav1.NewTime(m.Now)
	m.st.AddTime = &addTime
	if err := m.save(ctx); err != nil {
		return time.Time{}, err
	}
	s, err := m.App.Add(ctx, m.st.DisplayName, m.Now.Add(m.Settings.Validity))
	if err != nil {
		return m.fail(err, policy.PropagationBackoff(m.st.Failures+1))
	}
	// From here the text exists only in memory: keeping it must not be cut short by the operator
	// stopping, or the secret is orphaned (and removed at the next start).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := m.Store.Write(ctx, m.st.DisplayName, s, false); err != nil {
		// The write may have landed though it reported failure (a timeout); only a secret the
		// Store does not hold is unusable, and must not stay.
		if now, rerr := m.Store.Held(ctx); rerr == nil && now.KeyID == s.KeyID {
			return m.stored(ctx, s.KeyID, s.End, &s.Text)
		}
		if rmErr := m.App.Remove(ctx, s.KeyID); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("and removing the unusable secret: %w", rmErr))
		}
		return m.fail(err, policy.PropagationBackoff(m.st.Failures+1))
	}
	return m.stored(ctx, s.KeyID, s.End, &s.Text)
}

// create makes the new secret and keeps it, or adopts the one an earlier attempt kept. The Store
// is asked first, as Graph's lists lag behind its writes; a secret of this rotation that the
// Store does not hold is an orphan whose text is gone, and is removed before another is added,
// so that at most one spare secret ever exists.
func (m *Machine) create(ctx context.Context) (time.Time, error) {
	held, err := m.Store.Held(ctx)
	if errors.Is(err, ErrForeign) {
		// Someone else's Secret took the name since the rotation started: nothing is added that
		// could not be kept.
		return m.fail(err, policy.ClusterBackoff(m.st.Failures+1))
	}
	if err != nil {
		return time.Time{}, err
	}
	secrets, err := m.App.Secrets(ctx)
	if err != nil {
		return m.fail(err, policy.PropagationBackoff(m.st.Failures+1))
	}
	adopt, err := m.removeOrphans(ctx, secrets, held)
	if err != nil {
		return m.fail(err, policy.PropagationBackoff(m.st.Failures+1))
	}
	switch {
	case adopt != nil:
		return m.stored(ctx, adopt.KeyID, adopt.End, nil)
	case held.DisplayName == m.st.DisplayName && held.KeyID != "":
		// Kept, but not listed yet: Graph's read lags its write. Trust the Store.
		return m.stored(ctx, held.KeyID, held.End, nil)
	}

	// The Store must take the write before a secret exists whose text would have nowhere to go:
	// an immutable or typed Secret, an admission policy or missing rights would otherwise add and
	// remove a secret in Graph at every try.
	if err := m.Store.Write(ctx, m.st.DisplayName, NewSecret{KeyID: "dry-run", End: m.Now}, true); err != nil {
		return m.fail(err, policy.PropagationBackoff(m.st.Failures+1))
	}
	if t := m.st.AddTime; t != nil && m.Now.Before(t.Add(addListLag)) {
		// An earlier addPassword may have made a secret whose answer was lost; Graph's list may
		// not show it yet. Adding now could leave two: the list is read again until it had time.
		return m.wait(policy.Earliest(t.Add(addListLag), m.Now.Add(addListPoll)),
			"Waiting for Graph to list a secret an earlier attempt may have added, before adding another")
	}
	return m.add(ctx)
}

// stored records the new secret the Store keeps, with the digest of its text: the text just
// added, or, for a secret an earlier attempt kept, the text the Store holds now.
func (m *Machine) stored(ctx context.Context, keyID string, end time.Time, text *secret.Text) (time.Time, error) {
	if text == nil {
		kept, err := m.Store.Text(ctx, keyID)
		if err != nil {
			return m.fail(err, policy.PropagationBackoff(m.st.Failures+1))
		}
		text = &kept
	}
	expiry := metav1.NewTime(end.Truncate(time.Second))
	m.st.Step, m.st.KeyID, m.st.Expiry, m.st.SecretDigest = v1alpha1.StepSecretStored, keyID, &expiry, text.Digest()
	m.st.Message = "Waiting for Entra to accept the new secret"
	return time.Time{}, m.moveOn(ctx)
}

// verify asks Entra whether it accepts the new secret yet: it takes seconds to replicate, and
// replicas that have not learnt of it refuse it for a while after one accepted it, so a consumer
// or a cluster handed it too soon would fail where the check succeeded.
func (m *Machine) verify(ctx context.Context) (time.Time, error) {
	text, err := m.text(ctx)
	if err != nil {
		return m.fail(err, policy.PropagationBackoff(m.st.Failures+1))
	}
	if err := m.SignIn(ctx, text); err != nil {
		if m.st.Failures >= verifyTriesBeforeRecheck && m.gone(ctx) {
			return time.Time{}, m.startOver(ctx, "The new secret disappeared from Graph before it was accepted; adding another")
		}
		m.st.Failures++
		return m.wait(m.Now.Add(policy.PropagationBackoff(m.st.Failures)),
			fmt.Sprintf("Waiting for Entra to accept the new secret (%d tries): %v", m.st.Failures, err))
	}
	if m.st.Acceptances == 0 {
		first := metav1.NewTime(m.Now)
		m.st.FirstAcceptedTime = &first
	}
	m.st.Acceptances++
	if since := m.Now.Sub(m.st.FirstAcceptedTime.Time); m.st.Acceptances < acceptancesNeeded || since < acceptanceSpan {
		return m.wait(m.Now.Add(acceptanceSpan/(acceptancesNeeded-1)),
			fmt.Sprintf("Entra accepted the new secret %d times in %s; waiting for %d over %s before it is used",
				m.st.Acceptances, since.Round(time.Second), acceptancesNeeded, acceptanceSpan))
	}
	if m.st.Cluster == nil {
		m.inUse()
	} else {
		m.st.Step, m.st.Message = v1alpha1.StepSecretVerified, "Moving the AKS cluster onto the new secret"
	}
	return time.Time{}, m.moveOn(ctx)
}

// gone reports whether Graph no longer lists the new secret; false when Graph cannot say.
func (m *Machine) gone(ctx context.Context) bool {
	secrets, err := m.App.Secrets(ctx)
	if err != nil {
		return false
	}
	for _, s := range secrets {
		if s.KeyID == m.st.KeyID {
			return false
		}
	}
	return true
}

// text reads the new secret's text back from the Store, and checks that it is still the one the
// rotation made: its digest is the one kept when it was made, and its start is Graph's hint of
// the secret, once Graph lists it. A Secret changed to hold another secret's text under this
// keyId (a valid old one, say) would pass a sign-in check, and the cluster would be reset onto
// a secret that is then retired.
func (m *Machine) text(ctx context.Context) (secret.Text, error) {
	text, err := m.Store.Text(ctx, m.st.KeyID)
	if err != nil {
		return secret.Text{}, err
	}
	if m.st.SecretDigest != "" && text.Digest() != m.st.SecretDigest {
		return secret.Text{}, m.changed("its SHA-256 is not the one credwatch recorded")
	}
	secrets, err := m.App.Secrets(ctx)
	if err != nil {
		return secret.Text{}, err
	}
	for _, s := range secrets {
		if s.KeyID == m.st.KeyID && s.Hint != "" && s.Hint != text.Hint() {
			return secret.Text{}, m.changed("it does not start as Graph's hint of the secret does")
		}
	}
	return text, nil
}

// changed says that the Secret keeping the new secret holds another text, and what to do.
func (m *Machine) changed(why string) error {
	return fmt.Errorf("%w: Secret %s/%s (or %s) holds a text under the new secret's keyId %s that is not the secret credwatch made (%s). "+
		"Nothing is reset, published or retired until it holds it again: put back what credwatch wrote, or, before any reset, "+
		"abort the rotation (kubectl annotate credentialwatch -n %s %s %s=now), which removes the new secret",
		ErrSecretChanged, m.Settings.SecretNamespace, m.Settings.StagingName, m.Settings.SecretName, m.st.KeyID, why,
		m.Settings.SecretNamespace, m.Settings.Watch, v1alpha1.AbortRotationAnnotation)
}

// errSecretGone: the rotation's new secret is no longer among the application's.
var errSecretGone = errors.New("the new secret is no longer in Graph")

// usable checks that the new secret still exists in Graph and that Entra accepts it.
func (m *Machine) usable(ctx context.Context) error {
	if m.gone(ctx) {
		return errSecretGone
	}
	text, err := m.text(ctx)
	if err != nil {
		return err
	}
	if err := m.SignIn(ctx, text); err != nil {
		return fmt.Errorf("the new secret no longer signs in: %w", err)
	}
	return nil
}

// startOver begins the rotation again with a new secret, when the one it made is gone. What was
// pinned stays pinned: the application, and the cluster the old secret serves; and so do the
// resets already made, which keep the rotation from being aborted and count towards the hold.
// The last reset operation does not: it moved the cluster onto the secret that is gone, and a
// confirmation of it says nothing of the new one.
func (m *Machine) startOver(ctx context.Context, why string) error {
	// What the rotation pinned stays pinned: the identity it acts with, and its gate on sign-ins.
	m.st = v1alpha1.RotationStatus{Step: v1alpha1.StepStarted, DisplayName: m.newSecretName(),
		TenantID: m.st.TenantID, AppID: m.st.AppID, ApplicationObjectID: m.st.ApplicationObjectID, Cluster: m.st.Cluster,
		Identity: m.st.Identity, SignInsGated: m.st.SignInsGated, Resets: m.st.Resets, FailedResets: m.st.FailedResets,
		StartTime: m.st.StartTime, Request: m.st.Request, AbortRequest: m.st.AbortRequest, SecretName: m.st.SecretName,
		DeletionSeenTime: m.st.DeletionSeenTime, Message: why}
	return m.save(ctx)
}
