package policy

import (
	"strings"
)

// MailableOwners keeps of the owners' addresses those whose domain is one of domains (compared
// without case; a subdomain is not its parent): the domains an admin allowed, or the tenant's
// verified ones. A guest's user principal name (its address with #EXT#, at the tenant's
// domain) is never kept: it is no mailbox, and the guest is who a watch's author could add. It
// returns how many were dropped.
func MailableOwners(owners, domains []string) (keep []string, dropped int) {
	allowed := make(map[string]bool, len(domains))
	for _, d := range domains {
		allowed[strings.ToLower(strings.TrimSpace(d))] = true
	}
	for _, o := range owners {
		local, domain, ok := strings.Cut(o, "@")
		if !ok || local == "" || strings.Contains(strings.ToUpper(local), "#EXT#") || !allowed[strings.ToLower(domain)] {
			dropped++
			continue
		}
		keep = append(keep, o)
	}
	return keep, dropped
}
