// Package githubsecrets writes a rotated client secret to a GitHub Actions secret of a repository,
// or of one of its deployment environments, where the workflows that deploy with it read it. The
// value is sealed with that repository's or environment's public key (libsodium's sealed box, as
// GitHub asks), with a token the watch's namespace provides, and sent only to a host the admin
// allows. GitHub never returns a secret's value. It is the one package that speaks go-github.
package githubsecrets

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v75/github"
	"golang.org/x/crypto/nacl/box"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/secret"
)

// Target is one Actions secret: of a repository, or of one of its environments.
type Target struct {
	Owner, Repo string
	// Environment is the deployment environment, or empty for the repository's own secrets.
	Environment string
	Name        string
}

func (t Target) String() string {
	where := t.Owner + "/" + t.Repo
	if t.Environment != "" {
		where += " environment " + t.Environment
	}
	return "GitHub Actions secret " + t.Name + " of " + where
}

// needs is what a token refused needs, for people.
func (t Target) needs() string {
	return "the \"Secrets\" repository permission (read and write) on " + t.Owner + "/" + t.Repo +
		" (fine-grained), or the repo scope (classic)"
}

// Client reaches the GitHub API hosts the admin allows.
type Client struct {
	hosts []string
	http  *http.Client
	// now is the clock a primary rate limit's reset, an instant, is counted from.
	now func() time.Time
}

// New reaches hosts (such as api.github.com) through httpClient (nil for the default).
func New(hosts []string, httpClient *http.Client) *Client {
	if httpClient == nil {
		// The token rides on every request go-github makes: a redirect must not carry it elsewhere.
		httpClient = &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &Client{hosts: hosts, http: httpClient, now: time.Now}
}

// WithClock counts the waits GitHub's rate limits ask for from now.
func (c *Client) WithClock(now func() time.Time) *Client {
	c.now = now
	return c
}

// ErrHostNotAllowed: a sink names an API host the admin did not allow.
var ErrHostNotAllowed = errors.New("the GitHub API host is not one the operator may publish to")

// client is go-github's client of the API at baseURL (https://api.github.com/, or a GitHub
// Enterprise Server's https://<host>/api/v3/), signing in with token.
func (c *Client) client(baseURL string, token secret.Text) (*github.Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Scheme != "https" || u.User != nil || u.RawQuery != "" ||
		!slices.ContainsFunc(c.hosts, func(h string) bool { return strings.EqualFold(h, u.Host) }) {
		return nil, fmt.Errorf("%w: %s (allowed: %s; --publish-hosts)", ErrHostNotAllowed, baseURL, strings.Join(c.hosts, ", "))
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	gh := github.NewClient(c.http).WithAuthToken(token.Reveal())
	gh.BaseURL = u
	return gh, nil
}

// Readable reads the target's public key, which a token that may write its secrets may read: what
// a dry run can try without writing.
func (c *Client) Readable(ctx context.Context, baseURL string, token secret.Text, t Target) error {
	gh, err := c.client(baseURL, token)
	if err != nil {
		return err
	}
	_, _, err = publicKey(ctx, gh, t)
	return c.classify(err, t)
}

// Put seals value with the target's public key and sets the secret to it.
func (c *Client) Put(ctx context.Context, baseURL string, token secret.Text, t Target, value secret.Text) error {
	gh, err := c.client(baseURL, token)
	if err != nil {
		return err
	}
	key, id, err := publicKey(ctx, gh, t)
	if err != nil {
		return c.classify(err, t)
	}
	sealed, err := seal(key, t.Name, value)
	if err != nil {
		return err
	}
	if t.Environment == "" {
		_, err = gh.Actions.CreateOrUpdateRepoSecret(ctx, t.Owner, t.Repo, sealed)
	} else {
		_, err = gh.Actions.CreateOrUpdateEnvSecret(ctx, id, url.PathEscape(t.Environment), sealed)
	}
	return c.classify(err, t)
}

// publicKey is the key the target's secrets are sealed to, and, for an environment, the ID of its
// repository, by which GitHub names the environment's secrets.
func publicKey(ctx context.Context, gh *github.Client, t Target) (*github.PublicKey, int, error) {
	if t.Environment == "" {
		key, _, err := gh.Actions.GetRepoPublicKey(ctx, t.Owner, t.Repo)
		return key, 0, err
	}
	r, _, err := gh.Repositories.Get(ctx, t.Owner, t.Repo)
	if err != nil {
		return nil, 0, err
	}
	id := int(r.GetID())
	key, _, err := gh.Actions.GetEnvPublicKey(ctx, id, url.PathEscape(t.Environment))
	return key, id, err
}

// seal is value sealed with key, as GitHub asks a secret's value to be.
func seal(key *github.PublicKey, name string, value secret.Text) (*github.EncryptedSecret, error) {
	raw, err := base64.StdEncoding.DecodeString(key.GetKey())
	if err != nil {
		return nil, fmt.Errorf("GitHub's public key %s is not base64: %w", key.GetKeyID(), err)
	}
	if len(raw) != 32 {
		return nil, fmt.Errorf("GitHub's public key %s holds %d bytes, not a 32-byte key", key.GetKeyID(), len(raw))
	}
	var pub [32]byte
	copy(pub[:], raw)
	sealed, err := box.SealAnonymous(nil, []byte(value.Reveal()), &pub, rand.Reader)
	if err != nil {
		return nil, err
	}
	return &github.EncryptedSecret{Name: name, KeyID: key.GetKeyID(), EncryptedValue: base64.StdEncoding.EncodeToString(sealed)}, nil
}

// maxWait bounds the wait a rate limit asks for: GitHub's primary limits reset within the hour,
// and a server's clock or answer gone wrong must not hold a rotation for longer.
const maxWait = time.Hour

// classify sorts GitHub's answers as Azure's are sorted (azerr), so that the rotation backs off
// and words them alike: a refusal names what the token needs, a rate limit when to come back.
// Only status codes and GitHub's message go into it: never the request, which holds the sealed
// value.
func (c *Client) classify(err error, t Target) error {
	if err == nil {
		return nil
	}
	var limited *github.RateLimitError
	if errors.As(err, &limited) {
		return fmt.Errorf("%s: %w", t, &azerr.Error{Kind: azerr.KindThrottled, Status: limited.Response.StatusCode, Code: "RateLimited",
			RetryAfter: min(max(limited.Rate.Reset.Sub(c.now()), time.Second), maxWait)})
	}
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &abuse) {
		return fmt.Errorf("%s: %w", t, &azerr.Error{Kind: azerr.KindThrottled, Status: abuse.Response.StatusCode, Code: "SecondaryRateLimit",
			RetryAfter: min(abuse.GetRetryAfter(), maxWait)})
	}
	var e *github.ErrorResponse
	if errors.As(err, &e) && e.Response != nil {
		// A GitHub Enterprise Server's message, whatever its length, goes into status and alerts.
		code := fmt.Sprintf("%.200s", e.Message)
		ae := &azerr.Error{Kind: azerr.KindOfStatus(e.Response.StatusCode), Status: e.Response.StatusCode, Code: code, Lacking: "the sink's token"}
		return fmt.Errorf("%s: %w", t, ae.Needing(t.needs()))
	}
	if ue := azerr.Unanswered(err); ue != nil {
		return fmt.Errorf("%s: %w", t, ue)
	}
	return fmt.Errorf("%s: %w", t, &azerr.Error{Kind: azerr.KindOther, Err: err})
}
