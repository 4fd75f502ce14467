package fakegraph

import (
	"net/http"
	"strings"
)

// SetVerifiedDomains sets the verified domains of tenantID, as GET /organization lists them; the
// first is its initial domain. A tenant given none has only its initial domain,
// <tenantID's first eight characters>.onmicrosoft.com.
func (s *Server) SetVerifiedDomains(tenantID string, domains ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tenantLocked(tenantID, true).domains = append([]string(nil), domains...)
}

// organization answers GET /organization: the signed-in tenant, with its verified domains.
func (s *Server) organization(w http.ResponseWriter, tok issuedToken) {
	w.Header().Set("x-ms-resource-unit", "1")
	s.mu.Lock()
	var domains []string
	if t := s.tenantLocked(tok.tenantID, false); t != nil {
		domains = append(domains, t.domains...)
	}
	s.mu.Unlock()
	if len(domains) == 0 {
		domains = []string{strings.ToLower(tok.tenantID[:min(8, len(tok.tenantID))]) + ".onmicrosoft.com"}
	}
	verified := []object{}
	for i, d := range domains {
		verified = append(verified, object{{"capabilities", "Email, OfficeCommunicationsOnline"}, {"isDefault", i == len(domains)-1},
			{"isInitial", i == 0}, {"name", d}, {"type", "Managed"}})
	}
	writeJSON(w, http.StatusOK, object{{"@odata.context", s.URL() + "/v1.0/$metadata#organization"},
		{"value", []object{{{"id", tok.tenantID}, {"displayName", "Contoso"}, {"verifiedDomains", verified}}}}})
}
