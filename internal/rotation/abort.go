package rotation

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
)

// Abortable says why the rotation st cannot be withdrawn, nil when it can: once a reset began,
// the cluster may sign in with the new secret, and once the secret is in use its consumers do.
func Abortable(st v1alpha1.RotationStatus) error {
	switch {
	case st.Step == v1alpha1.StepRetiring:
		return fmt.Errorf("the new secret %s is in use already", st.KeyID)
	case st.Resets > 0:
		return fmt.Errorf("a reset of AKS cluster %s began, and the cluster may sign in with the new secret %s", clusterName(st.Cluster), st.KeyID)
	}
	return nil
}

// Abort withdraws the rotation st, which Abortable allows: the new secret is removed from Graph,
// its kept copy deleted, and the rotation ended. why says who asked, for people.
func (m *Machine) Abort(ctx context.Context, st v1alpha1.RotationStatus, why string) (Result, error) {
	m.st, m.savedStep = st, st.Step
	if err := Abortable(st); err != nil {
		return Result{}, err
	}
	if t := st.AddTime; st.KeyID == "" && t != nil && m.Now.Before(t.Add(addListLag)) {
		// A secret whose addPassword answer was lost would be left behind, unlisted yet.
		next, _ := m.wait(policy.Earliest(t.Add(addListLag), m.Now.Add(addListPoll)),
			"Aborting: waiting for Graph to list a secret an earlier attempt may have added, to remove it")
		return m.result(next), nil
	}
	secrets, err := m.App.Secrets(ctx)
	if err != nil {
		next, _ := m.fail(fmt.Errorf("aborting: %w", err), policy.PropagationBackoff(m.st.Failures+1))
		return m.result(next), nil
	}
	var removed []string
	for _, s := range secrets {
		if s.KeyID != st.KeyID && s.DisplayName != st.DisplayName {
			continue
		}
		if err := m.App.Remove(ctx, s.KeyID); err != nil {
			next, _ := m.fail(fmt.Errorf("aborting: %w", err), policy.PropagationBackoff(m.st.Failures+1))
			return m.result(next), nil
		}
		removed = append(removed, s.KeyID)
	}
	if err := m.Store.Discard(ctx); err != nil {
		return Result{}, err
	}
	if err := m.Ledger.Abandon(ctx, why); err != nil {
		return Result{}, err
	}
	m.done = fmt.Sprintf("Aborted the rotation of %s at step %s (%s)", m.Settings.Target, st.Step, why)
	if len(removed) > 0 {
		m.done += fmt.Sprintf("; removed its new secret from Graph (%s) and its staged copy", strings.Join(removed, ", "))
	}
	m.Events.Event(corev1.EventTypeNormal, EventAborted, m.done)
	res := m.result(time.Time{})
	res.Condition.Reason = v1alpha1.ReasonRotationAborted
	return res, nil
}

func clusterName(c *v1alpha1.RotationCluster) string {
	if c == nil {
		return ""
	}
	return c.ResourceGroup + "/" + c.Name
}
