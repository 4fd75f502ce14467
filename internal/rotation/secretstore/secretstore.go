// Package secretstore keeps a rotation's new secret in the Kubernetes Secrets of the watch's
// namespace: a staging Secret the watch owns while the secret may still be withdrawn, then the
// target Secret its consumers read. It writes only Secrets credwatch made for the watch, or that
// their owner marked as the watch's: whoever may create a watch must not overwrite any Secret.
package secretstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/rotation"
	"github.com/credwatch/credwatch/internal/secret"
	"github.com/credwatch/credwatch/internal/target"
)

// Keys of the Secret a rotation writes.
const (
	rotatedKeyTenantID     = "tenantID"
	rotatedKeyClientID     = "clientID"
	rotatedKeyClientSecret = "clientSecret"
	rotatedKeyKeyID        = "keyID"
	rotatedKeyExpiry       = "expiry"
)

// annotationSecretName, on the target Secret, names the Graph secret it holds: the rotation
// that made it finds it there even before Graph lists it.
const annotationSecretName = policy.AnnotationSecretOld

// Store keeps a rotation's new secret in a staging Secret the watch owns until the secret is in
// use, then in the watch's target Secret: consumers of the target never see a secret that may
// still be withdrawn.
type Store struct {
	// Reader reads one Secret at a time; not a cache, which would hold every Secret in the cluster.
	Reader client.Reader
	Writer client.Writer
	// Watch is the watch whose rotation this is: it owns the staging Secret.
	Watch *v1alpha1.CredentialWatch
	// Target names the Secret of the watch's namespace the secret is published to.
	Target string
	// TenantID and AppID are the rotated application's, written beside its secret.
	TenantID, AppID string
}

// get reads a Secret, refusing one that is someone else's; nil when there is none.
func (s *Store) get(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error) {
	if s.Target == rotation.StagingName(s.Watch.Name) {
		// Publishing would delete the Secret it had just written.
		return nil, fmt.Errorf("spec.rotation.secretRef.name %q is the name of the watch's staging Secret: name another: %w", s.Target, rotation.ErrForeign)
	}
	var sec corev1.Secret
	if err := s.Reader.Get(ctx, key, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, &target.KubernetesError{Err: fmt.Errorf("reading Secret %s: %w", key, err)}
	}
	owned := policy.SecretOwned(sec.Labels, sec.Annotations, s.Watch.Name, string(s.Watch.UID))
	if key == s.staging() {
		owned = owned && metav1.IsControlledBy(&sec, s.Watch)
	}
	if !owned {
		return nil, &foreignSecretError{key}
	}
	return &sec, nil
}

// holding reads the Secret that holds the rotation's secret: the staging one, or, once the
// secret is in use (or for a rotation an earlier version began), the target.
func (s *Store) holding(ctx context.Context) (*corev1.Secret, error) {
	sec, err := s.get(ctx, s.staging())
	if err != nil || (sec != nil && s.holds(sec, "")) {
		return sec, err
	}
	return s.get(ctx, s.target())
}

// holds reports whether sec holds a secret of the application, keyID if not empty.
func (s *Store) holds(sec *corev1.Secret, keyID string) bool {
	return sec != nil && len(sec.Data[rotatedKeyClientSecret]) > 0 && string(sec.Data[rotatedKeyClientID]) == s.AppID &&
		(keyID == "" || string(sec.Data[rotatedKeyKeyID]) == keyID)
}

// Held reads what the staging or the target Secret keeps of the application's new secret.
func (s *Store) Held(ctx context.Context) (rotation.Held, error) {
	sec, err := s.holding(ctx)
	if err != nil || !s.holds(sec, "") {
		return rotation.Held{}, err
	}
	expiry, _ := time.Parse(time.RFC3339, string(sec.Data[rotatedKeyExpiry]))
	return rotation.Held{KeyID: string(sec.Data[rotatedKeyKeyID]), DisplayName: sec.Annotations[annotationSecretName], End: expiry}, nil
}

// Text reads the new secret back, checking it is still the one the rotation made.
func (s *Store) Text(ctx context.Context, keyID string) (secret.Text, error) {
	sec, err := s.holding(ctx)
	if err != nil {
		return secret.Text{}, err
	}
	if !s.holds(sec, keyID) {
		return secret.Text{}, s.lost(keyID)
	}
	return secret.New(string(sec.Data[rotatedKeyClientSecret])), nil
}

// lost says that neither Secret holds the new secret keyID any more.
func (s *Store) lost(keyID string) error {
	//nolint:staticcheck // ST1005: the message starts with the kind, Secret, as people read it in status
	return fmt.Errorf("Secrets %s and %s no longer hold the new secret %s of %s: they were changed by someone else", s.staging(), s.target(), keyID, s.AppID)
}

// holdsText reports whether sec's client secret has the SHA-256 digest; any does when digest is
// empty (a rotation begun before digests were kept).
func holdsText(sec *corev1.Secret, digest string) bool {
	return digest == "" || secret.New(string(sec.Data[rotatedKeyClientSecret])).Digest() == digest
}

// changed says that sec holds another text under keyID than the secret the rotation made.
func (s *Store) changed(sec *corev1.Secret, keyID string) error {
	return fmt.Errorf("%w: Secret %s holds a text under keyId %s that is not the secret credwatch made; it is not published",
		rotation.ErrSecretChanged, client.ObjectKeyFromObject(sec), keyID)
}

// Write stages the new secret. A dry run asks the API server to take the target's write too:
// a secret whose target can never be written must not be made.
func (s *Store) Write(ctx context.Context, displayName string, ns rotation.NewSecret, dryRun bool) error {
	data := map[string][]byte{
		rotatedKeyTenantID:     []byte(s.TenantID),
		rotatedKeyClientID:     []byte(s.AppID),
		rotatedKeyClientSecret: []byte(ns.Text.Reveal()),
		rotatedKeyKeyID:        []byte(ns.KeyID),
		rotatedKeyExpiry:       []byte(ns.End.UTC().Format(time.RFC3339)),
	}
	if dryRun {
		if err := s.put(ctx, s.target(), displayName, data, true); err != nil {
			return err
		}
	}
	return s.put(ctx, s.staging(), displayName, data, dryRun)
}

// Publish puts the secret keyID, in use now, in the target Secret, and deletes the staging one.
// A Secret holding another text under keyID than the one whose SHA-256 is digest (when given)
// is not published, nor taken as published.
func (s *Store) Publish(ctx context.Context, keyID, digest string) error {
	staged, err := s.get(ctx, s.staging())
	if err != nil {
		return err
	}
	if s.holds(staged, keyID) {
		if !holdsText(staged, digest) {
			return s.changed(staged, keyID)
		}
		data := map[string][]byte{}
		for _, k := range []string{rotatedKeyTenantID, rotatedKeyClientID, rotatedKeyClientSecret, rotatedKeyKeyID, rotatedKeyExpiry} {
			data[k] = staged.Data[k]
		}
		if err := s.put(ctx, s.target(), staged.Annotations[annotationSecretName], data, false); err != nil {
			return err
		}
		return s.delete(ctx, staged)
	}
	published, err := s.get(ctx, s.target())
	if err != nil {
		return err
	}
	if !s.holds(published, keyID) {
		return s.lost(keyID)
	}
	if !holdsText(published, digest) {
		return s.changed(published, keyID)
	}
	if staged != nil {
		return s.delete(ctx, staged) // published before; the staging copy outlived an interrupted reconcile
	}
	return nil
}

// Discard deletes the staging Secret, if the watch owns one.
func (s *Store) Discard(ctx context.Context) error {
	staged, err := s.get(ctx, s.staging())
	if err != nil || staged == nil {
		return err
	}
	return s.delete(ctx, staged)
}

// delete deletes sec if it is still the one read: a Secret re-created meanwhile is not touched.
func (s *Store) delete(ctx context.Context, sec *corev1.Secret) error {
	pre := client.Preconditions{UID: &sec.UID, ResourceVersion: &sec.ResourceVersion}
	if err := s.Writer.Delete(ctx, sec, pre); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Secret %s: %w", client.ObjectKeyFromObject(sec), err)
	}
	return nil
}

// put writes data to the Secret key, creating it if need be. Keys the rotation does not write
// stay: whoever consumes the Secret may keep more in it.
func (s *Store) put(ctx context.Context, key types.NamespacedName, displayName string, data map[string][]byte, dryRun bool) error {
	var create []client.CreateOption
	var update []client.UpdateOption
	if dryRun {
		create, update = append(create, client.DryRunAll), append(update, client.DryRunAll)
	}
	sec, err := s.get(ctx, key)
	if err != nil {
		return err
	}
	if sec != nil && key == s.staging() {
		// The staging Secret is immutable: one an earlier attempt left is replaced, not updated.
		if dryRun {
			if err := s.Writer.Delete(ctx, sec, client.DryRunAll); err != nil {
				return fmt.Errorf("replacing Secret %s: %w", key, err)
			}
			return nil
		}
		if err := s.delete(ctx, sec); err != nil {
			return err
		}
		sec = nil
	}
	if sec == nil {
		sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}, Type: corev1.SecretTypeOpaque}
		if key == s.staging() {
			// The watch's deletion takes the staging Secret with it, should the finalizer not.
			sec.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(s.Watch, v1alpha1.GroupVersion.WithKind("CredentialWatch"))}
			sec.OwnerReferences[0].BlockOwnerDeletion = nil
			// Nobody edits it in place, credwatch included; its digest in status covers its
			// deletion and re-creation by someone else.
			sec.Immutable = ptr.To(true)
		}
		markOwned(sec, s.Watch.Name, displayName, data)
		err = s.Writer.Create(ctx, sec, create...)
	} else {
		markOwned(sec, s.Watch.Name, displayName, data)
		err = s.Writer.Update(ctx, sec, update...)
	}
	if err != nil {
		if !dryRun {
			err = withoutMessage(err)
		}
		return fmt.Errorf("writing the new secret to Secret %s: %w", key, err)
	}
	return nil
}

// withoutMessage keeps of the API server's refusal of a write that carried a secret its reason
// and code, not its message: an admission webhook's message may quote the object it refused,
// and this one goes to status and events. The dry run before carried no secret, and said it all.
func withoutMessage(err error) error {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return err
	}
	st := se.Status()
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: st.Status, Code: st.Code, Reason: st.Reason,
		Message: fmt.Sprintf("the API server refused the write (%s, HTTP %d); its message is not repeated, as it may quote the Secret's data", st.Reason, st.Code)}}
}

// foreignSecretError: the target Secret exists and credwatch did not create it for this watch.
// Writing it would let anyone who may create a watch overwrite any Secret of the namespace.
type foreignSecretError struct{ key types.NamespacedName }

func (e *foreignSecretError) Error() string {
	return fmt.Sprintf("Secret %s exists and credwatch did not create it for this watch, so a rotation does not write it: name another "+
		"spec.rotation.secretRef, or, to let this watch write it on purpose, "+
		"kubectl label secret -n %s %s %s=%s && kubectl annotate secret -n %s %s %s=<the watch's name>",
		e.key, e.key.Namespace, e.key.Name, policy.LabelManagedBy, policy.ManagedByCredwatch, e.key.Namespace, e.key.Name, policy.AnnotationWatch)
}

func (e *foreignSecretError) Unwrap() error { return rotation.ErrForeign }

// markOwned marks s as this watch's, adopting one an earlier version wrote, and merges data in.
func markOwned(s *corev1.Secret, watch, displayName string, data map[string][]byte) {
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Labels[policy.LabelManagedBy] = policy.ManagedByCredwatch
	s.Annotations[policy.AnnotationWatch] = watch
	s.Annotations[annotationSecretName] = displayName
	for k, v := range data {
		s.Data[k] = v
	}
}

// target is the key of the Secret the secret is published to.
func (s *Store) target() types.NamespacedName {
	return types.NamespacedName{Namespace: s.Watch.Namespace, Name: s.Target}
}

// staging is the key of the Secret that keeps the secret until it is in use.
func (s *Store) staging() types.NamespacedName {
	return types.NamespacedName{Namespace: s.Watch.Namespace, Name: rotation.StagingName(s.Watch.Name)}
}
