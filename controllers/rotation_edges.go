package controllers

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/rotation"
	"github.com/credwatch/credwatch/internal/rotation/secretstore"
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
			SecretNamespace: ro.obj.Namespace, SecretName: ro.spec.SecretRef.Name, StagingName: secretstore.StagingName(ro.obj.Name),
			ConfirmReset: ro.obj.Annotations[v1alpha1.ConfirmResetAnnotation],
		},
	}
	id, err := ro.r.signIns().Identity(ctx, g.Identity, ro.pin.TenantID)
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

func (ro *rotationRun) store() *secretstore.Store {
	return &secretstore.Store{Reader: ro.r.SecretReader, Writer: ro.r.Client, Watch: ro.obj, Target: ro.spec.SecretRef.Name,
		TenantID: ro.pin.TenantID, AppID: ro.pin.AppID}
}
