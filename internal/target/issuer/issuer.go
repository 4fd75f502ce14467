// Package issuer is the serviceAccountIssuer kind of target: what each of the cluster's API
// servers serves of its service-account issuer and signing keys, whether they drift apart, and
// the aftermath of a drift. It has no Azure credential: it is read without an identity, through
// the probe of internal/saissuer.
package issuer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/saissuer"
	"github.com/credwatch/credwatch/internal/target"
)

// Probe reads what each API server serves of the service-account issuer, and has each
// accept or reject a canary token minted through the others.
type Probe interface {
	Probe(ctx context.Context, endpoints []string) (saissuer.Observation, error)
}

// ErrNotChecked is the failure of a check by an operator that runs without the service-account
// issuer's checks.
var ErrNotChecked error = notChecked{}

type notChecked struct{}

func (notChecked) Error() string {
	return "this operator does not check service-account issuers: it runs with --service-account-issuer=false " +
		"(chart: serviceAccountIssuer.enabled=false)"
}

// Reason is ReasonIssuerNotChecked.
func (notChecked) Reason() string { return v1alpha1.ReasonIssuerNotChecked }

// Checked names what a check of the kind reads, for its events and logs.
const Checked = "the service-account issuer"

// Event reasons of a serviceAccountIssuer target besides the drift reasons themselves.
const (
	eventSigningKeysAgree = "SigningKeysAgree"
	eventIssuerChanged    = "IssuerChanged"
)

// defaultTokenLifetime is the lifetime of projected service-account tokens.
const defaultTokenLifetime = time.Hour

// Record records what a check of the API servers found, and whether they drift, telling by
// event when the issuer changes and when drift begins, changes or ends.
func Record(obj *v1alpha1.CredentialWatch, obs saissuer.Observation, events target.Events, now time.Time) {
	lifetime, err := obj.Spec.Target.ServiceAccountIssuer.TokenLifetime.Parse()
	if err != nil || lifetime <= 0 {
		lifetime = defaultTokenLifetime
	}
	prev := obj.Status.ServiceAccountIssuer
	if prev == nil {
		prev = &v1alpha1.ServiceAccountIssuerStatus{}
	}
	a := saissuer.Assess(obs, prev.Keys, lifetime, now)

	st := &v1alpha1.ServiceAccountIssuerStatus{Issuer: a.Issuer, Keys: a.Keys, PreviousIssuer: prev.PreviousIssuer, IssuerChangeTime: prev.IssuerChangeTime}
	if prev.Issuer != "" && a.Issuer != prev.Issuer {
		changed := metav1.NewTime(now)
		st.PreviousIssuer, st.IssuerChangeTime = prev.Issuer, &changed
		events.Eventf(obj, corev1.EventTypeWarning, eventIssuerChanged,
			"The service-account issuer changed from %s to %s: federated identity credentials that trust the old one no longer match", prev.Issuer, a.Issuer)
	}
	for _, e := range obs.Endpoints {
		if len(st.Endpoints) == maxIssuerEndpoints {
			break
		}
		var rejected []string
		for _, other := range slices.Sorted(maps.Keys(e.Rejected)) {
			rejected = append(rejected, fmt.Sprintf("rejected by %s: %s", other, e.Rejected[other]))
		}
		st.Endpoints = append(st.Endpoints, v1alpha1.IssuerEndpoint{Endpoint: e.URL, Issuer: e.Issuer, KeyIDs: e.KeyIDs[:min(len(e.KeyIDs), maxEndpointKeyIDs)],
			SigningKeyID: e.SigningKeyID, Problem: target.OneLine(strings.Join(rejected, "; "))})
	}
	obj.Status.ServiceAccountIssuer = st
	if next := obj.Status.NextCheckTime; !a.Recheck.IsZero() && next != nil && a.Recheck.Before(next.Time) {
		// The drift's aftermath ends then: the condition says so on time, not at the next check.
		recheck := metav1.NewTime(a.Recheck)
		obj.Status.NextCheckTime = &recheck
	}
	target.SetCondition(obj, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked,
		fmt.Sprintf("Read the service-account issuer of %d API servers", len(obs.Endpoints)), now)

	was := target.Condition(obj, v1alpha1.ConditionSigningKeyDrift)
	wasDrifting := was.Status == metav1.ConditionTrue
	if a.Drift == "" {
		target.SetCondition(obj, v1alpha1.ConditionSigningKeyDrift, metav1.ConditionFalse, v1alpha1.ReasonKeysAgree, a.Message, now)
		if wasDrifting {
			events.Event(obj, corev1.EventTypeNormal, eventSigningKeysAgree, a.Message)
		}
		return
	}
	target.SetCondition(obj, v1alpha1.ConditionSigningKeyDrift, metav1.ConditionTrue, a.Drift, a.Message, now)
	if !wasDrifting || was.Reason != a.Drift {
		events.Event(obj, corev1.EventTypeWarning, a.Drift, a.Message)
	}
}

// maxIssuerEndpoints and maxEndpointKeyIDs bound status.serviceAccountIssuer.endpoints and
// their keyIDs, as the CRD does; the drift decision has seen them all.
const (
	maxIssuerEndpoints = 16
	maxEndpointKeyIDs  = 16
)
