package fakegithub

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	docsAuth      = "https://docs.github.com/rest"
	docsPrimary   = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-the-primary-rate-limit"
	docsSecondary = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
	docsSecrets   = "https://docs.github.com/rest/actions/secrets"
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/{owner}/{repo}", s.withRepo(func(w http.ResponseWriter, _ *http.Request, r *repo) {
		writeJSON(w, http.StatusOK, map[string]any{"id": r.id, "name": r.name, "full_name": r.owner + "/" + r.name})
	}))
	// The repository's secrets, and an environment's, by either of the paths GitHub serves.
	mux.HandleFunc("GET /repos/{owner}/{repo}/actions/secrets/public-key", s.withKeys(false, publicKey))
	mux.HandleFunc("GET /repos/{owner}/{repo}/environments/{env}/secrets/public-key", s.withKeys(true, publicKey))
	mux.HandleFunc("GET /repositories/{id}/environments/{env}/secrets/public-key", s.withKeys(true, publicKey))
	for _, p := range []string{"/repos/{owner}/{repo}/actions/secrets/{name}", "/repos/{owner}/{repo}/environments/{env}/secrets/{name}",
		"/repositories/{id}/environments/{env}/secrets/{name}"} {
		env := strings.Contains(p, "{env}")
		mux.HandleFunc("GET "+p, s.withKeys(env, s.getSecret))
		mux.HandleFunc("PUT "+p, s.withKeys(env, s.putSecret))
		mux.HandleFunc("DELETE "+p, s.withKeys(env, s.deleteSecret))
	}
	return s.limited(mux)
}

// limited authenticates each request, counts it against the rate limits, and says where they
// stand in the x-ratelimit-* headers.
func (s *Server) limited(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, Request{Method: req.Method, Path: req.URL.Path})
		// The primary limit is of the clock's hour: what was used is forgotten as the next begins.
		if hour := s.now().Truncate(time.Hour); !hour.Equal(s.hour) {
			s.hour, s.used = hour, 0
		}
		_, known := s.tokens[tokenOf(req)]
		secondary := known && s.secondaryLeft > 0
		if secondary {
			s.secondaryLeft--
		}
		exceeded := known && !secondary && s.used >= s.limit
		if known && !secondary && !exceeded {
			s.used++
		}
		limit, used, wait, now := s.limit, s.used, s.secondary, s.now()
		s.mu.Unlock()
		h := w.Header()
		h.Set("X-RateLimit-Limit", strconv.Itoa(limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(max(limit-used, 0)))
		h.Set("X-RateLimit-Used", strconv.Itoa(used))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(now.Truncate(time.Hour).Add(time.Hour).Unix(), 10))
		h.Set("X-RateLimit-Resource", "core")
		switch {
		case !known:
			writeError(w, http.StatusUnauthorized, "Bad credentials", docsAuth)
		case secondary:
			h.Set("Retry-After", strconv.Itoa(int(wait.Seconds())))
			writeError(w, http.StatusForbidden, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", docsSecondary)
		case exceeded:
			writeError(w, http.StatusForbidden, "API rate limit exceeded for user ID 1.", docsPrimary)
		default:
			next.ServeHTTP(w, req)
		}
	})
}

// tokenOf is the token of req's Authorization header, "Bearer" or "token".
func tokenOf(req *http.Request) string {
	a := req.Header.Get("Authorization")
	for _, scheme := range []string{"Bearer ", "bearer ", "token "} {
		if t, ok := strings.CutPrefix(a, scheme); ok {
			return t
		}
	}
	return ""
}

// withRepo finds the repository of the path, as the token may see it: GitHub answers 404 for a
// repository a token cannot see, and 403 for one it sees but may not write the secrets of.
func (s *Server) withRepo(h func(http.ResponseWriter, *http.Request, *repo)) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		var r *repo
		if id := req.PathValue("id"); id != "" {
			for _, c := range s.repos {
				if strconv.FormatInt(c.id, 10) == id {
					r = c
				}
			}
		} else {
			r = s.repos[strings.ToLower(req.PathValue("owner")+"/"+req.PathValue("repo"))]
		}
		allowed := r != nil && s.tokens[tokenOf(req)][strings.ToLower(r.owner+"/"+r.name)]
		s.mu.Unlock()
		switch {
		case r == nil:
			writeError(w, http.StatusNotFound, "Not Found", docsSecrets)
		case !allowed && req.Method == http.MethodGet && !strings.Contains(req.URL.Path, "/secrets"):
			writeError(w, http.StatusNotFound, "Not Found", docsSecrets)
		case !allowed:
			writeError(w, http.StatusForbidden, "Resource not accessible by personal access token", docsSecrets)
		default:
			h(w, req, r)
		}
	}
}

// withKeys finds the keyring of the path: the repository's Actions secrets, or an environment's.
func (s *Server) withKeys(env bool, h func(http.ResponseWriter, *http.Request, *keyring)) http.HandlerFunc {
	return s.withRepo(func(w http.ResponseWriter, req *http.Request, r *repo) {
		k := r.actions
		if env {
			s.mu.Lock()
			k = r.environments[strings.ToLower(req.PathValue("env"))]
			s.mu.Unlock()
			if k == nil {
				writeError(w, http.StatusNotFound, "Not Found", docsSecrets)
				return
			}
		}
		h(w, req, k)
	})
}

func publicKey(w http.ResponseWriter, _ *http.Request, k *keyring) {
	writeJSON(w, http.StatusOK, k.publicKey())
}

func (s *Server) getSecret(w http.ResponseWriter, req *http.Request, k *keyring) {
	s.mu.Lock()
	sec := k.secrets[strings.ToUpper(req.PathValue("name"))]
	var body map[string]string
	if sec != nil {
		body = map[string]string{"name": sec.name, "created_at": sec.created.UTC().Format(time.RFC3339), "updated_at": sec.updated.UTC().Format(time.RFC3339)}
	}
	s.mu.Unlock()
	if sec == nil {
		writeError(w, http.StatusNotFound, "Not Found", docsSecrets)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// putSecret opens the value sealed to k's public key and keeps it: 201 when the secret is new,
// 204 when it replaced one, 422 when the value was sealed to another key.
func (s *Server) putSecret(w http.ResponseWriter, req *http.Request, k *keyring) {
	var in struct {
		EncryptedValue string `json:"encrypted_value"`
		KeyID          string `json:"key_id"`
	}
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil || in.EncryptedValue == "" || in.KeyID == "" {
		writeError(w, http.StatusUnprocessableEntity, "Invalid request: encrypted_value and key_id are required.", docsSecrets)
		return
	}
	if in.KeyID != k.keyID {
		writeError(w, http.StatusUnprocessableEntity, "Bad request: key_id is not the current public key's.", docsSecrets)
		return
	}
	value, err := k.open(in.EncryptedValue)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, "Bad request: "+err.Error(), docsSecrets)
		return
	}
	name := req.PathValue("name")
	s.mu.Lock()
	now := s.now()
	sec := k.secrets[strings.ToUpper(name)]
	created := sec == nil
	if created {
		sec = &secret{name: strings.ToUpper(name), created: now}
		k.secrets[sec.name] = sec
	}
	sec.value, sec.updated = value, now
	s.mu.Unlock()
	if created {
		w.WriteHeader(http.StatusCreated)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) deleteSecret(w http.ResponseWriter, req *http.Request, k *keyring) {
	s.mu.Lock()
	key := strings.ToUpper(req.PathValue("name"))
	_, ok := k.secrets[key]
	delete(k.secrets, key)
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", docsSecrets)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
