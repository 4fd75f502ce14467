// Package deltastore keeps each identity's log of Graph's changes (graph/delta) in a ConfigMap
// of the operator's namespace, which no watch's author can write: a restarted operator, or a
// new leader, goes on from it, and a link in it is followed only to the configured Graph (the
// reader refuses any other). It tells of a lost state in an event on that ConfigMap, and of a
// change the rounds missed in the log, each counted in a metric.
package deltastore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// label marks the ConfigMaps, for people and for the chart's rights.
	label = "credwatch.dev/delta"
	// stateKey holds the log; scopeKey who it is of (client/tenant, no secret).
	stateKey = "state"
	scopeKey = "scope"
	// EventResynced is the reason of the event telling that a log starts again.
	EventResynced = "DeltaResynced"
)

// Events records events; controller-runtime's recorder is one.
type Events interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Counters count what the rounds found.
type Counters interface {
	Resynced()
	Missed()
}

// Store keeps the logs in Namespace, reading through Reader (not a cache: the operator caches
// no ConfigMaps) and writing through Writer.
type Store struct {
	Reader    client.Reader
	Writer    client.Writer
	Namespace string
	Events    Events
	Counters  Counters
	Log       logr.Logger
}

// Name is the ConfigMap of scope's log.
func Name(scope string) string {
	sum := sha256.Sum256([]byte(scope))
	return "credwatch-delta-" + hex.EncodeToString(sum[:])[:16]
}

// Load is the log kept for scope, nil when there is none.
func (s *Store) Load(ctx context.Context, scope string) ([]byte, error) {
	cm := &corev1.ConfigMap{}
	err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: Name(scope)}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the delta state of %s: %w", scope, err)
	case cm.Data[scopeKey] != scope:
		return nil, nil // another scope's, by a hash collision: start afresh
	}
	return []byte(cm.Data[stateKey]), nil
}

// Save keeps state as scope's log. A failure is logged: the round it follows is good, and a
// restart reads the watches again.
func (s *Store) Save(ctx context.Context, scope string, state []byte) {
	if err := s.save(ctx, scope, state); err != nil {
		s.Log.Error(err, "Keeping the delta state failed; after a restart the watches are read again", "configMap", s.Namespace+"/"+Name(scope))
	}
}

func (s *Store) save(ctx context.Context, scope string, state []byte) error {
	cm := &corev1.ConfigMap{}
	err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: Name(scope)}, cm)
	data := map[string]string{scopeKey: scope, stateKey: string(state)}
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: Name(scope), Namespace: s.Namespace,
			Labels: map[string]string{label: "true", "app.kubernetes.io/managed-by": "credwatch"}}, Data: data}
		return s.Writer.Create(ctx, cm)
	}
	if err != nil {
		return err
	}
	cm.Data = data
	return s.Writer.Update(ctx, cm)
}

// Resynced tells that scope's log starts again, and why, in an event on its ConfigMap.
func (s *Store) Resynced(scope string, why error) {
	s.Counters.Resynced()
	s.Log.Info("Reading Graph's changes starts again: the watches of this identity are read, and its tenant scans list the tenant, once more", "scope", scope, "why", why.Error())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: Name(scope), Namespace: s.Namespace}}
	if err := s.Reader.Get(context.Background(), client.ObjectKeyFromObject(cm), cm); err != nil && !apierrors.IsNotFound(err) {
		s.Log.Error(err, "Reading the delta state's ConfigMap for an event")
	}
	s.Events.Eventf(cm, corev1.EventTypeWarning, EventResynced,
		"Reading Graph's changes as %s starts again: its watches are read, and its tenant scans list the tenant, once more: %v", scope, why)
}

// Missed tells of a read of appID that found what no round reported: a delta that missed a
// change is a bug to know about. what names key IDs and end times, never a secret.
func (s *Store) Missed(scope, appID, what string) {
	s.Counters.Missed()
	s.Log.Info("A read found a change Graph's delta rounds did not report", "scope", scope, "appID", appID, "difference", what)
}
