package fakegithub

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v75/github"
	"golang.org/x/crypto/nacl/box"
)

const token = "github_pat_fake"

// client is go-github's client of s, signing in with tok, as a publisher would be.
func client(t *testing.T, s *Server, tok string) *github.Client {
	t.Helper()
	c, err := github.NewClient(s.Client()).WithAuthToken(tok).WithEnterpriseURLs(s.URL(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	// WithEnterpriseURLs adds GitHub Enterprise Server's /api/v3/; the fake serves api.github.com's paths.
	c.BaseURL = mustParse(t, s.URL())
	return c
}

// seal seals value to key, as GitHub asks a secret's value to be.
func seal(t *testing.T, key *github.PublicKey, name, value string) *github.EncryptedSecret {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(key.GetKey())
	if err != nil || len(raw) != 32 {
		t.Fatalf("public key %q: %v", key.GetKey(), err)
	}
	var pub [32]byte
	copy(pub[:], raw)
	sealed, err := box.SealAnonymous(nil, []byte(value), &pub, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &github.EncryptedSecret{Name: name, KeyID: key.GetKeyID(), EncryptedValue: base64.StdEncoding.EncodeToString(sealed)}
}

func TestRepositoryAndEnvironmentSecretsAreOpenedWithTheirKeys(t *testing.T) {
	s := New()
	defer s.Close()
	s.AddRepo("contoso", "deploy", "production")
	s.AddToken(token, "contoso/deploy")
	c := client(t, s, token)
	ctx := context.Background()

	key, _, err := c.Actions.GetRepoPublicKey(ctx, "contoso", "deploy")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Actions.CreateOrUpdateRepoSecret(ctx, "contoso", "deploy", seal(t, key, "AZURE_CLIENT_SECRET", "first~value"))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("a new secret: %v %v", resp, err)
	}
	resp, err = c.Actions.CreateOrUpdateRepoSecret(ctx, "contoso", "deploy", seal(t, key, "azure_client_secret", "second~value"))
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("a secret replaced: %v %v", resp, err)
	}
	if v, ok := s.Secret("contoso", "deploy", "", "AZURE_CLIENT_SECRET"); !ok || v != "second~value" {
		t.Errorf("the repository's secret is %q, %v", v, ok)
	}
	got, _, err := c.Actions.GetRepoSecret(ctx, "contoso", "deploy", "AZURE_CLIENT_SECRET")
	if err != nil || got.Name != "AZURE_CLIENT_SECRET" || got.UpdatedAt.IsZero() {
		t.Errorf("reading the secret: %+v %v", got, err)
	}

	r, _, err := c.Repositories.Get(ctx, "contoso", "deploy")
	if err != nil {
		t.Fatal(err)
	}
	envKey, _, err := c.Actions.GetEnvPublicKey(ctx, int(r.GetID()), "production")
	if err != nil || envKey.GetKeyID() == key.GetKeyID() {
		t.Fatalf("the environment's key %+v (%v) should be its own", envKey, err)
	}
	if _, err := c.Actions.CreateOrUpdateEnvSecret(ctx, int(r.GetID()), "production", seal(t, key, "AZURE_CLIENT_SECRET", "x")); !isStatus(err, http.StatusUnprocessableEntity) {
		t.Errorf("a value sealed with the repository's key to the environment: %v, want 422", err)
	}
	if _, err := c.Actions.CreateOrUpdateEnvSecret(ctx, int(r.GetID()), "production", seal(t, envKey, "AZURE_CLIENT_SECRET", "env~value")); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Secret("contoso", "deploy", "production", "AZURE_CLIENT_SECRET"); v != "env~value" {
		t.Errorf("the environment's secret is %q", v)
	}

	if _, err := c.Actions.DeleteRepoSecret(ctx, "contoso", "deploy", "AZURE_CLIENT_SECRET"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Secret("contoso", "deploy", "", "AZURE_CLIENT_SECRET"); ok {
		t.Error("a deleted secret is still there")
	}
	for _, req := range s.Requests() {
		if strings.Contains(req.Path, "value") || strings.Contains(req.Path, token) {
			t.Errorf("a request recorded %q", req.Path)
		}
	}
}

func TestRefusalsAreGitHubs(t *testing.T) {
	s := New()
	defer s.Close()
	s.AddRepo("contoso", "deploy")
	s.AddRepo("contoso", "other")
	s.AddToken(token, "contoso/deploy")
	ctx := context.Background()
	if _, _, err := client(t, s, "wrong").Actions.GetRepoPublicKey(ctx, "contoso", "deploy"); !isStatus(err, http.StatusUnauthorized) {
		t.Errorf("a bad token: %v, want 401", err)
	}
	c := client(t, s, token)
	if _, _, err := c.Actions.GetRepoPublicKey(ctx, "contoso", "other"); !isStatus(err, http.StatusForbidden) {
		t.Errorf("a repository the token may not write: %v, want 403", err)
	}
	if _, _, err := c.Actions.GetRepoPublicKey(ctx, "contoso", "missing"); !isStatus(err, http.StatusNotFound) {
		t.Errorf("no such repository: %v, want 404", err)
	}
	if _, _, err := c.Actions.GetEnvPublicKey(ctx, 1, "production"); !isStatus(err, http.StatusNotFound) {
		t.Errorf("no such environment: %v, want 404", err)
	}
}

func TestRateLimitsAreSaidAsGitHubSaysThem(t *testing.T) {
	s := New()
	defer s.Close()
	s.AddRepo("contoso", "deploy")
	s.AddToken(token, "contoso/deploy")
	ctx := context.Background()

	s.SecondaryLimit(1, 30*time.Second)
	_, _, err := client(t, s, token).Actions.GetRepoPublicKey(ctx, "contoso", "deploy")
	var abuse *github.AbuseRateLimitError
	if !errors.As(err, &abuse) || abuse.GetRetryAfter() != 30*time.Second {
		t.Errorf("a secondary limit: %v, want an abuse error to retry after 30s", err)
	}

	s.SetRateLimit(2)
	c := client(t, s, token)
	for range 2 {
		if _, resp, err := c.Actions.GetRepoPublicKey(ctx, "contoso", "deploy"); err != nil || resp.Rate.Limit != 2 {
			t.Fatalf("within the limit: %v %v", resp, err)
		}
	}
	_, _, err = client(t, s, token).Actions.GetRepoPublicKey(ctx, "contoso", "deploy")
	var limited *github.RateLimitError
	if !errors.As(err, &limited) || limited.Rate.Remaining != 0 || !limited.Rate.Reset.After(time.Now()) {
		t.Errorf("beyond the limit: %v, want a rate limit error with its reset", err)
	}
}

func isStatus(err error, status int) bool {
	var e *github.ErrorResponse
	return errors.As(err, &e) && e.Response.StatusCode == status
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
