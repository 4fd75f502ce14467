package rotation

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/githubsecrets"
	"github.com/credwatch/credwatch/internal/secret"
	"github.com/credwatch/credwatch/internal/target"
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

// A token Secret that is one of the rotation's own, which hold the client secret, is never read:
// admission compares with the spec's secretRef, and the rotation may have pinned another.
func TestAGitHubTokenIsNeverTheRotationsOwnSecret(t *testing.T) {
	for _, name := range []string{"payments-sp", "credwatch-rotation-payments"} {
		w := newWorld(t)
		sink := testRepo
		sink.TokenSecretRef.Name = name
		w.publish = []v1alpha1.PublishSink{{GitHubActions: &sink}}
		w.github = &fakeGitHub{values: map[githubsecrets.Target]string{}}
		st, res := w.until(nil, false, v1alpha1.StepRetiring, 10)
		if w.github.puts != 0 || st.RetireTime != nil || !strings.Contains(res.Condition.Message, "tokenSecretRef names Secret "+name+", which holds the rotation's client secret") {
			t.Errorf("token in %s: %d puts, condition %q; want nothing sent, and the reason", name, w.github.puts, res.Condition.Message)
		}
	}
}

// A GitHub sink is a place the client secret goes, and the identity's admin chooses it: the
// rotation's identity must allow PublishGitHub and list the repository, or the rotation pauses
// before anything is made or sent.
func TestAGitHubSinkNeedsTheIdentitysGrant(t *testing.T) {
	publish := []v1alpha1.Operation{v1alpha1.OperationRotate, v1alpha1.OperationPublishGitHub}
	for _, tc := range []struct {
		name  string
		ops   []v1alpha1.Operation
		repos []string
		want  string
	}{
		{"no PublishGitHub", []v1alpha1.Operation{v1alpha1.OperationRotate}, []string{"https://github.com/contoso/deploy"}, "allow.operations does not list PublishGitHub"},
		{"another repository", publish, []string{"https://github.com/contoso/other"}, "allow.githubRepositories does not list https://github.com/contoso/deploy"},
		{"the repository", publish, []string{"https://github.com/contoso/deploy"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rw := newRunWorld(t, v1alpha1.RotationApply)
			rw.ops, rw.repos = tc.ops, tc.repos
			rw.obj.Spec.Rotation.Publish = []v1alpha1.PublishSink{{GitHubActions: &testRepo}}
			if _, err := rw.reconcile(); err != nil {
				t.Fatal(err)
			}
			c := target.Condition(rw.obj, v1alpha1.ConditionRotating)
			if tc.want == "" {
				if c.Status != metav1.ConditionTrue || rw.adds != 1 {
					t.Fatalf("Rotating %s %q, %d adds; want the rotation started", c.Status, c.Message, rw.adds)
				}
				return
			}
			if c.Reason != v1alpha1.ReasonIdentityNotAllowed || !strings.Contains(c.Message, tc.want) || rw.adds != 0 {
				t.Fatalf("Rotating %s %q, %d adds; want paused with %q before anything is made", c.Reason, c.Message, rw.adds, tc.want)
			}
		})
	}
}
