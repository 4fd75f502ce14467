package fakegraph

import "time"

// Throttle makes the next n Graph requests answer 429 with a Retry-After of retryAfter rounded up
// to whole seconds. Kiota retries a 429 up to three times by default, so n above 3 is needed to
// make a single SDK call fail.
func (s *Server) Throttle(n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < 0 {
		n = 0
	}
	if retryAfter < 0 {
		retryAfter = 0
	}
	s.throttleLeft, s.throttleAfter = n, retryAfter
}

// SetUnreachable makes Graph close each connection without answering, as a dead endpoint looks to
// a client; the token endpoint keeps working, so the failure is Graph's alone.
func (s *Server) SetUnreachable(unreachable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unreachable = unreachable
}

// SetStalled makes Graph accept each request and never answer, as an overloaded endpoint or a
// black-holing proxy does: the client's own timeout is all that ends the request.
func (s *Server) SetStalled(stalled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalled = stalled
}

// SetPageLimit makes every page of a list hold at most n objects, whatever $top asks: Graph may
// answer a page shorter than asked, and a client must follow @odata.nextLink even then. 0 lifts it.
func (s *Server) SetPageLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageLimit = n
}

// SetPropagationDelay makes a secret created by addPassword usable at the token endpoint only that
// long after it was created: Entra answers invalid_client until then.
func (s *Server) SetPropagationDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.propagation = d
}
