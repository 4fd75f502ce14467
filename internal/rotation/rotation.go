package rotation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/secret"
)

// Secret is one of the application's client secrets, as Graph lists it.
type Secret struct {
	KeyID, DisplayName string
	// Hint is Graph's: the secret's first three characters.
	Hint string
	End  time.Time
}

// NewSecret is a client secret just added: the one moment its text is known.
type NewSecret struct {
	KeyID string
	Text  secret.Text
	End   time.Time
}

// Application is the client secrets of the application being rotated, in its tenant.
type Application interface {
	// Secrets lists the application's client secrets (not its certificates, nor its service
	// principal's).
	Secrets(ctx context.Context) ([]Secret, error)
	Add(ctx context.Context, displayName string, end time.Time) (NewSecret, error)
	Remove(ctx context.Context, keyID string) error
}

// ClusterState is what the reset steps need to know of an AKS cluster.
type ClusterState struct {
	// ClientID is the appId the cluster signs in with.
	ClientID          string
	ProvisioningState string
	PowerState        string
}

// Operation is a reset Resource Manager started and did not finish at once.
type Operation struct {
	// Token follows the operation across restarts; ID names it to people.
	Token, ID string
}

// Cluster is the AKS cluster the rotation moves onto the new secret.
type Cluster interface {
	Read(ctx context.Context) (ClusterState, error)
	// StartReset begins moving the cluster onto the application's secret text; done when
	// Resource Manager finished at once.
	StartReset(ctx context.Context, clientID string, text secret.Text) (op Operation, done bool, err error)
	// PollReset asks once how the operation behind token is doing: done when it ended well.
	PollReset(ctx context.Context, token string) (done bool, err error)
}

// Held is what the Secret keeping the new secret says it holds.
type Held struct {
	KeyID, DisplayName string
	End                time.Time
}

// Store keeps the new secret's text in Kubernetes: it exists nowhere else.
type Store interface {
	// Held reads what is kept for the application: zero when nothing is, an error that wraps
	// ErrForeign when the Secret is someone else's.
	Held(ctx context.Context) (Held, error)
	// Write keeps s, named displayName in Graph; with dryRun only the API server's consent is asked.
	Write(ctx context.Context, displayName string, s NewSecret, dryRun bool) error
	// Text reads back the text of secret keyID.
	Text(ctx context.Context, keyID string) (secret.Text, error)
	// Publish hands secret keyID, in use now, to the watch's consumers, if the text kept has the
	// digest (unless empty): another text is refused with ErrSecretChanged.
	Publish(ctx context.Context, keyID, digest string) error
	// Discard deletes what was kept of a secret never used.
	Discard(ctx context.Context) error
}

// ErrForeign: the Secret the new secret goes to exists and credwatch did not create it for
// this watch.
var ErrForeign = errors.New("the Secret is not this watch's")

// ErrSecretChanged: the Secret keeping the new secret holds another text than the one made.
var ErrSecretChanged = errors.New("the new secret's Secret was changed")

// Ledger saves the rotation's progress with an optimistic lock: a conflict means another
// reconcile acted since this one read the watch, and this one must stop.
type Ledger interface {
	Save(ctx context.Context, st v1alpha1.RotationStatus) error
	// Finish ends the rotation, recording done.
	Finish(ctx context.Context, done v1alpha1.LastRotation) error
	// Abandon ends the rotation without completing it; why says who asked.
	Abandon(ctx context.Context, why string) error
}

// Events tells people of the rotation's transitions.
type Events interface {
	Event(eventtype, reason, message string)
}

// Event reasons.
const (
	EventStarted        = "RotationStarted"
	EventOrphanRemoved  = "RotationOrphanRemoved"
	EventClusterFailed  = "RotationClusterFailed"
	EventStepFailed     = "RotationStepFailed"
	EventSecretVanished = "RotationSecretVanished"
	EventResetHeld      = "RotationResetHeld"
	EventResetConfirmed = "RotationResetConfirmed"
	EventRotated        = "Rotated"
	EventAborted        = "RotationAborted"
	EventOldSecretInUse = "RotationOldSecretInUse"
	EventNewSecretUsed  = "NewSecretSignedIn"
)

// Settings are what the watch's spec says of its rotations, and where its secrets live.
type Settings struct {
	Validity, GracePeriod time.Duration
	Window                *v1alpha1.MaintenanceWindow
	RemoveOld             v1alpha1.RemoveOldPolicy
	// Prefix starts the display name of every secret this watch's rotations create; a secret whose
	// name starts with one of Prefixes is the watch's too (made under an earlier naming).
	Prefix   string
	Prefixes []string
	// Target names what is rotated, for people: "application payments (1b2c...)".
	Target string
	// Watch names the watch, for the commands people are told to run.
	Watch string
	// SecretNamespace is the watch's namespace; SecretName the Secret that gets the new secret
	// once it is in use, StagingName the one that keeps it until then.
	SecretNamespace, SecretName, StagingName string
	// ConfirmReset is the value of the credwatch.dev/confirm-reset annotation, if any.
	ConfirmReset string
	// SignIns is what the watch knows of its secrets' use (spec.usage.signIns), which old
	// secrets wait on besides the grace period; nil when it reads none, or cannot here.
	SignIns *SignIns
	// Publish are the sinks each new secret goes to besides the Secret (spec.rotation.publish).
	Publish []v1alpha1.PublishSink
}

// Pin is what a rotation is about, fixed when it starts.
type Pin struct {
	TenantID, AppID, ApplicationObjectID string
	// Cluster is the AKS cluster moved onto the new secret; nil for a service principal.
	Cluster *v1alpha1.RotationCluster
	// Identity is the identity the rotation acts with; nil: none (the watch names none, and the
	// operator has no default).
	Identity *v1alpha1.IdentityRef
}

// Machine moves one watch's rotation on. It is made for one reconcile.
type Machine struct {
	App Application
	// Cluster is the pinned cluster; nil when the rotation has none.
	Cluster Cluster
	Store   Store
	// SignIn reports whether Entra accepts the application's secret text now, signing in afresh.
	SignIn func(ctx context.Context, text secret.Text) error
	// Vaults are the Key Vaults as the identity that writes a Key Vault sink signs in to them:
	// the sink's identityRef, or the rotation's identity; nil when it publishes to none.
	Vaults func(ctx context.Context, kv *v1alpha1.KeyVaultSink) (KeyVaults, error)
	// GitHub sets Actions secrets, with a token Token reads from a Secret of the watch's
	// namespace; nil when the operator publishes to no GitHub.
	GitHub   GitHubSecrets
	Token    func(ctx context.Context, ref v1alpha1.SecretKeyRef) (secret.Text, error)
	Ledger   Ledger
	Events   Events
	Settings Settings
	Now      time.Time

	st v1alpha1.RotationStatus
	// savedStep is the step last saved, or kept for the deferred write.
	savedStep v1alpha1.RotationStep
	// stuck: the last failure was one retrying does not mend.
	stuck bool
	// held: the rotation waits for a person to confirm a reset.
	held bool
	// oldInUse: an old secret signed in for longer than the retire wait after the move.
	oldInUse bool
	// done says what the completed rotation did; empty while it goes on.
	done string
}

// Result is where the rotation got to.
type Result struct {
	// Status is the rotation in progress, nil once it completed.
	Status *v1alpha1.RotationStatus
	// Next is when there is something to do again; zero for nothing until the watch changes.
	Next time.Time
	// Condition is what the Rotating condition says.
	Condition Condition
}

// Condition is the Rotating condition.
type Condition struct {
	Status          metav1.ConditionStatus
	Reason, Message string
}

// Asked is what the watch's annotations ask when a rotation starts: the rotation it answers, and
// the abort value it does not (one set before it started).
type Asked struct{ Rotate, Abort string }

// Start begins a rotation of what pin names and moves it on as far as it goes.
func (m *Machine) Start(ctx context.Context, pin Pin, asked Asked) (Result, error) {
	m.st = v1alpha1.RotationStatus{
		Step:                v1alpha1.StepStarted,
		DisplayName:         m.newSecretName(),
		TenantID:            pin.TenantID,
		AppID:               pin.AppID,
		ApplicationObjectID: pin.ApplicationObjectID,
		Cluster:             pin.Cluster.DeepCopy(),
		Identity:            pin.Identity.DeepCopy(),
		StartTime:           metav1.NewTime(m.Now),
		Request:             asked.Rotate,
		AbortRequest:        asked.Abort,
		SecretName:          m.Settings.SecretName,
		Message:             "Adding a new secret to the application",
	}
	if err := m.save(ctx); err != nil {
		return Result{}, err
	}
	m.Events.Event(corev1.EventTypeNormal, EventStarted, fmt.Sprintf("Rotating the client secret of %s: the new one is %q", m.Settings.Target, m.st.DisplayName))
	return m.advance(ctx)
}

// Advance moves the rotation in progress st on by as many steps as it can.
func (m *Machine) Advance(ctx context.Context, st v1alpha1.RotationStatus) (Result, error) {
	m.st, m.savedStep = st, st.Step
	return m.advance(ctx)
}

// Unreachable records that the step of st could not be tried: its identity could not sign in,
// or a client could not be made.
func (m *Machine) Unreachable(st v1alpha1.RotationStatus, err error) Result {
	m.st, m.savedStep = st, st.Step
	next, _ := m.fail(err, policy.PropagationBackoff(m.st.Failures+1))
	return m.result(next)
}

func (m *Machine) newSecretName() string {
	return m.Settings.Prefix + m.Now.UTC().Format("20060102T150405Z")
}

func (m *Machine) advance(ctx context.Context) (Result, error) {
	if s := m.Settings.SignIns; s != nil && s.Unavailable == "" {
		// Pinned from the first step that could read them: see quiet.
		m.st.SignInsGated = true
	}
	for {
		var next time.Time
		var err error
		switch m.st.Step {
		case v1alpha1.StepStarted:
			next, err = m.create(ctx)
		case v1alpha1.StepSecretStored:
			next, err = m.verify(ctx)
		case v1alpha1.StepSecretVerified, v1alpha1.StepClusterUpdating:
			next, err = m.clusterStep(ctx)
		case v1alpha1.StepRetiring:
			next, err = m.retire(ctx)
		default:
			return Result{}, fmt.Errorf("unknown rotation step %q", m.st.Step)
		}
		if err != nil {
			return Result{}, err
		}
		if !next.IsZero() || m.done != "" || m.held {
			return m.result(next), nil
		}
	}
}

func (m *Machine) result(next time.Time) Result {
	if m.done != "" {
		return Result{Next: next, Condition: Condition{metav1.ConditionFalse, v1alpha1.ReasonIdle, m.done}}
	}
	st := m.st
	res := Result{Status: &st, Next: next}
	switch {
	case m.held:
		res.Condition = Condition{metav1.ConditionFalse, v1alpha1.ReasonResetNeedsConfirmation, st.Message}
	case m.oldInUse:
		res.Condition = Condition{metav1.ConditionFalse, v1alpha1.ReasonRotationOldSecretInUse, st.Message}
	case m.stuck:
		res.Condition = Condition{metav1.ConditionFalse, v1alpha1.ReasonRotationBlocked,
			fmt.Sprintf("The rotation is blocked at step %s until this is fixed (tried again at %s): %s", st.Step, st.NextAttemptTime.UTC().Format(time.RFC3339), st.Message)}
	default:
		res.Condition = Condition{metav1.ConditionTrue, string(st.Step), st.Message}
	}
	return res
}

// moveOn records that the step moved on: failures reset, written before anything else is done.
func (m *Machine) moveOn(ctx context.Context) error {
	m.st.Failures, m.st.NextAttemptTime = 0, nil
	return m.save(ctx)
}

// save writes the step now.
func (m *Machine) save(ctx context.Context) error {
	if m.savedStep != m.st.Step || m.st.StepTime == nil {
		t := metav1.NewTime(m.Now)
		m.st.StepTime = &t
	}
	if err := m.Ledger.Save(ctx, *m.st.DeepCopy()); err != nil {
		return fmt.Errorf("recording rotation step %s: %w", m.st.Step, err)
	}
	m.savedStep = m.st.Step
	return nil
}

// wait leaves the step as it is until at, saying why.
func (m *Machine) wait(at time.Time, why string) (time.Time, error) {
	m.st.Message = why
	t := metav1.NewTime(at)
	m.st.NextAttemptTime = &t
	return at, nil
}

// fail records a failed attempt at the current step and when it is tried again. The failure is
// the step's, shown in status, not the reconcile's.
func (m *Machine) fail(err error, wait time.Duration) (time.Time, error) {
	m.st.Failures++
	// Azure's Retry-After is a floor; a refusal retrying cannot mend waits as long as a cluster
	// does, and says it is blocked, rather than trying every few minutes.
	wait = max(wait, azerr.RetryAfterOf(err))
	if Permanent(err) {
		wait = max(wait, policy.ClusterBackoff(m.st.Failures))
		m.stuck = true
	}
	at, _ := m.wait(m.Now.Add(wait), oneLine(err.Error()))
	if m.st.Failures == 1 {
		m.Events.Event(corev1.EventTypeWarning, EventStepFailed, fmt.Sprintf("Rotation step %s failed, retrying at %s: %v",
			m.st.Step, at.UTC().Format(time.RFC3339), err))
	}
	return at, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
