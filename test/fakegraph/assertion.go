package fakegraph

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // x5t is SHA-1 by definition (RFC 7515); it names a certificate, it protects nothing
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// jwtBearer is the client_assertion_type of a signed assertion, a certificate's or a federated
// token's.
const jwtBearer = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// FederatedCredential is an application's federated identity credential: Entra accepts, as the
// application's client assertion, a token from Issuer about Subject for one of Audiences, signed
// by a key of the issuer's JWKS, which Keys fetches (an API server's /openid/v1/jwks).
type FederatedCredential struct {
	Issuer, Subject string
	Audiences       []string
	Keys            func() ([]byte, error)
}

// AddFederatedCredential lets clientID sign in to tenantID with tokens fc describes.
func (s *Server) AddFederatedCredential(tenantID, clientID string, fc FederatedCredential) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenantLocked(tenantID, true)
	key := strings.ToLower(clientID)
	t.federated[key] = append(t.federated[key], fc)
}

// AddClientCertificate lets clientID sign in to tenantID with assertions signed by cert's key.
func (s *Server) AddClientCertificate(tenantID, clientID string, cert *x509.Certificate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenantLocked(tenantID, true)
	key := strings.ToLower(clientID)
	t.certs[key] = append(t.certs[key], cert)
}

// assertionFailure is Entra refusing a client assertion: 401 invalid_client with the code of
// what failed, as Entra words them.
func assertionFailure(code int, desc string) *tokenFailure {
	return &tokenFailure{http.StatusUnauthorized, "invalid_client", code, desc}
}

// checkAssertion accepts a client assertion of clientID signed by a registered certificate, or
// a federated token matching one of its federated credentials, in Entra's order of checks. It
// runs without the server's lock: fetching an issuer's keys is a request of its own.
func checkAssertion(clientID, assertion, tokenEndpoint string, certs []*x509.Certificate, federated []FederatedCredential) *tokenFailure {
	unverified, _, err := jwt.NewParser().ParseUnverified(assertion, jwt.MapClaims{})
	if err != nil {
		return &tokenFailure{http.StatusBadRequest, "invalid_request", 50027, "JWT token is invalid or malformed."}
	}
	iss, _ := unverified.Claims.GetIssuer()
	if iss == clientID || strings.EqualFold(iss, clientID) {
		return checkCertificateAssertion(clientID, assertion, tokenEndpoint, unverified.Header, certs)
	}
	return checkFederatedAssertion(assertion, iss, federated)
}

func checkCertificateAssertion(clientID, assertion, tokenEndpoint string, header map[string]any, certs []*x509.Certificate) *tokenFailure {
	var cert *x509.Certificate
	x5t, x5tS256 := thumbprint(header["x5t"]), thumbprint(header["x5t#S256"])
	for _, c := range certs {
		sha1Sum, sha256Sum := sha1.Sum(c.Raw), sha256.Sum256(c.Raw) //nolint:gosec // see the import
		if bytes.Equal(x5t, sha1Sum[:]) || bytes.Equal(x5tS256, sha256Sum[:]) {
			cert = c
		}
	}
	if cert == nil {
		return assertionFailure(700027, "The certificate with identifier used to sign the client assertion is not registered on application. [Reason - The key was not found.]")
	}
	_, err := jwt.Parse(assertion, func(*jwt.Token) (any, error) { return cert.PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256", "PS256"}), jwt.WithAudience(tokenEndpoint), jwt.WithSubject(clientID), jwt.WithExpirationRequired())
	if err != nil {
		if errors.Is(err, jwt.ErrTokenExpired) || errors.Is(err, jwt.ErrTokenNotValidYet) {
			return assertionFailure(700024, "Client assertion is not within its valid time range.")
		}
		return assertionFailure(700027, "Client assertion failed signature validation.")
	}
	return nil
}

func checkFederatedAssertion(assertion, iss string, federated []FederatedCredential) *tokenFailure {
	i := slices.IndexFunc(federated, func(fc FederatedCredential) bool { return fc.Issuer == iss })
	if i < 0 {
		return assertionFailure(700211, fmt.Sprintf("No matching federated identity record found for presented assertion issuer '%s'.", iss))
	}
	fc := federated[i]
	jwks, err := fc.Keys()
	if err != nil {
		return assertionFailure(700212, "Unable to retrieve the issuer's signing keys.")
	}
	var failure *tokenFailure
	_, err = jwt.Parse(assertion, func(tok *jwt.Token) (any, error) { return keyOf(jwks, tok) },
		jwt.WithValidMethods([]string{"RS256", "ES256"}), jwt.WithIssuer(fc.Issuer), jwt.WithExpirationRequired())
	switch {
	case errors.Is(err, jwt.ErrTokenExpired), errors.Is(err, jwt.ErrTokenNotValidYet):
		failure = assertionFailure(700024, "Client assertion is not within its valid time range.")
	case err != nil:
		failure = assertionFailure(700027, "Client assertion failed signature validation.")
	}
	if failure != nil {
		return failure
	}
	claims, _, _ := jwt.NewParser().ParseUnverified(assertion, jwt.MapClaims{})
	sub, _ := claims.Claims.GetSubject()
	aud, _ := claims.Claims.GetAudience()
	if sub != fc.Subject {
		return assertionFailure(700213, fmt.Sprintf("No matching federated identity record found for presented assertion subject '%s'.", sub))
	}
	if !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(fc.Audiences, a) }) {
		return assertionFailure(700212, fmt.Sprintf("No matching federated identity record found for presented assertion audience '%s'.", strings.Join(aud, ",")))
	}
	return nil
}

// thumbprint decodes an x5t header, which RFC 7515 says is base64url and MSAL sends as standard
// base64 with padding; Entra takes either.
func thumbprint(v any) []byte {
	s, _ := v.(string)
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.StdEncoding, base64.URLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && s != "" {
			return b
		}
	}
	return nil
}

// keyOf finds the key tok names by kid in a JWKS document: RSA, or P-256 (which envtest's API
// server signs with).
func keyOf(jwks []byte, tok *jwt.Token) (any, error) {
	var set struct {
		Keys []struct{ Kty, Kid, N, E, Crv, X, Y string } `json:"keys"`
	}
	if err := json.Unmarshal(jwks, &set); err != nil {
		return nil, err
	}
	kid, _ := tok.Header["kid"].(string)
	for _, k := range set.Keys {
		if k.Kid != kid {
			continue
		}
		var parts [2][]byte
		var errs [2]error
		switch {
		case k.Kty == "RSA":
			parts[0], errs[0] = base64.RawURLEncoding.DecodeString(k.N)
			parts[1], errs[1] = base64.RawURLEncoding.DecodeString(k.E)
			if err := errors.Join(errs[:]...); err != nil {
				return nil, err
			}
			return &rsa.PublicKey{N: new(big.Int).SetBytes(parts[0]), E: int(new(big.Int).SetBytes(parts[1]).Int64())}, nil
		case k.Kty == "EC" && k.Crv == "P-256":
			parts[0], errs[0] = base64.RawURLEncoding.DecodeString(k.X)
			parts[1], errs[1] = base64.RawURLEncoding.DecodeString(k.Y)
			if err := errors.Join(errs[:]...); err != nil {
				return nil, err
			}
			point := make([]byte, 65) // uncompressed: 0x04, X and Y, each 32 bytes
			point[0] = 4
			copy(point[33-len(parts[0]):33], parts[0])
			copy(point[65-len(parts[1]):], parts[1])
			return ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
		}
	}
	return nil, fmt.Errorf("no key %q", kid)
}
