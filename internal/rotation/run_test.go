package rotation

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/target"
)

// runWorld is the world of the machine's tests, with the watch and the edges of a Run around it.
type runWorld struct {
	*world
	obj        *v1alpha1.CredentialWatch
	grantErr   error
	ops        []v1alpha1.Operation
	finalizer  []bool
	clientsErr error
}

func newRunWorld(t *testing.T, mode v1alpha1.RotationMode) *runWorld {
	w := newWorld(t)
	checked := metav1.NewTime(w.now.Add(-time.Hour))
	obj := &v1alpha1.CredentialWatch{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "payments", UID: "uid", Generation: 1, Annotations: map[string]string{}},
		Spec: v1alpha1.CredentialWatchSpec{
			Target:   v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{TenantID: "t", ClientID: testApp}},
			Rotation: &v1alpha1.Rotation{Enabled: true, Mode: mode, SecretRef: v1alpha1.SecretName{Name: "payments-sp"}},
		},
		Status: v1alpha1.CredentialWatchStatus{LastCheckTime: &checked,
			Conditions:       []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}},
			ServicePrincipal: &v1alpha1.ServicePrincipalStatus{AppID: testApp, ApplicationObjectID: "a0e1"},
			Credentials: []v1alpha1.Credential{{KeyID: "k-old", Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication,
				EndTime: metav1.NewTime(w.now.Add(5 * 24 * time.Hour))}}},
	}
	return &runWorld{world: w, obj: obj, ops: []v1alpha1.Operation{v1alpha1.OperationRotate}}
}

func (rw *runWorld) edges() Edges {
	m := rw.machine(false)
	return Edges{
		Grant: func(context.Context) (access.Grant, error) {
			return access.Grant{Namespace: access.Namespace{Name: "team-a"}, Identity: access.Identity{Kind: v1alpha1.KindAzureIdentity, Namespace: "team-a", Name: "id",
				Spec: v1alpha1.IdentitySpec{Allow: v1alpha1.IdentityAllow{Tenants: []string{"t"}, Applications: []string{testApp}, Operations: rw.ops}}}}, rw.grantErr
		},
		Clients: func(context.Context, access.Grant, Pin) (Clients, error) {
			return Clients{App: m.App, SignIn: m.SignIn}, rw.clientsErr
		},
		Store: func(string, Pin) Store { return m.Store },
		Ledger: fakeLedger{
			SaveFunc: func(_ context.Context, st v1alpha1.RotationStatus) error {
				rw.saved = append(rw.saved, st)
				rw.obj.Status.Rotation = st.DeepCopy()
				return nil
			},
			FinishFunc:  m.Ledger.Finish,
			AbandonFunc: m.Ledger.Abandon,
		},
		Events:    m.Events,
		Finalizer: func(_ context.Context, add bool) error { rw.finalizer = append(rw.finalizer, add); return nil },
		ClusterID: "cluster",
	}
}

func (rw *runWorld) reconcile() (time.Time, error) {
	run, err := NewRun(rw.obj, rw.now, rw.edges())
	if err != nil {
		rw.t.Fatal(err)
	}
	return run.Reconcile(context.Background())
}

func TestRunStartsADueRotation(t *testing.T) {
	rw := newRunWorld(t, v1alpha1.RotationApply)
	if _, err := rw.reconcile(); err != nil {
		t.Fatal(err)
	}
	if len(rw.finalizer) != 1 || !rw.finalizer[0] || rw.adds != 1 || rw.obj.Status.Rotation == nil {
		t.Fatalf("finalizer %v, %d secrets added, status %+v; want the finalizer added before the secret", rw.finalizer, rw.adds, rw.obj.Status.Rotation)
	}
	if c := target.Condition(rw.obj, v1alpha1.ConditionRotating); c.Status != metav1.ConditionTrue {
		t.Fatalf("Rotating %+v", c)
	}
}

// A dry run says what it would do, by event once, and touches nothing.
func TestRunDryRunPlans(t *testing.T) {
	rw := newRunWorld(t, v1alpha1.RotationDryRun)
	for range 2 {
		if _, err := rw.reconcile(); err != nil {
			t.Fatal(err)
		}
	}
	c := target.Condition(rw.obj, v1alpha1.ConditionRotating)
	if c.Reason != v1alpha1.ReasonDryRun || rw.adds != 0 || len(rw.finalizer) != 0 || len(rw.events) != 1 || !strings.Contains(rw.events[0], "RotationPlanned") {
		t.Fatalf("Rotating %s, %d adds, finalizer %v, events %q; want a plan told once and nothing made", c.Reason, rw.adds, rw.finalizer, rw.events)
	}
}

// An identity that does not allow rotating pauses the rotation before Azure is asked; the API
// server failing is the reconcile's error, not the rotation's.
func TestRunPaused(t *testing.T) {
	rw := newRunWorld(t, v1alpha1.RotationApply)
	rw.ops = nil
	if _, err := rw.reconcile(); err != nil {
		t.Fatal(err)
	}
	c := target.Condition(rw.obj, v1alpha1.ConditionRotating)
	if c.Reason != v1alpha1.ReasonIdentityNotAllowed || rw.adds != 0 || len(rw.events) != 1 {
		t.Fatalf("Rotating %s (%s), %d adds, events %q", c.Reason, c.Message, rw.adds, rw.events)
	}
	rw.grantErr = &target.KubernetesError{Err: errors.New("connection refused")}
	if _, err := rw.reconcile(); err == nil {
		t.Fatal("want the API server's failure returned")
	}
}

// A deleted watch whose rotation added a secret no cluster uses withdraws it, then lets go.
func TestRunFinalize(t *testing.T) {
	rw := newRunWorld(t, v1alpha1.RotationApply)
	if _, err := rw.reconcile(); err != nil {
		t.Fatal(err)
	}
	added := rw.obj.Status.Rotation.KeyID
	run, _ := NewRun(rw.obj, rw.now, rw.edges())
	if _, err := run.Finalize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rw.listed(added) || !rw.abandoned || rw.finalizer[len(rw.finalizer)-1] {
		t.Fatalf("secret %s listed %v, abandoned %v, finalizer %v; want the secret removed and the watch let go", added, rw.listed(added), rw.abandoned, rw.finalizer)
	}
}

// A deleted watch whose identity no longer allows the rotation lets go at once, saying what it
// left.
func TestRunFinalizeNotAllowed(t *testing.T) {
	rw := newRunWorld(t, v1alpha1.RotationApply)
	if _, err := rw.reconcile(); err != nil {
		t.Fatal(err)
	}
	rw.ops, rw.events = nil, nil
	run, _ := NewRun(rw.obj, rw.now, rw.edges())
	if _, err := run.Finalize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rw.obj.Status.Rotation.DeletionSeenTime == nil || rw.finalizer[len(rw.finalizer)-1] || len(rw.events) != 1 ||
		!strings.Contains(rw.events[0], "RotationReleased") || !strings.Contains(rw.events[0], "still in Graph") {
		t.Fatalf("events %q, finalizer %v, status %+v", rw.events, rw.finalizer, rw.obj.Status.Rotation)
	}
}
