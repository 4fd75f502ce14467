package githubsecrets

import (
	"context"
	"errors"
	"net/http"
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
	if azerr.KindOf(err) != azerr.KindForbidden || !strings.Contains(err.Error(), `the sink's token needs the "Secrets" repository permission (read and write) on contoso/other`) {
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
	gh.SecondaryLimit(1, 3*time.Hour)
	if err = c.Put(ctx, base, secret.New(token), repo, secret.New("x")); azerr.RetryAfterOf(err) != time.Hour {
		t.Errorf("a secondary rate limit of 3h: retry after %v, want at most an hour", azerr.RetryAfterOf(err))
	}
}

// A primary rate limit used up is waited out until the hour GitHub names is over, counted on the
// operator's clock, whatever the wall clock says; the next hour lets the write in.
func TestARateLimitIsWaitedOutOnTheInjectedClock(t *testing.T) {
	gh, c, base := setup(t)
	now := time.Date(2031, 3, 1, 10, 40, 0, 0, time.UTC)
	gh.SetClock(func() time.Time { return now })
	c.WithClock(func() time.Time { return now })
	ctx := context.Background()
	repo := Target{Owner: "contoso", Repo: "deploy", Name: "S"}
	gh.SetRateLimit(2) // a read, and then a write's read of the key: its PUT is one too many
	err := c.Readable(ctx, base, secret.New(token), repo)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Put(ctx, base, secret.New(token), repo, secret.New("x"))
	if azerr.KindOf(err) != azerr.KindThrottled || azerr.RetryAfterOf(err) != 20*time.Minute {
		t.Errorf("the hour's limit used up at 10:40: %v (retry after %v); want throttled for 20m", err, azerr.RetryAfterOf(err))
	}
	now = now.Add(20 * time.Minute)
	if err := c.Put(ctx, base, secret.New(token), repo, secret.New("x")); err != nil {
		t.Errorf("in the next hour: %v", err)
	}
}

// A dry run's read needs what the write needs: a token that sees the repository.
func TestReadableNamesWhatTheTokenLacks(t *testing.T) {
	gh, c, base := setup(t)
	gh.AddRepo("contoso", "other", "production")
	ctx := context.Background()
	for _, target := range []Target{{Owner: "contoso", Repo: "deploy", Name: "S"}, {Owner: "contoso", Repo: "deploy", Environment: "production", Name: "S"}} {
		if err := c.Readable(ctx, base, secret.New(token), target); err != nil {
			t.Errorf("%s: %v", target, err)
		}
	}
	err := c.Readable(ctx, base, secret.New(token), Target{Owner: "contoso", Repo: "other", Name: "S"})
	if azerr.KindOf(err) != azerr.KindForbidden || !strings.Contains(err.Error(), "on contoso/other") {
		t.Errorf("a repository the token may not write: %v", err)
	}
	for _, r := range gh.Requests() {
		if r.Method != http.MethodGet {
			t.Errorf("a dry run's read sent %s %s", r.Method, r.Path)
		}
	}
}
