package saissuer

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CanaryServiceAccount is the ServiceAccount the canary mints tokens for, in the operator's
// namespace: the operator may create tokens for it and no other.
const CanaryServiceAccount = "credwatch-canary"

// canaryLifetime is the shortest lifetime TokenRequest grants.
const canaryLifetime = 600

// Prober asks each API server directly, through the operator's own credentials and trust, what it
// serves. Four plain requests per server; a clientset per endpoint would bring nothing but weight.
type Prober struct {
	// Config is how the operator reaches its API server; each endpoint is reached with its TLS
	// trust and credentials.
	Config *rest.Config
	// Reader lists the kubernetes Service's EndpointSlices.
	Reader client.Reader
	// Namespace holds the canary ServiceAccount.
	Namespace string
	// Allowed are API server endpoints, besides the kubernetes Service's and the operator's own,
	// that a watch may name: the admin's (--issuer-endpoints).
	Allowed []string
}

// NotAPIServerError is an endpoint a watch named that is not known to be an API server of this
// cluster. The operator connects with its own credentials and trust, and tells what answered:
// an endpoint anyone who may create a watch could name would make it a scanner of the network.
type NotAPIServerError struct{ Endpoint string }

func (e *NotAPIServerError) Error() string {
	return fmt.Sprintf("endpoint %s is not an API server of this cluster (the kubernetes Service's endpoints, the operator's own, "+
		"or one its --issuer-endpoints allows), so it is not contacted", e.Endpoint)
}

// EndpointError is an API server that could not be read.
type EndpointError struct {
	Endpoint string
	Err      error
}

func (e *EndpointError) Error() string { return e.Endpoint + ": " + e.Err.Error() }
func (e *EndpointError) Unwrap() error { return e.Err }

// CanaryError is a canary token that could not be minted: the ServiceAccount or the right to
// create its tokens is missing.
type CanaryError struct {
	Endpoint string
	Err      error
}

func (e *CanaryError) Error() string {
	return fmt.Sprintf("minting a canary token for ServiceAccount %s through %s: %v", CanaryServiceAccount, e.Endpoint, e.Err)
}
func (e *CanaryError) Unwrap() error { return e.Err }

// Probe reads every endpoint (those of the kubernetes Service when endpoints is empty), mints a
// canary token through each and has each of the others review it.
func (p *Prober) Probe(ctx context.Context, endpoints []string) (Observation, error) {
	if len(endpoints) == 0 {
		var err error
		if endpoints, err = p.serviceEndpoints(ctx); err != nil {
			// Not finding the API servers is as much a failed check as not reaching one.
			return Observation{}, &EndpointError{"the kubernetes Service", err}
		}
	} else if err := p.checkNamed(ctx, endpoints); err != nil {
		return Observation{}, err
	}
	obs := Observation{}
	clients := map[string]*http.Client{}
	for _, ep := range endpoints {
		c, err := p.clientFor(ep)
		if err != nil {
			return Observation{}, &EndpointError{ep, err}
		}
		clients[ep] = c
		e, err := read(ctx, c, ep)
		if err != nil {
			return Observation{}, &EndpointError{ep, err}
		}
		obs.Endpoints = append(obs.Endpoints, e)
	}
	for i := range obs.Endpoints {
		e := &obs.Endpoints[i]
		token, err := p.mint(ctx, clients[e.URL], e.URL)
		if err != nil {
			return Observation{}, err
		}
		if e.SigningKeyID, err = keyID(token); err != nil {
			return Observation{}, &CanaryError{e.URL, err}
		}
		for _, other := range obs.Endpoints {
			if other.URL == e.URL {
				continue
			}
			if why, err := review(ctx, clients[other.URL], other.URL, token); err != nil {
				return Observation{}, &EndpointError{other.URL, err}
			} else if why != "" {
				if e.Rejected == nil {
					e.Rejected = map[string]string{}
				}
				e.Rejected[other.URL] = why
			}
		}
	}
	return obs, nil
}

// read reads the issuer the endpoint ep announces, and the keys it serves, through c.
func read(ctx context.Context, c *http.Client, ep string) (Endpoint, error) {
	e := Endpoint{URL: ep}
	var disc struct {
		Issuer string `json:"issuer"`
	}
	if err := getJSON(ctx, c, ep+"/.well-known/openid-configuration", "application/json", &disc); err != nil {
		return e, err
	}
	var jwks struct {
		Keys []struct {
			KeyID string `json:"kid"`
		} `json:"keys"`
	}
	// The API server serves the key set as nothing else.
	if err := getJSON(ctx, c, ep+"/openid/v1/jwks", "application/jwk-set+json", &jwks); err != nil {
		return e, err
	}
	e.Issuer = disc.Issuer
	for _, k := range jwks.Keys {
		e.KeyIDs = append(e.KeyIDs, k.KeyID)
	}
	slices.Sort(e.KeyIDs)
	return e, nil
}

// checkNamed refuses endpoints that are not known API servers, before any is contacted.
func (p *Prober) checkNamed(ctx context.Context, endpoints []string) error {
	known := map[string]bool{}
	for _, e := range append(append([]string{p.Config.Host}, p.Allowed...), p.knownService(ctx)...) {
		known[endpointKey(e)] = true
	}
	for _, e := range endpoints {
		if !known[endpointKey(e)] {
			return &NotAPIServerError{e}
		}
	}
	return nil
}

// knownService lists the kubernetes Service's endpoints, none when they cannot be read: then only
// the operator's own and the allowed ones are known.
func (p *Prober) knownService(ctx context.Context) []string {
	if p.Reader == nil {
		return nil
	}
	out, _ := p.serviceEndpoints(ctx)
	return out
}

// endpointKey is an endpoint as compared: scheme, host and port, with https's port made plain.
func endpointKey(e string) string {
	u, err := url.Parse(e)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		// Only https://host:port: paths are appended to it, and would reach other requests.
		return "invalid:" + e
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return strings.ToLower(u.Scheme + "://" + u.Hostname() + ":" + port)
}

// serviceEndpoints are the addresses of the kubernetes Service's EndpointSlices, which every API
// server keeps its own address in.
func (p *Prober) serviceEndpoints(ctx context.Context) ([]string, error) {
	var list discoveryv1.EndpointSliceList
	if err := p.Reader.List(ctx, &list, client.InNamespace("default"), client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		return nil, fmt.Errorf("listing its EndpointSlices: %w", err)
	}
	var out []string
	for _, s := range list.Items {
		for _, port := range s.Ports {
			if port.Name == nil || *port.Name != "https" || port.Port == nil {
				continue
			}
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && !*e.Conditions.Ready {
					continue
				}
				for _, addr := range e.Addresses {
					host := addr
					if s.AddressType == discoveryv1.AddressTypeIPv6 {
						host = "[" + addr + "]"
					}
					out = append(out, "https://"+host+":"+strconv.Itoa(int(*port.Port)))
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no ready endpoint: name the API servers in spec.target.serviceAccountIssuer.endpoints")
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// clientFor reaches endpoint with the operator's credentials, checking its certificate against the
// name the operator's own API address has: every API server's certificate carries the address
// clients reach it by, such as the kubernetes Service's IP, not always its own.
func (p *Prober) clientFor(endpoint string) (*http.Client, error) {
	cfg := rest.CopyConfig(p.Config)
	if cfg.ServerName == "" {
		if u, err := url.Parse(p.Config.Host); err == nil && u.Hostname() != "" {
			cfg.ServerName = u.Hostname()
		}
	}
	cfg.Host = endpoint
	return rest.HTTPClientFor(cfg)
}

func (p *Prober) mint(ctx context.Context, c *http.Client, endpoint string) (string, error) {
	req := authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](canaryLifetime)}}
	var resp authenticationv1.TokenRequest
	path := fmt.Sprintf("%s/api/v1/namespaces/%s/serviceaccounts/%s/token", endpoint, p.Namespace, CanaryServiceAccount)
	if err := postJSON(ctx, c, path, req, &resp); err != nil {
		var he *httpError
		if errors.As(err, &he) && (he.status == http.StatusNotFound || he.status == http.StatusForbidden) {
			return "", &CanaryError{endpoint, err}
		}
		return "", &EndpointError{endpoint, err}
	}
	return resp.Status.Token, nil
}

// review asks endpoint whether it accepts token; why is empty when it does. Neither says the
// token, even if something on the way echoes what it was sent.
func review(ctx context.Context, c *http.Client, endpoint, token string) (why string, err error) {
	var resp authenticationv1.TokenReview
	if err := postJSON(ctx, c, endpoint+"/apis/authentication.k8s.io/v1/tokenreviews", authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, &resp); err != nil {
		var he *httpError
		if errors.As(err, &he) {
			he.body = bytes.ReplaceAll(he.body, []byte(token), []byte(redactedToken))
		}
		return "", err
	}
	if resp.Status.Authenticated {
		return "", nil
	}
	if resp.Status.Error == "" {
		return "not authenticated", nil
	}
	return strings.ReplaceAll(resp.Status.Error, token, redactedToken), nil
}

const redactedToken = "[the canary token]"

// keyID reads the kid of a JWT's header; the token itself goes nowhere else.
func keyID(token string) (string, error) {
	header, _, ok := strings.Cut(token, ".")
	if !ok {
		return "", errors.New("the token is not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		return "", fmt.Errorf("the token's header: %w", err)
	}
	var h struct {
		KeyID string `json:"kid"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return "", fmt.Errorf("the token's header: %w", err)
	}
	return h.KeyID, nil
}

type httpError struct {
	status int
	body   []byte
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, explain(e.body)) }

// explain says what a failed answer says: an API server's Status message, else the body; its
// start only, on one line.
func explain(body []byte) string {
	text := string(body)
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Message != "" {
		text = st.Message
	}
	text = strings.Join(strings.Fields(text), " ")
	if r := []rune(text); len(r) > maxExplained {
		text = string(r[:maxExplained]) + "…"
	}
	return text
}

// maxExplained bounds the part of an unexpected answer that goes into conditions and events.
const maxExplained = 200

func getJSON(ctx context.Context, c *http.Client, u, accept string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", accept)
	return do(c, req, out)
}

func postJSON(ctx context.Context, c *http.Client, u string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	return do(c, req, out)
}

// maxBody bounds what is read of an answer: a JWKS or a review is a few KiB.
const maxBody = 1 << 20

func do(c *http.Client, req *http.Request, out any) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }() // its answer is read: a failed close tells nothing more
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &httpError{status: resp.StatusCode, body: body}
	}
	return json.Unmarshal(body, out)
}
