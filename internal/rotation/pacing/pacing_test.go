package pacing

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

const (
	tenant = "72F988BF-86F1-41AF-91AB-2D7CD011DB47"
	app    = "1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d"
)

func newStore(t *testing.T) (*Store, client.Client) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := crfake.NewClientBuilder().WithScheme(s).Build()
	return &Store{Reader: c, Writer: c, Namespace: "credwatch"}, c
}

// A start is recorded, and holds the next for a day; an admin's lift lets one more start, once.
func TestAStartHoldsTheNextForADayUnlessLifted(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	rec, err := s.Read(ctx, tenant, app)
	if err != nil {
		t.Fatal(err)
	}
	if why, _ := rec.Hold(now); why != "" {
		t.Fatalf("an application never rotated is held: %s", why)
	}
	if err := s.Started(ctx, rec, now, "uid-1", false); err != nil {
		t.Fatal(err)
	}
	// Another watch of the same application, its GUIDs in lower case, an hour later.
	rec, err = s.Read(ctx, strings.ToLower(tenant), app)
	if err != nil {
		t.Fatal(err)
	}
	why, until := rec.Hold(now.Add(time.Hour))
	if why == "" || !until.Equal(now.Add(Interval)) || !strings.Contains(why, "kubectl annotate configmap -n credwatch "+Name(tenant, app)) {
		t.Fatalf("held %q until %v; want held a day from the start, naming the lift", why, until)
	}

	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "credwatch", Name: Name(tenant, app)}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Annotations = map[string]string{v1alpha1.LiftPacingAnnotation: "1", "note": "kept"}
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	rec, _ = s.Read(ctx, tenant, app)
	if why, _ := rec.Hold(now.Add(time.Hour)); why != "" {
		t.Fatalf("lifted, still held: %s", why)
	}
	if err := s.Started(ctx, rec, now.Add(time.Hour), "uid-2", true); err != nil {
		t.Fatal(err)
	}
	rec, _ = s.Read(ctx, tenant, app)
	if why, _ := rec.Hold(now.Add(2 * time.Hour)); why == "" {
		t.Fatal("a lift let two rotations start")
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "credwatch", Name: Name(tenant, app)}, cm); err != nil || cm.Annotations["note"] != "kept" {
		t.Fatalf("annotations %v (%v): what people put on the record must stay", cm.Annotations, err)
	}
}

// Two watches that read the record before either started: the second start is refused, and
// that watch reads again and is held.
func TestOnlyOneOfTwoRacingStartsIsRecorded(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	for _, exists := range []bool{false, true} {
		if exists {
			now = now.Add(2 * Interval)
		}
		a, _ := s.Read(ctx, tenant, app)
		b, _ := s.Read(ctx, tenant, app)
		if err := s.Started(ctx, a, now, "uid-a", false); err != nil {
			t.Fatal(err)
		}
		err := s.Started(ctx, b, now, "uid-b", false)
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			t.Fatalf("record exists %v: second start: %v; want it refused", exists, err)
		}
	}
}

// A released rotation's grace holds every rotation of the application until it ends, and its
// retirement is kept until the watch of its name takes it on.
func TestAReleaseHoldsUntilItsGraceEnds(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	rec, _ := s.Read(ctx, tenant, app)
	p := &Pending{Namespace: "team-a", Watch: "payments", Status: v1alpha1.RotationStatus{Step: v1alpha1.StepRetiring, KeyID: "k-2"}}
	if err := s.Released(ctx, rec, now.Add(7*24*time.Hour), p); err != nil {
		t.Fatal(err)
	}
	rec, _ = s.Read(ctx, tenant, app)
	if why, until := rec.Hold(now.Add(3 * 24 * time.Hour)); !strings.Contains(why, "keeps its old secrets until") || !until.Equal(now.Add(7*24*time.Hour)) {
		t.Fatalf("held %q until %v", why, until)
	}
	if rec.Pending == nil || rec.Pending.Status.KeyID != "k-2" {
		t.Fatalf("pending %+v", rec.Pending)
	}
	if err := s.Adopted(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if rec, _ = s.Read(ctx, tenant, app); rec.Pending != nil {
		t.Fatal("an adopted retirement is still pending")
	}
	if _, err := (&Store{}).Read(ctx, tenant, app); !errors.Is(err, ErrNoNamespace) {
		t.Fatalf("no namespace: %v", err)
	}
}

// A tenant scan tells the secrets of credwatch's rotations by the prefixes their starts recorded.
func TestOwnSecretsAreKnownByTheirPrefix(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	rec, err := st.Read(ctx, tenant, app)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"credwatch-a-", "credwatch-b-", "credwatch-c-", "credwatch-d-", "credwatch-a-", "credwatch-e-"} {
		rec = rec.WithPrefix(p)
	}
	if err := st.Started(ctx, rec, time.Now(), "uid", false); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"credwatch-e-20261207T090000Z": true,
		"credwatch-a-20261207T090000Z": true, // moved to the end when used again
		"credwatch-b-20261207T090000Z": false,
		"credwatch-e-keep-access":      false,
		"keep-access":                  false,
	} {
		if got, err := st.OwnSecret(ctx, tenant, app, name); err != nil || got != want {
			t.Errorf("OwnSecret(%q) = %t, %v; want %t", name, got, err, want)
		}
	}
}
