// Package pacing keeps, per application, what its rotations did whatever became of the watches
// that ran them: when the last one started, how long a deleted watch's rotation keeps its old
// secrets, and that rotation's unfinished retirement, for the watch created again under its name
// to finish. It lives in a ConfigMap of the operator's namespace, which a watch's author cannot
// write: deleting and creating a watch again, or a second watch of the same application, does not
// start a rotation the record says must wait.
package pacing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// Interval is the least time between the starts of two rotations of one application.
const Interval = 24 * time.Hour

// MaxQuiet bounds how long a deleted watch's rotation holds the application's others: its grace
// period is the watch author's to choose.
const MaxQuiet = 14 * 24 * time.Hour

// label marks the records, for people and for the chart's rights.
const label = "credwatch.dev/pace"

// dataKey holds the record, as JSON, in its ConfigMap.
const dataKey = "record"

// Record is what credwatch remembers of an application's rotations.
type Record struct {
	TenantID string `json:"tenantID"`
	AppID    string `json:"appID"`
	// LastStart is when a rotation of the application last started, by any watch.
	LastStart time.Time `json:"lastStart,omitzero"`
	// LastUID is the watch that started it.
	LastUID string `json:"lastUID,omitempty"`
	// QuietUntil is the end of the grace period of a rotation that a deleted watch let go of
	// after its new secret may have been put in use: none starts before it.
	QuietUntil time.Time `json:"quietUntil,omitzero"`
	// LiftUsed is the value of the lift annotation a rotation started on, spent.
	LiftUsed string `json:"liftUsed,omitempty"`
	// Pending is the retirement a deleted watch left, for the watch of its name to finish.
	Pending *Pending `json:"pending,omitempty"`
	// SecretPrefixes start the names of the secrets the application's rotations created, the
	// latest last, at most maxPrefixes: a tenant scan tells them from secrets someone else added.
	SecretPrefixes []string `json:"secretPrefixes,omitempty"`

	// lift is the annotation's value as read; cm, the ConfigMap read (nil: none yet), whose
	// name is name, in namespace.
	lift, name, namespace string
	cm                    *corev1.ConfigMap
}

// Pending is a rotation let go of at step Retiring: its new secret is in use and its old ones
// wait for the grace period.
type Pending struct {
	Namespace string                  `json:"namespace"`
	Watch     string                  `json:"watch"`
	Status    v1alpha1.RotationStatus `json:"status"`
}

// Name is the ConfigMap that keeps the record of application appID in tenant: Azure's GUIDs are
// not case-sensitive, and the hash keeps the name short.
func Name(tenantID, appID string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(tenantID) + "/" + strings.ToLower(appID)))
	return "credwatch-pace-" + hex.EncodeToString(sum[:])[:16]
}

// Lifted reports whether an admin lifted the pace for one rotation, not spent yet.
func (r Record) Lifted() bool { return r.lift != "" && r.lift != r.LiftUsed }

// Unlifted is the record as if no admin had lifted its pace.
func (r Record) Unlifted() Record {
	r.lift = ""
	return r
}

// Hold says why no rotation of the application starts at now (empty when one may), and when
// one may.
func (r Record) Hold(now time.Time) (why string, until time.Time) {
	if r.Lifted() {
		return "", time.Time{}
	}
	lift := fmt.Sprintf("a cluster admin can let one start now with: kubectl annotate configmap -n %s %s %s=$(date +%%s) --overwrite",
		r.namespace, r.name, v1alpha1.LiftPacingAnnotation)
	if now.Before(r.QuietUntil) {
		return fmt.Sprintf("A rotation is due, but one of application %s that a deleted watch let go of keeps its old secrets until %s: "+
			"no rotation of the application starts before then; %s", r.AppID, r.QuietUntil.UTC().Format(time.RFC3339), lift), r.QuietUntil
	}
	if next := r.LastStart.Add(Interval); now.Before(next) {
		return fmt.Sprintf("A rotation is due, but one of application %s started at %s, and at most one starts a day: the next may at %s; %s",
			r.AppID, r.LastStart.UTC().Format(time.RFC3339), next.UTC().Format(time.RFC3339), lift), next
	}
	return "", time.Time{}
}

// Store reads the records through Reader, which should not be a cache, and writes them through
// Writer, in Namespace, the operator's.
type Store struct {
	Reader    client.Reader
	Writer    client.Writer
	Namespace string
}

// ErrNoNamespace: the operator runs outside a pod and was not told its namespace, where the
// records are kept; rotations do not start without them.
var ErrNoNamespace = errors.New("rotations are paced by records in the operator's namespace, and the operator was not told it: " +
	"run it with --operator-namespace (or POD_NAMESPACE)")

// Read is the record of application appID in tenant; an empty one when there is none.
func (s *Store) Read(ctx context.Context, tenantID, appID string) (Record, error) {
	if s == nil || s.Namespace == "" {
		return Record{}, ErrNoNamespace
	}
	rec := Record{TenantID: tenantID, AppID: appID, name: Name(tenantID, appID), namespace: s.Namespace}
	cm := &corev1.ConfigMap{}
	err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: rec.name}, cm)
	if apierrors.IsNotFound(err) {
		return rec, nil
	}
	if err != nil {
		return Record{}, fmt.Errorf("reading the pacing record of application %s: %w", appID, err)
	}
	if raw := cm.Data[dataKey]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			return Record{}, fmt.Errorf("reading the pacing record %s/%s of application %s: %w", s.Namespace, rec.name, appID, err)
		}
	}
	rec.TenantID, rec.AppID = tenantID, appID
	rec.lift, rec.cm = cm.Annotations[v1alpha1.LiftPacingAnnotation], cm
	return rec, nil
}

// maxPrefixes bounds Record.SecretPrefixes: an application rotated by a few watches over time.
const maxPrefixes = 4

// WithPrefix is rec noting that its application's secrets may be named with prefix.
func (r Record) WithPrefix(prefix string) Record {
	r.SecretPrefixes = slices.DeleteFunc(slices.Clone(r.SecretPrefixes), func(p string) bool { return p == prefix })
	r.SecretPrefixes = append(r.SecretPrefixes, prefix)
	if len(r.SecretPrefixes) > maxPrefixes {
		r.SecretPrefixes = r.SecretPrefixes[len(r.SecretPrefixes)-maxPrefixes:]
	}
	return r
}

// rotationStamp is what follows the prefix in a rotation's secret name (Machine.newSecretName).
var rotationStamp = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z$`)

// OwnSecret reports whether a secret named displayName on application appID of tenantID is one
// a rotation of credwatch's created, by its name: a prefix a rotation recorded, and the time.
func (s *Store) OwnSecret(ctx context.Context, tenantID, appID, displayName string) (bool, error) {
	rec, err := s.Read(ctx, tenantID, appID)
	if err != nil {
		return false, err
	}
	for _, p := range rec.SecretPrefixes {
		if rest, ok := strings.CutPrefix(displayName, p); ok && rotationStamp.MatchString(rest) {
			return true, nil
		}
	}
	return false, nil
}

// Started records that the watch uid started a rotation of the record's application at, and,
// with spend, that it spent the admin's lift.
func (s *Store) Started(ctx context.Context, rec Record, at time.Time, uid string, spend bool) error {
	if spend && rec.Lifted() {
		rec.LiftUsed = rec.lift
	}
	rec.LastStart, rec.LastUID = at.UTC(), uid
	return s.write(ctx, rec)
}

// Released records that a deleted watch let go of a rotation whose new secret may be in use: no
// other starts before quietUntil, and p, if any, is left for the watch of its name to finish.
func (s *Store) Released(ctx context.Context, rec Record, quietUntil time.Time, p *Pending) error {
	rec.QuietUntil, rec.Pending = quietUntil.UTC(), p
	return s.write(ctx, rec)
}

// Adopted records that the watch of the pending retirement's name took it on.
func (s *Store) Adopted(ctx context.Context, rec Record) error {
	rec.Pending = nil
	return s.write(ctx, rec)
}

// write creates or updates the record, on the version read: a conflict means another watch
// started a rotation of the application meanwhile, or an admin lifted its pace, and this one must
// read again. What else people put on the ConfigMap stays.
func (s *Store) write(ctx context.Context, rec Record) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if rec.cm == nil {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: rec.name, Namespace: s.Namespace,
			Labels: map[string]string{label: "true", "app.kubernetes.io/managed-by": "credwatch"}}, Data: map[string]string{dataKey: string(raw)}}
		err = s.Writer.Create(ctx, cm)
	} else {
		cm := rec.cm.DeepCopy()
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[dataKey] = string(raw)
		err = s.Writer.Update(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("writing the pacing record %s/%s of application %s: %w", s.Namespace, rec.name, rec.AppID, err)
	}
	return nil
}
