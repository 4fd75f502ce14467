package rotation

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/githubsecrets"
	"github.com/credwatch/credwatch/internal/secret"
)

// GitHubSecrets are GitHub's Actions secrets (package githubsecrets).
type GitHubSecrets interface {
	UpdatedAt(ctx context.Context, apiURL string, token secret.Text, t githubsecrets.Target) (time.Time, error)
	Put(ctx context.Context, apiURL string, token secret.Text, t githubsecrets.Target, value secret.Text) error
	Readable(ctx context.Context, apiURL string, token secret.Text, t githubsecrets.Target) error
}

// clockSlack covers the difference between GitHub's clock and the operator's, when a secret's
// last update is compared with when the rotation began writing it.
const clockSlack = time.Minute

func targetOf(gh *v1alpha1.GitHubActionsSink) githubsecrets.Target {
	return githubsecrets.Target{Owner: gh.Owner, Repo: gh.Repo, Environment: gh.Environment, Name: gh.SecretName}
}

// toGitHub sets the Actions secret gh names to the new secret, unless it was set since the write
// was recorded as begun (prev, whose Version is empty while the write is not confirmed). GitHub
// never returns a value: a secret updated after the rotation began writing it holds what the
// rotation wrote, or what someone wrote since, which the rotation does not undo. The write is
// recorded as begun before it is made.
func (m *Machine) toGitHub(ctx context.Context, gh *v1alpha1.GitHubActionsSink, prev *v1alpha1.PublishedSink) (string, bool, error) {
	if m.GitHub == nil || m.Token == nil {
		return "", false, errors.New("no GitHub client: the operator cannot publish to GitHub here")
	}
	token, err := m.Token(ctx, gh.TokenSecretRef)
	if err != nil {
		return "", false, err
	}
	t := targetOf(gh)
	updated, err := m.GitHub.UpdatedAt(ctx, gh.APIURL, token, t)
	if err != nil {
		return "", false, err
	}
	if prev != nil && !updated.IsZero() && !updated.Before(prev.Time.Add(-clockSlack)) {
		return "set at " + updated.UTC().Format(time.RFC3339), false, nil
	}
	if err := m.record(ctx, v1alpha1.PublishedSink{Sink: gh.Name(), Time: metav1.NewTime(m.Now)}); err != nil {
		return "", false, err
	}
	text, err := m.text(ctx)
	if err != nil {
		return "", false, err
	}
	if err := m.GitHub.Put(ctx, gh.APIURL, token, t, text); err != nil {
		return "", false, err
	}
	return "set at " + m.Now.UTC().Format(time.RFC3339), true, nil
}
