package rotation

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/policy"
)

// clusterPollInterval is how often a reset in progress is looked at; resets take minutes.
const clusterPollInterval = 30 * time.Second

// clusterStuckAfter is how long a reset may run before people are told: resets of large
// clusters take long, but hours without an end are worth a look.
const clusterStuckAfter = 3 * time.Hour

// failedResetsBeforeHold is how many reset operations may report failure before the rotation
// stops resetting (each reset restarts the cluster's nodes) and waits for a person.
const failedResetsBeforeHold = 3

// heldRecheck is how often a held rotation looks for its new secret in Graph.
const heldRecheck = time.Hour

// clusterStep runs the step of a rotation that moves its cluster.
func (m *Machine) clusterStep(ctx context.Context) (time.Time, error) {
	if m.Cluster == nil || m.st.Cluster == nil {
		// Without the cluster, retiring the old secret could strand it.
		return m.fail(m.clusterGone(), policy.ClusterBackoff(m.st.Failures+1))
	}
	if m.st.Step == v1alpha1.StepSecretVerified {
		return m.startReset(ctx)
	}
	return m.followReset(ctx)
}

func (m *Machine) clusterGone() error {
	which := "an AKS cluster"
	if c := m.st.Cluster; c != nil {
		which = "AKS cluster " + c.ResourceGroup + "/" + c.Name
	}
	return fmt.Errorf("the rotation began for %s, which the watch no longer names: put spec.target.aksCluster back as it was "+
		"and the rotation resumes; no old secret is retired until then", which)
}

// startReset moves the cluster onto the new secret, in the maintenance window. The step is
// written before the call: an operator stopped in between finds it and does not start a second
// reset blindly, but reads the cluster first.
func (m *Machine) startReset(ctx context.Context) (time.Time, error) {
	if m.st.FailedResets >= failedResetsBeforeHold {
		return m.heldReset(ctx)
	}
	in, opens, err := policy.InWindow(m.Settings.Window, m.Now)
	if err != nil {
		return m.fail(err, policy.ClusterBackoff(m.st.Failures+1))
	}
	if !in {
		return m.wait(opens, "Waiting for the maintenance window, which opens at "+opens.UTC().Format(time.RFC3339))
	}
	c, err := m.Cluster.Read(ctx)
	if err != nil {
		return m.fail(err, clusterPollInterval)
	}
	if c.ClientID != m.st.AppID {
		return m.fail(fmt.Errorf("the AKS cluster no longer signs in with %s; it is left as it is", m.st.AppID), policy.ClusterBackoff(m.st.Failures+1))
	}
	if strings.EqualFold(c.PowerState, "Stopped") {
		return m.fail(errors.New("the AKS cluster is stopped, and a stopped cluster's service principal cannot be reset"), policy.ClusterBackoff(1))
	}
	// Days may have passed since the secret was verified (a window, a backoff): someone may have
	// removed it meanwhile (az ad app credential reset without --append). A cluster moved onto a
	// dead secret loses Azure; it is checked again right before.
	if err := m.usable(ctx); err != nil {
		if errors.Is(err, errSecretGone) {
			m.Events.Event(corev1.EventTypeWarning, EventSecretVanished,
				"The new secret "+m.st.KeyID+" is no longer in Graph; a new one is added before the cluster is moved")
			return time.Time{}, m.startOver(ctx, "The new secret disappeared from Graph before the cluster was moved onto it; adding another")
		}
		return m.fail(err, policy.PropagationBackoff(m.st.Failures+1))
	}
	m.st.Step, m.st.ResumeToken, m.st.Message = v1alpha1.StepClusterUpdating, "", "Resetting the AKS cluster's service principal: its nodes restart"
	m.st.Resets, m.st.NextAttemptTime = m.st.Resets+1, nil
	if err := m.save(ctx); err != nil {
		return time.Time{}, err
	}
	return m.reset(ctx)
}

func (m *Machine) reset(ctx context.Context) (time.Time, error) {
	text, err := m.text(ctx)
	if err != nil {
		return m.fail(err, clusterPollInterval)
	}
	op, done, err := m.Cluster.StartReset(ctx, m.st.AppID, text)
	// Resource Manager names the operations it runs; one it answered at once is named here, after
	// the new secret too, so that no value can be set ahead for a hold to come.
	m.st.ResetOperation = op.ID
	if op.ID == "" {
		m.st.ResetOperation = "reset-" + strconv.Itoa(int(m.st.Resets)) + "-of-" + m.st.KeyID
	}
	if err != nil {
		// A request refused (a conflict, a missing permission) changed nothing; any other failure
		// may have applied part of the change, and counts as an operation that failed.
		return m.clusterFailed(ctx, err, !refused(err))
	}
	if done {
		return m.readBack(ctx, nil)
	}
	m.st.ResumeToken = op.Token
	if err := m.save(ctx); err != nil {
		return time.Time{}, err
	}
	return m.Now.Add(clusterPollInterval), nil
}

// refused reports whether Resource Manager refused a request outright, with a 4xx.
func refused(err error) bool {
	var ae *azerr.Error
	return errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500
}

// followReset polls the reset operation and, once it ends either way, reads the cluster back.
func (m *Machine) followReset(ctx context.Context) (time.Time, error) {
	if m.st.ResumeToken == "" {
		// The operator stopped after writing this step but before it kept the operation's token,
		// maybe before the reset began. A reset under way shows as a cluster not yet settled;
		// otherwise the reset is made again, through the window and the cluster's checks.
		c, err := m.Cluster.Read(ctx)
		if err != nil {
			return m.fail(err, clusterPollInterval)
		}
		if !terminalProvisioningState(c.ProvisioningState) {
			return m.waitForCluster(c)
		}
		m.st.Step, m.st.Message = v1alpha1.StepSecretVerified, "Resetting the AKS cluster again: the first reset's outcome is not known"
		return time.Time{}, m.save(ctx)
	}
	done, err := m.Cluster.PollReset(ctx, m.st.ResumeToken)
	if err == nil && !done {
		return m.waitForCluster(ClusterState{ProvisioningState: "Updating"})
	}
	return m.readBack(ctx, err)
}

// waitForCluster waits for a reset under way, and counts it as a failure, which alerts, once it
// has gone on longer than clusterStuckAfter.
func (m *Machine) waitForCluster(c ClusterState) (time.Time, error) {
	msg := "The AKS cluster is " + c.ProvisioningState + "; waiting for it to finish"
	if t := m.st.StepTime; t != nil && m.Now.Sub(t.Time) > clusterStuckAfter {
		msg = fmt.Sprintf("The AKS cluster has been %s for %s since the reset began; it may need a look", c.ProvisioningState, policy.HumanDuration(m.Now.Sub(t.Time)))
		if m.st.Failures == 0 {
			m.st.Failures = 1
			m.Events.Event(corev1.EventTypeWarning, EventClusterFailed, msg)
		}
	}
	return m.wait(m.Now.Add(clusterPollInterval), msg)
}

// readBack decides from the operation and the cluster whether the reset took. Only an operation
// that itself succeeded, on a cluster that reads Succeeded with the application, lets the old
// secret go: resets have reported failure after applying part of the change, so a cluster that
// reads Succeeded after a failed operation may still have nodes on the old secret. It is reset
// again; each reset sets the whole profile, so one that succeeds accounts for those before it.
func (m *Machine) readBack(ctx context.Context, opErr error) (time.Time, error) {
	c, err := m.Cluster.Read(ctx)
	if err != nil {
		return m.fail(err, clusterPollInterval)
	}
	applied := c.ProvisioningState == "Succeeded" && c.ClientID == m.st.AppID
	switch {
	case !terminalProvisioningState(c.ProvisioningState):
		return m.waitForCluster(c)
	case applied && opErr == nil:
		m.st.ResumeToken = ""
		m.inUse()
		return time.Time{}, m.moveOn(ctx)
	case applied:
		m.st.FailedResets++
		m.Events.Event(corev1.EventTypeWarning, EventClusterFailed, fmt.Sprintf(
			"Reset %s of AKS cluster %s reported a failure (%v) though the cluster reads Succeeded; the old secret stays until a reset succeeds",
			m.st.ResetOperation, m.clusterName(), opErr))
		if m.st.FailedResets >= failedResetsBeforeHold {
			return m.hold(ctx)
		}
		m.st.Step, m.st.ResumeToken = v1alpha1.StepSecretVerified, ""
		m.st.Message = fmt.Sprintf("Reset %s reported a failure (%v) though the cluster is Succeeded; resetting again, as it may have applied only part of the change", m.st.ResetOperation, opErr)
		return time.Time{}, m.save(ctx)
	default:
		if opErr == nil {
			opErr = fmt.Errorf("the AKS cluster is %s after the reset", c.ProvisioningState)
		}
		return m.clusterFailed(ctx, opErr, true)
	}
}

// clusterFailed records a reset that failed, with the command that recovers the cluster by hand,
// and retries as cert-manager retries issuance: 1h, 2h, ... 24h. An operation that failed counts
// towards the hold.
func (m *Machine) clusterFailed(ctx context.Context, err error, operationFailed bool) (time.Time, error) {
	if operationFailed {
		m.st.FailedResets++
	}
	if m.st.Failures == 0 || operationFailed {
		m.Events.Event(corev1.EventTypeWarning, EventClusterFailed, fmt.Sprintf(
			"Moving AKS cluster %s onto the new secret failed: %v; credwatch retries with backoff, or recover by hand with: %s", m.clusterName(), err, m.recovery()))
	}
	m.st.Step, m.st.ResumeToken = v1alpha1.StepSecretVerified, ""
	if operationFailed && m.st.FailedResets >= failedResetsBeforeHold {
		return m.hold(ctx)
	}
	next, ferr := m.fail(err, policy.ClusterBackoff(m.st.Failures+1))
	m.st.Message += "; recover by hand with: " + m.recovery()
	return next, ferr
}

// hold stops resetting: resets reported failure too often for another to be likely to help, and
// each restarts the cluster's nodes. The old secret stays until a person confirms.
func (m *Machine) hold(ctx context.Context) (time.Time, error) {
	m.st.Step, m.st.ResumeToken, m.st.NextAttemptTime = v1alpha1.StepSecretVerified, "", nil
	m.Events.Event(corev1.EventTypeWarning, EventResetHeld, m.holdMessage())
	return m.heldReset(ctx)
}

func (m *Machine) holdMessage() string {
	confirm := fmt.Sprintf("kubectl annotate credentialwatch -n %s %s %s=%s --overwrite",
		m.Settings.SecretNamespace, m.Settings.Watch, v1alpha1.ConfirmResetAnnotation, m.confirmation())
	if m.st.ResetOperation == "" {
		return fmt.Sprintf("%d resets of AKS cluster %s reported failure, and the secret they moved it onto is gone from Graph, so credwatch added secret %s "+
			"and does not reset the cluster again; the old secret stays. Move the cluster onto the new secret by hand with: %s; then confirm with: %s",
			m.st.FailedResets, m.clusterName(), m.st.KeyID, m.recovery(), confirm)
	}
	return fmt.Sprintf("%d resets of AKS cluster %s reported failure (the last, operation %s), so credwatch stops resetting it and keeps the old secret. "+
		"Check the cluster's nodes, or move it onto the new secret by hand with: %s; then confirm with: %s",
		m.st.FailedResets, m.clusterName(), m.st.ResetOperation, m.recovery(), confirm)
}

// confirmation is what a person writes to say the cluster runs on the new secret: the last reset
// operation, or the new secret's key ID when no reset moved the cluster onto it (one that
// replaced a secret gone during a hold), so a confirmation given for another secret never counts.
func (m *Machine) confirmation() string {
	if m.st.ResetOperation == "" {
		return m.st.KeyID
	}
	return m.st.ResetOperation
}

// heldReset waits, until the watch changes, for the confirmation of the last reset operation;
// confirmed, the new secret still in Graph and signing in, and the cluster reading Succeeded with
// the application, the old secrets retire.
func (m *Machine) heldReset(ctx context.Context) (time.Time, error) {
	m.held = true
	m.st.Message = m.holdMessage()
	if m.Settings.ConfirmReset == "" || m.Settings.ConfirmReset != m.confirmation() {
		// The message asks for the cluster to be moved onto the new secret by hand: while it
		// waits, the secret is looked for hourly, and one removed meanwhile replaced, so that
		// nobody moves the cluster onto a secret that is gone.
		if m.gone(ctx) {
			m.held = false
			m.Events.Event(corev1.EventTypeWarning, EventSecretVanished,
				"The new secret "+m.st.KeyID+" is no longer in Graph while the rotation waits for confirmation; a new one is added and the old secret stays")
			return time.Time{}, m.startOver(ctx, "The new secret disappeared from Graph while the rotation waited for confirmation; adding another")
		}
		return m.Now.Add(heldRecheck), nil
	}
	c, err := m.Cluster.Read(ctx)
	if err != nil {
		return m.fail(err, clusterPollInterval)
	}
	if c.ProvisioningState != "Succeeded" || c.ClientID != m.st.AppID {
		m.st.Message = fmt.Sprintf("Reset %s was confirmed, but AKS cluster %s is %s and signs in with %q, not %s: the old secret stays until it reads Succeeded with the application",
			m.confirmation(), m.clusterName(), c.ProvisioningState, c.ClientID, m.st.AppID)
		return m.Now.Add(policy.ClusterBackoff(1)), nil
	}
	// A confirmation may come days after the hold: the new secret may have been removed since,
	// and retiring the old one then would leave the cluster with neither.
	m.held = false
	if err := m.usable(ctx); err != nil {
		if errors.Is(err, errSecretGone) {
			m.Events.Event(corev1.EventTypeWarning, EventSecretVanished,
				"The new secret "+m.st.KeyID+" is no longer in Graph, though its reset was confirmed; a new one is added and the old secret stays")
			return time.Time{}, m.startOver(ctx, "The new secret disappeared from Graph before the confirmed reset let the old one go; adding another")
		}
		return m.fail(err, policy.PropagationBackoff(m.st.Failures+1))
	}
	m.Events.Event(corev1.EventTypeNormal, EventResetConfirmed, fmt.Sprintf("Reset %s of AKS cluster %s was confirmed; the old secrets go after the grace period",
		m.confirmation(), m.clusterName()))
	m.inUse()
	return time.Time{}, m.moveOn(ctx)
}

func (m *Machine) clusterName() string { return clusterName(m.st.Cluster) }

// recovery is the command that moves the cluster onto the new secret by hand.
func (m *Machine) recovery() string {
	c := m.st.Cluster
	return fmt.Sprintf("az aks update-credentials --subscription %s -g %s -n %s --reset-service-principal --service-principal %s --client-secret \"$(kubectl get secret -n %s %s -o jsonpath='{.data.clientSecret}' | base64 -d)\"",
		c.SubscriptionID, c.ResourceGroup, c.Name, m.st.AppID, m.Settings.SecretNamespace, m.Settings.StagingName)
}

func terminalProvisioningState(s string) bool {
	return s == "Succeeded" || s == "Failed" || s == "Canceled"
}

// ClusterRef names the cluster c a rotation pinned.
func ClusterRef(c *v1alpha1.RotationCluster) aks.ClusterRef {
	return aks.ClusterRef{SubscriptionID: c.SubscriptionID, ResourceGroup: c.ResourceGroup, Name: c.Name}
}
