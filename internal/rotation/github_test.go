package rotation

import (
	"context"
	"testing"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/githubsecrets"
	"github.com/credwatch/credwatch/internal/secret"
)

// fakeGitHub is GitHub's Actions secrets in memory: each secret's value.
type fakeGitHub struct {
	values map[githubsecrets.Target]string
	puts   int
	tokens []string
}

func (f *fakeGitHub) Put(_ context.Context, _ string, token secret.Text, t githubsecrets.Target, value secret.Text) error {
	f.puts++
	f.tokens = append(f.tokens, token.Reveal())
	f.values[t] = value.Reveal()
	return nil
}

func (f *fakeGitHub) Readable(context.Context, string, secret.Text, githubsecrets.Target) error {
	return nil
}

var testRepo = v1alpha1.GitHubActionsSink{APIURL: "https://api.github.com/", Owner: "contoso", Repo: "deploy", SecretName: "AZURE_CLIENT_SECRET",
	TokenSecretRef: v1alpha1.SecretKeyRef{Name: "gh", Key: "token"}}

// The new secret is set in the repository with the namespace's token before the grace period; a
// rotation resumed after it recorded the write as begun sets it again (GitHub cannot say what a
// secret holds, and the same value twice changes nothing); and it is set once more as the old
// secrets go, without another grace period, so that GitHub holds it then.
func TestARotationPublishesToGitHub(t *testing.T) {
	w := newWorld(t)
	w.publish = []v1alpha1.PublishSink{{GitHubActions: &testRepo}}
	w.github = &fakeGitHub{values: map[githubsecrets.Target]string{}}
	st, _ := w.until(nil, false, v1alpha1.StepRetiring, 10)
	target := targetOf(&testRepo)
	if w.github.values[target] != "text-1" || w.github.puts != 1 || len(st.Published) != 1 || st.Published[0].Version == "" || st.RetireTime == nil {
		t.Fatalf("GitHub holds %q after %d puts; status %+v", w.github.values[target], w.github.puts, st)
	}
	if w.github.tokens[0] != "token-of-gh" {
		t.Errorf("the token used: %v", w.github.tokens)
	}

	begun := st.DeepCopy()
	begun.Published[0].Version, begun.RetireTime = "", nil
	st, _ = w.run(begun, false)
	if w.github.puts != 2 || st.RetireTime == nil || st.Published[0].Version == "" {
		t.Fatalf("resumed after the write was begun: %d puts, status %+v", w.github.puts, st)
	}
	w.github.values[target] = "overwritten"
	if st, _ = w.run(st, false); st != nil || w.github.values[target] != "text-1" || w.github.puts != 3 {
		t.Errorf("at retirement: status %+v, GitHub holds %q after %d puts; want it set again and the rotation completed", st, w.github.values[target], w.github.puts)
	}
}
