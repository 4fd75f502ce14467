package githubsecrets

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/secret"
	"github.com/credwatch/credwatch/test/fakegithub"
)

const token = "github_pat_fake"

func setup(t *testing.T) (*fakegithub.Server, *Client, string) {
	t.Helper()
	gh := fakegithub.New()
	t.Cleanup(gh.Close)
	gh.AddRepo("contoso", "deploy", "production")
	gh.AddToken(token, "contoso/deploy")
	u, _ := url.Parse(gh.URL())
	return gh, New([]string{"api.github.com", u.Host}, gh.Client()), gh.URL()
}

func TestPutSealsTheValueForTheRepositoryAndTheEnvironment(t *testing.T) {
	gh, c, base := setup(t)
	ctx := context.Background()
	for _, target := range []Target{{Owner: "contoso", Repo: "deploy", Name: "AZURE_CLIENT_SECRET"},
		{Owner: "contoso", Repo: "deploy", Environment: "production", Name: "AZURE_CLIENT_SECRET"}} {
		if _, ok := gh.Secret("contoso", "deploy", target.Environment, "AZURE_CLIENT_SECRET"); ok {
			t.Fatalf("%s exists before it was put", target)
		}
		if err := c.Put(ctx, base, secret.New(token), target, secret.New("new~secret-"+target.Environment)); err != nil {
			t.Fatal(err)
		}
		if v, ok := gh.Secret("contoso", "deploy", target.Environment, "AZURE_CLIENT_SECRET"); !ok || v != "new~secret-"+target.Environment {
			t.Errorf("%s holds %q", target, v)
		}
	}
}

func TestRefusalsSayWhatIsMissing(t *testing.T) {
	gh, c, base := setup(t)
	gh.AddRepo("contoso", "other")
	ctx := context.Background()
	repo := Target{Owner: "contoso", Repo: "deploy", Name: "S"}
	if err := c.Put(ctx, "https://evil.example/", secret.New(token), repo, secret.New("x")); !errors.Is(err, ErrHostNotAllowed) {
		t.Errorf("a host not allowed: %v", err)
	}
	err := c.Put(ctx, base, secret.New("wrong"), repo, secret.New("x"))
	if azerr.KindOf(err) != azerr.KindUnauthenticated || !strings.Contains(err.Error(), "Bad credentials") {
		t.Errorf("a bad token: %v", err)
	}
	err = c.Put(ctx, base, secret.New(token), Target{Owner: "contoso", Repo: "other", Name: "S"}, secret.New("x"))
	if azerr.KindOf(err) != azerr.KindForbidden || !strings.Contains(err.Error(), `"Secrets" repository permission (read and write) on contoso/other`) {
		t.Errorf("a repository the token may not write: %v", err)
	}
	gh.SecondaryLimit(1, 30*time.Second)
	err = c.Put(ctx, base, secret.New(token), repo, secret.New("x"))
	if azerr.KindOf(err) != azerr.KindThrottled || azerr.RetryAfterOf(err) != 30*time.Second {
		t.Errorf("a secondary rate limit: %v", err)
	}
	if strings.Contains(err.Error(), token) {
		t.Errorf("an error holds the token: %v", err)
	}
	gh.SetRateLimit(1)
	_ = c.Put(ctx, base, secret.New(token), repo, secret.New("x"))
	err = c.Put(ctx, base, secret.New(token), repo, secret.New("x"))
	if azerr.KindOf(err) != azerr.KindThrottled || azerr.RetryAfterOf(err) <= 0 {
		t.Errorf("the hour's limit used up: %v", err)
	}
}
