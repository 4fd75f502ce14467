package rotation

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/githubsecrets"
	"github.com/credwatch/credwatch/internal/secret"
)

// GitHubSecrets are GitHub's Actions secrets (package githubsecrets).
type GitHubSecrets interface {
	Put(ctx context.Context, apiURL string, token secret.Text, t githubsecrets.Target, value secret.Text) error
	Readable(ctx context.Context, apiURL string, token secret.Text, t githubsecrets.Target) error
}

func targetOf(gh *v1alpha1.GitHubActionsSink) githubsecrets.Target {
	return githubsecrets.Target{Owner: gh.Owner, Repo: gh.Repo, Environment: gh.Environment, Name: gh.SecretName}
}

// toGitHub sets the Actions secret gh names to the new secret. GitHub never returns a value, so
// nothing says what a secret holds: the rotation sets it whenever it is not recorded as set (a
// restart after the write was recorded as begun sets it again, which changes nothing), and once
// more when the sinks are checked before old secrets go (prev recorded: not counted as a new
// write), so that GitHub holds the new secret then, whatever wrote to it meanwhile. The write is
// recorded as begun before it is made.
func (m *Machine) toGitHub(ctx context.Context, gh *v1alpha1.GitHubActionsSink, prev *v1alpha1.PublishedSink) (string, bool, error) {
	token, err := m.token(ctx, gh)
	if err != nil {
		return "", false, err
	}
	confirmed := prev != nil && prev.Version != ""
	if !confirmed {
		if err := m.record(ctx, v1alpha1.PublishedSink{Sink: gh.Name(), Time: metav1.NewTime(m.Now)}); err != nil {
			return "", false, err
		}
	}
	text, err := m.text(ctx)
	if err != nil {
		return "", false, err
	}
	if err := m.GitHub.Put(ctx, gh.APIURL, token, targetOf(gh), text); err != nil {
		return "", false, err
	}
	return "set at " + m.Now.UTC().Format(time.RFC3339), !confirmed, nil
}

// token is the GitHub token of gh, read from the Secret it names: never one of the rotation's
// own Secrets, which hold the client secret, whatever admission let through (it compares with
// the spec's secretRef, not the one the rotation pinned).
func (m *Machine) token(ctx context.Context, gh *v1alpha1.GitHubActionsSink) (secret.Text, error) {
	if m.GitHub == nil || m.Token == nil {
		return secret.Text{}, errors.New("no GitHub client: the operator cannot publish to GitHub here")
	}
	if ref := gh.TokenSecretRef.Name; ref == m.Settings.SecretName || ref == m.Settings.StagingName {
		return secret.Text{}, fmt.Errorf("tokenSecretRef names Secret %s, which holds the rotation's client secret: name a Secret holding only the GitHub token", ref)
	}
	return m.Token(ctx, gh.TokenSecretRef)
}
