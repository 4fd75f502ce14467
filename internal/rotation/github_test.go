package rotation

import (
	"context"
	"testing"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/githubsecrets"
	"github.com/credwatch/credwatch/internal/secret"
)

// fakeGitHub is GitHub's Actions secrets in memory: each secret's value and last update.
type fakeGitHub struct {
	values  map[githubsecrets.Target]string
	updated map[githubsecrets.Target]time.Time
	puts    int
	tokens  []string
	now     func() time.Time
}

func (f *fakeGitHub) UpdatedAt(_ context.Context, _ string, token secret.Text, t githubsecrets.Target) (time.Time, error) {
	f.tokens = append(f.tokens, token.Reveal())
	return f.updated[t], nil
}

func (f *fakeGitHub) Put(_ context.Context, _ string, _ secret.Text, t githubsecrets.Target, value secret.Text) error {
	f.puts++
	f.values[t], f.updated[t] = value.Reveal(), f.now()
	return nil
}

func (f *fakeGitHub) Readable(context.Context, string, secret.Text, githubsecrets.Target) error {
	return nil
}

var testRepo = v1alpha1.GitHubActionsSink{APIURL: "https://api.github.com/", Owner: "contoso", Repo: "deploy", SecretName: "AZURE_CLIENT_SECRET",
	TokenSecretRef: v1alpha1.SecretKeyRef{Name: "gh", Key: "token"}}

// The new secret is set in the repository once, with the namespace's token, before the grace
// period; a rotation resumed after it recorded the write as begun finds the secret updated since,
// and sets nothing again; one that finds it not updated sets it.
func TestARotationPublishesToGitHubOnce(t *testing.T) {
	w := newWorld(t)
	w.publish = []v1alpha1.PublishSink{{GitHubActions: &testRepo}}
	w.github = &fakeGitHub{values: map[githubsecrets.Target]string{}, updated: map[githubsecrets.Target]time.Time{}, now: func() time.Time { return w.now }}
	st, _ := w.until(nil, false, v1alpha1.StepRetiring, 10)
	target := targetOf(&testRepo)
	if w.github.values[target] != "text-1" || w.github.puts != 1 || len(st.Published) != 1 || st.Published[0].Version == "" || st.RetireTime == nil {
		t.Fatalf("GitHub holds %q after %d puts; status %+v", w.github.values[target], w.github.puts, st)
	}
	if w.github.tokens[0] != "token-of-gh" {
		t.Errorf("the token read: %v", w.github.tokens)
	}

	// Stopped after recording the write as begun: the secret was updated since, so it went through.
	begun := st.DeepCopy()
	begun.Published[0].Version, begun.Published[0].Time, begun.RetireTime = "", st.Published[0].Time, nil
	if st, _ = w.run(begun, false); w.github.puts != 1 || st.RetireTime == nil || st.Published[0].Version == "" {
		t.Errorf("resumed after a write went through: %d puts, status %+v", w.github.puts, st)
	}

	// Stopped before the write went through: the secret is older than the record.
	w.github.updated[target] = begun.Published[0].Time.Add(-time.Hour)
	if st, res := w.run(begun, false); w.github.puts != 2 {
		t.Errorf("resumed before a write went through: %d puts, want the secret set again; %+v %+v", w.github.puts, st, res.Condition)
	}
}
