package target

import (
	"context"
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/ledger"
)

// SendTimeout bounds one delivery, so that a dead SMTP relay delays a watch by seconds, not hours.
const SendTimeout = 15 * time.Second

// MisconfiguredRecheck is how soon channels whose Secrets are broken, or a ledger the watch may
// not use, are looked at again.
const MisconfiguredRecheck = 5 * time.Minute

const eventLedgerRefused = "LedgerRefused"

// Ledger is where a watch keeps what it told whom once that outgrows its status: ConfigMaps it
// owns (internal/ledger).
type Ledger interface {
	Load(ctx context.Context, owner ledger.Owner) (*ledger.Book, error)
	// Write sets each key of changes, or removes it when nil, and returns the keys it wrote; an
	// error means the others were not, because another writer holds the ledger.
	Write(ctx context.Context, b *ledger.Book, changes map[string]*string) ([]string, error)
}

// LedgerOwner is the watch as the owner of its ledger's ConfigMaps.
func LedgerOwner(obj *v1alpha1.CredentialWatch) ledger.Owner {
	return ledger.Owner{Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID, APIVersion: v1alpha1.GroupVersion.String(), Kind: "CredentialWatch"}
}

// LedgerRefused reports a ledger that cannot be used: a ConfigMap of its name the watch does not
// own, or a namespace where the operator may not write ConfigMaps, said in AlertsDelivered and
// once by event, and looked at again in a while; any other failure (the API server's) is
// returned, for the reconcile to be retried.
func LedgerRefused(obj *v1alpha1.CredentialWatch, events Events, err error, now time.Time) (time.Time, error) {
	var foreign *ledger.ForeignError
	var forbidden *ledger.ForbiddenError
	var msg string
	switch {
	case errors.As(err, &foreign):
		msg = foreign.Error()
	case errors.As(err, &forbidden):
		msg = forbidden.Error()
	default:
		return time.Time{}, err
	}
	if c := Condition(obj, v1alpha1.ConditionAlertsDelivered); c.Message != msg {
		events.Event(obj, corev1.EventTypeWarning, eventLedgerRefused, msg)
	}
	SetCondition(obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonDeliveryFailed, msg, now)
	return now.Add(MisconfiguredRecheck), nil
}

// OneLine is s with its runs of white space, line breaks included, made one space: what a
// condition or an event says of an error.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
