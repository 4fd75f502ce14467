package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/rotation"
	"github.com/credwatch/credwatch/internal/secret"
)

// machine binds a rotation machine to the watch: its identity g, the pinned application and
// cluster, the Secret store and the watch's status. On error the machine has no clients, and
// serves only to record that its step could not be tried.
func (ro *rotationRun) machine(ctx context.Context, g access.Grant, store rotation.Store) (*rotation.Machine, error) {
	m := &rotation.Machine{
		Store:  store,
		Ledger: &watchLedger{r: ro.r, w: ro.w},
		Events: watchEvents{rec: ro.r.Recorder, obj: ro.obj},
		Now:    ro.now,
		Settings: rotation.Settings{
			Validity: ro.rs.Validity, GracePeriod: ro.rs.GracePeriod, Window: ro.spec.MaintenanceWindow, RemoveOld: ro.spec.RemoveOld,
			Prefix: ro.prefix(), Prefixes: ro.prefixes()[1:], Target: compose.TargetName(ro.obj), Watch: ro.obj.Name,
			SecretNamespace: ro.obj.Namespace, SecretName: ro.spec.SecretRef.Name, StagingName: stagingName(ro.obj.Name),
			ConfirmReset: ro.obj.Annotations[v1alpha1.ConfirmResetAnnotation],
		},
	}
	id, err := ro.r.signIns().identity(ctx, g.Identity, ro.pin.TenantID)
	if err != nil {
		return m, err
	}
	app, err := ro.r.Azure.Application(id, graph.AppRef{AppID: ro.pin.AppID, ObjectID: ro.pin.ApplicationObjectID})
	if err != nil {
		return m, err
	}
	m.App = appSecrets{app}
	if c := ro.pin.Cluster; c != nil {
		cluster, err := ro.r.Azure.Cluster(id, pinnedRef(c))
		if err != nil {
			return m, err
		}
		m.Cluster = clusterReset{cluster}
	}
	tenant, appID := ro.pin.TenantID, ro.pin.AppID
	m.SignIn = func(ctx context.Context, text secret.Text) error {
		return ro.r.Azure.SignIn(ctx, azure.Identity{TenantID: tenant, ClientID: appID, Secret: text})
	}
	return m, nil
}

// appSecrets is the application's client secrets, as Graph holds them.
type appSecrets struct{ app graph.AppClient }

func (a appSecrets) Secrets(ctx context.Context) ([]rotation.Secret, error) {
	snap, err := a.app.ReadCredentials(ctx)
	if err != nil {
		return nil, err
	}
	var out []rotation.Secret
	for _, c := range snap.Credentials {
		if c.Source == graph.Application && c.Type == graph.Password {
			out = append(out, rotation.Secret{KeyID: c.KeyID, DisplayName: c.DisplayName, End: c.End})
		}
	}
	return out, nil
}

func (a appSecrets) Add(ctx context.Context, displayName string, end time.Time) (rotation.NewSecret, error) {
	s, err := a.app.AddPassword(ctx, displayName, end)
	if err != nil {
		return rotation.NewSecret{}, err
	}
	return rotation.NewSecret{KeyID: s.KeyID, Text: secret.New(s.Text), End: s.End}, nil
}

func (a appSecrets) Remove(ctx context.Context, keyID string) error {
	return a.app.RemovePassword(ctx, keyID)
}

// clusterReset is the pinned AKS cluster, as Resource Manager holds it.
type clusterReset struct{ c aks.ClusterClient }

func (c clusterReset) Read(ctx context.Context) (rotation.ClusterState, error) {
	got, err := c.c.Read(ctx)
	return rotation.ClusterState{ClientID: got.ClientID, ProvisioningState: got.ProvisioningState, PowerState: got.PowerState}, err
}

func (c clusterReset) StartReset(ctx context.Context, clientID string, text secret.Text) (rotation.Operation, bool, error) {
	token, done, err := c.c.StartReset(ctx, aks.ServicePrincipal{ClientID: clientID, Secret: text})
	return rotation.Operation{Token: token, ID: aks.OperationID(token)}, done, err
}

func (c clusterReset) PollReset(ctx context.Context, token string) (bool, error) {
	return c.c.PollReset(ctx, token)
}

// watchLedger saves the rotation in the watch's status, with an optimistic lock.
type watchLedger struct {
	r *CredentialWatchReconciler
	w *watchState
}

func (l *watchLedger) Save(ctx context.Context, st v1alpha1.RotationStatus) error {
	return l.r.writeNow(ctx, l.w.obj, l.w.stored, func(s *v1alpha1.CredentialWatchStatus) { s.Rotation = st.DeepCopy() })
}

func (l *watchLedger) Abandon(ctx context.Context, why string) error {
	obj := l.w.obj
	abort := v1alpha1.LastAbort{Time: metav1.NewTime(l.w.now), Reason: why, Generation: obj.Generation, Request: obj.Annotations[v1alpha1.RotateAnnotation]}
	return l.r.writeNow(ctx, obj, l.w.stored, func(s *v1alpha1.CredentialWatchStatus) { s.Rotation, s.LastAbort = nil, abort.DeepCopy() })
}

func (l *watchLedger) Finish(ctx context.Context, done v1alpha1.LastRotation) error {
	// The check reads the new secret in at once, so that expiry and the next rotation are
	// reckoned from it rather than from the credentials read before.
	checkNow := metav1.NewTime(l.w.now)
	return l.r.writeNow(ctx, l.w.obj, l.w.stored, func(s *v1alpha1.CredentialWatchStatus) {
		s.Rotation, s.LastRotation, s.NextCheckTime = nil, done.DeepCopy(), checkNow.DeepCopy()
	})
}

// watchEvents records events on the watch.
type watchEvents struct {
	rec record.EventRecorder
	obj *v1alpha1.CredentialWatch
}

func (e watchEvents) Event(eventtype, reason, message string) {
	e.rec.Event(e.obj, eventtype, reason, message)
}

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

// secretStore keeps a rotation's new secret in a staging Secret the watch owns until the secret is
// in use, then in the watch's target Secret: consumers of the target never see a secret that may
// still be withdrawn. It reads through SecretReader, not the cache, which would hold every
// Secret in the cluster.
type secretStore struct {
	r               *CredentialWatchReconciler
	obj             *v1alpha1.CredentialWatch
	target, staging types.NamespacedName
	tenant, appID   string
}

func (ro *rotationRun) store() *secretStore {
	return &secretStore{r: ro.r, obj: ro.obj, target: ro.secretKey(), tenant: ro.pin.TenantID, appID: ro.pin.AppID,
		staging: types.NamespacedName{Namespace: ro.obj.Namespace, Name: stagingName(ro.obj.Name)}}
}

// stagingName names the staging Secret of the watch called watch.
func stagingName(watch string) string {
	const prefix = "credwatch-rotation-"
	name := prefix + watch
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(watch))
	return name[:validation.DNS1123SubdomainMaxLength-9] + "-" + hex.EncodeToString(sum[:4])
}

// get reads a Secret, refusing one that is someone else's; nil when there is none.
func (s *secretStore) get(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error) {
	if s.target == s.staging {
		// Publishing would delete the Secret it had just written.
		return nil, fmt.Errorf("spec.rotation.secretRef.name %q is the name of the watch's staging Secret: name another: %w", s.target.Name, rotation.ErrForeign)
	}
	var sec corev1.Secret
	if err := s.r.SecretReader.Get(ctx, key, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, &kubernetesError{fmt.Errorf("reading Secret %s: %w", key, err)}
	}
	owned := policy.SecretOwned(sec.Labels, sec.Annotations, s.obj.Name, string(s.obj.UID))
	if key == s.staging {
		owned = owned && metav1.IsControlledBy(&sec, s.obj)
	}
	if !owned {
		return nil, &foreignSecretError{key}
	}
	return &sec, nil
}

// holding reads the Secret that holds the rotation's secret: the staging one, or, once the
// secret is in use (or for a rotation an earlier version began), the target.
func (s *secretStore) holding(ctx context.Context) (*corev1.Secret, error) {
	sec, err := s.get(ctx, s.staging)
	if err != nil || (sec != nil && s.holds(sec, "")) {
		return sec, err
	}
	return s.get(ctx, s.target)
}

// holds reports whether sec holds a secret of the application, keyID if not empty.
func (s *secretStore) holds(sec *corev1.Secret, keyID string) bool {
	return sec != nil && len(sec.Data[rotatedKeyClientSecret]) > 0 && string(sec.Data[rotatedKeyClientID]) == s.appID &&
		(keyID == "" || string(sec.Data[rotatedKeyKeyID]) == keyID)
}

func (s *secretStore) Held(ctx context.Context) (rotation.Held, error) {
	sec, err := s.holding(ctx)
	if err != nil || !s.holds(sec, "") {
		return rotation.Held{}, err
	}
	expiry, _ := time.Parse(time.RFC3339, string(sec.Data[rotatedKeyExpiry]))
	return rotation.Held{KeyID: string(sec.Data[rotatedKeyKeyID]), DisplayName: sec.Annotations[annotationSecretName], End: expiry}, nil
}

// Text reads the new secret back, checking it is still the one the rotation made.
func (s *secretStore) Text(ctx context.Context, keyID string) (secret.Text, error) {
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
func (s *secretStore) lost(keyID string) error {
	//nolint:staticcheck // ST1005: the message starts with the kind, Secret, as people read it in status
	return fmt.Errorf("Secrets %s and %s no longer hold the new secret %s of %s: they were changed by someone else", s.staging, s.target, keyID, s.appID)
}

// Write stages the new secret. A dry run asks the API server to take the target's write too:
// a secret whose target can never be written must not be made.
func (s *secretStore) Write(ctx context.Context, displayName string, ns rotation.NewSecret, dryRun bool) error {
	data := map[string][]byte{
		rotatedKeyTenantID:     []byte(s.tenant),
		rotatedKeyClientID:     []byte(s.appID),
		rotatedKeyClientSecret: []byte(ns.Text.Reveal()),
		rotatedKeyKeyID:        []byte(ns.KeyID),
		rotatedKeyExpiry:       []byte(ns.End.UTC().Format(time.RFC3339)),
	}
	if dryRun {
		if err := s.put(ctx, s.target, displayName, data, true); err != nil {
			return err
		}
	}
	return s.put(ctx, s.staging, displayName, data, dryRun)
}

// Publish puts the secret keyID, in use now, in the target Secret, and deletes the staging one.
func (s *secretStore) Publish(ctx context.Context, keyID string) error {
	staged, err := s.get(ctx, s.staging)
	if err != nil {
		return err
	}
	if s.holds(staged, keyID) {
		data := map[string][]byte{}
		for _, k := range []string{rotatedKeyTenantID, rotatedKeyClientID, rotatedKeyClientSecret, rotatedKeyKeyID, rotatedKeyExpiry} {
			data[k] = staged.Data[k]
		}
		if err := s.put(ctx, s.target, staged.Annotations[annotationSecretName], data, false); err != nil {
			return err
		}
		return s.delete(ctx, staged)
	}
	target, err := s.get(ctx, s.target)
	if err != nil {
		return err
	}
	if !s.holds(target, keyID) {
		return s.lost(keyID)
	}
	if staged != nil {
		return s.delete(ctx, staged) // published before; the staging copy outlived an interrupted reconcile
	}
	return nil
}

// Discard deletes the staging Secret, if the watch owns one.
func (s *secretStore) Discard(ctx context.Context) error {
	staged, err := s.get(ctx, s.staging)
	if err != nil || staged == nil {
		return err
	}
	return s.delete(ctx, staged)
}

// delete deletes sec if it is still the one read: a Secret re-created meanwhile is not touched.
func (s *secretStore) delete(ctx context.Context, sec *corev1.Secret) error {
	pre := client.Preconditions{UID: &sec.UID, ResourceVersion: &sec.ResourceVersion}
	if err := s.r.Delete(ctx, sec, pre); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Secret %s: %w", client.ObjectKeyFromObject(sec), err)
	}
	return nil
}

// put writes data to the Secret key, creating it if need be. Keys the rotation does not write
// stay: whoever consumes the Secret may keep more in it.
func (s *secretStore) put(ctx context.Context, key types.NamespacedName, displayName string, data map[string][]byte, dryRun bool) error {
	var create []client.CreateOption
	var update []client.UpdateOption
	if dryRun {
		create, update = append(create, client.DryRunAll), append(update, client.DryRunAll)
	}
	sec, err := s.get(ctx, key)
	switch {
	case err != nil:
		return err
	case sec == nil:
		sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}, Type: corev1.SecretTypeOpaque}
		if key == s.staging {
			// The watch's deletion takes the staging Secret with it, should the finalizer not.
			sec.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(s.obj, v1alpha1.GroupVersion.WithKind("CredentialWatch"))}
			sec.OwnerReferences[0].BlockOwnerDeletion = nil
		}
		markOwned(sec, s.obj.Name, displayName, data)
		err = s.r.Create(ctx, sec, create...)
	default:
		markOwned(sec, s.obj.Name, displayName, data)
		err = s.r.Update(ctx, sec, update...)
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
