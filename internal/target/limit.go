package target

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// Lister is the API server, for the CredentialWatches of a namespace.
type Lister interface {
	// List is the namespace's watches, only those labelled so when labels is not empty.
	List(ctx context.Context, namespace string, labels map[string]string) ([]v1alpha1.CredentialWatch, error)
}

// Limit bounds the watches of a kind one namespace runs: the kinds whose every check reads a
// whole tenant or subscription, from budgets every namespace shares.
type Limit struct {
	Max int
	// Kind names the kind, as the spec does; Reason is the Ready reason of a watch beyond the
	// limit, and Fix says what to do.
	Kind, Reason, Fix string
	// Is reports whether a watch is of the kind.
	Is func(*v1alpha1.CredentialWatch) bool
}

// LimitError refuses a watch beyond its namespace's limit.
type LimitError struct{ msg, reason string }

func (e *LimitError) Error() string { return e.msg }

// Reason is the limit's Ready reason.
func (e *LimitError) Reason() string { return e.reason }

// Allows refuses obj when its namespace runs l.Max watches of the kind already, all older than
// it (at the same second, named before it): a new watch never stops an older one.
func (l Limit) Allows(ctx context.Context, watches Lister, obj *v1alpha1.CredentialWatch) error {
	list, err := watches.List(ctx, obj.Namespace, nil)
	if err != nil {
		return fmt.Errorf("listing the namespace's watches: %w", err)
	}
	var older []string
	for i := range list {
		w := &list[i]
		if !l.Is(w) || w.DeletionTimestamp != nil || w.UID == obj.UID {
			continue
		}
		if c := w.CreationTimestamp.Compare(obj.CreationTimestamp.Time); c < 0 || c == 0 && w.Name < obj.Name {
			older = append(older, w.Name)
		}
	}
	if len(older) < l.Max {
		return nil
	}
	slices.Sort(older)
	return &LimitError{reason: l.Reason, msg: fmt.Sprintf("namespace %s runs %d %s watches already (%s), the most a namespace may: this one is not checked; %s",
		obj.Namespace, len(older), l.Kind, strings.Join(older, ", "), l.Fix)}
}
