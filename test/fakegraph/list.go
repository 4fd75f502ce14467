package fakegraph

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// list pages the way Graph does (default 100, $top up to 999, @odata.nextLink carrying the other
// options), so clients that forget to follow nextLink miss objects here too.
func (s *Server) list(w http.ResponseWriter, r *http.Request, set *entitySet, tok issuedToken, q query) {
	s.mu.Lock()
	var all []*stored
	if t := s.tenantLocked(tok.tenantID, false); t != nil {
		m := t.apps
		if set.sps {
			m = t.sps
		}
		switch {
		case q.appIDs != nil:
			seen := map[*stored]bool{} // an in clause may name an appId twice
			for _, id := range q.appIDs {
				if st := m[strings.ToLower(id)]; st != nil && !seen[st] && q.filter(st.obj) && !s.hiddenLocked(set, tok, st) {
					seen[st] = true
					all = append(all, st)
				}
			}
			slices.SortFunc(all, func(a, b *stored) int { return cmp.Compare(a.seq, b.seq) })
		case q.filter == nil && len(s.appsHidden) == 0:
			all = t.listedLocked(set.sps)
		default:
			for _, st := range t.listedLocked(set.sps) {
				if (q.filter == nil || q.filter(st.obj)) && !s.hiddenLocked(set, tok, st) {
					all = append(all, st)
				}
			}
		}
	}
	top := 100
	if q.topGiven {
		top = q.top
	}
	if s.pageLimit > 0 {
		top = min(top, s.pageLimit)
	}
	start := min(q.skip, len(all))
	end := min(start+top, len(all))
	// Only the page is copied, to render outside the lock: Graph's time for a page does not grow
	// with the tenant, and a fake whose did would be what a benchmark of 100,000 measures.
	page := make([]Object, 0, end-start)
	for _, st := range all[start:end] {
		page = append(page, st.obj.clone())
	}
	s.mu.Unlock()
	values := make([]object, 0, len(page))
	for _, o := range page {
		values = append(values, render(set, o, q.selected, q.selected != nil))
	}
	body := object{{"@odata.context", s.URL() + "/v1.0/$metadata#" + set.name + q.contextSelect()}}
	if end < len(all) {
		body = append(body, field{"@odata.nextLink", s.URL() + r.URL.EscapedPath() + "?" + withSkipToken(r.URL.RawQuery, end)})
	}
	body = append(body, field{"value", values})
	writeJSON(w, http.StatusOK, body)
}

func withSkipToken(rawQuery string, offset int) string {
	var kept []string
	for _, part := range strings.Split(rawQuery, "&") {
		k, _, _ := strings.Cut(part, "=")
		if dk, err := url.QueryUnescape(k); part == "" || (err == nil && strings.EqualFold(dk, "$skiptoken")) {
			continue
		}
		kept = append(kept, part)
	}
	tok := base64.RawURLEncoding.EncodeToString([]byte("fakegraph:" + strconv.Itoa(offset)))
	return strings.Join(append(kept, "$skiptoken="+tok), "&")
}

type query struct {
	selected []string // canonical names; nil without $select
	top      int
	topGiven bool
	skip     int
	filter   predicate // nil without $filter
	appIDs   []string  // the only appIds the filter can select, when it names them so
}

func (q query) contextSelect() string {
	if q.selected == nil {
		return ""
	}
	return "(" + strings.Join(q.selected, ",") + ")"
}

// parseQuery reads OData system query options case-insensitively, as Graph does. It returns the
// error message to send; options fakegraph does not implement fail loudly rather than being
// ignored, since ignoring $filter would return wrong data.
func parseQuery(rawQuery string, set *entitySet) (query, string) {
	var q query
	vals, err := url.ParseQuery(rawQuery)
	if err != nil {
		return q, "Invalid query string."
	}
	for k, vs := range vals {
		v := vs[0]
		switch strings.ToLower(k) {
		case "$select":
			q.selected = []string{}
			seen := map[string]bool{}
			for _, p := range strings.Split(v, ",") {
				p = strings.TrimSpace(p)
				if p == "" {
					continue
				}
				if p == "*" {
					for _, d := range defaultProps(set) {
						if !seen[d] {
							seen[d] = true
							q.selected = append(q.selected, d)
						}
					}
					continue
				}
				canon, ok := set.props[strings.ToLower(p)]
				if !ok {
					return q, fmt.Sprintf("Could not find a property named '%s' on type '%s'.", p, set.typeName)
				}
				if !seen[canon] {
					seen[canon] = true
					q.selected = append(q.selected, canon)
				}
			}
		case "$top":
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return q, fmt.Sprintf("Invalid value '%s' for $top query option found. The $top query option requires a non-negative integer value.", v)
			}
			if n < 1 || n > 999 {
				return q, fmt.Sprintf("Invalid page size specified: '%d'. Must be between 1 and 999 inclusive.", n)
			}
			q.top, q.topGiven = n, true
		case "$skiptoken":
			b, err := base64.RawURLEncoding.DecodeString(v)
			n, err2 := strconv.Atoi(strings.TrimPrefix(string(b), "fakegraph:"))
			if err != nil || err2 != nil || !strings.HasPrefix(string(b), "fakegraph:") || n < 0 {
				return q, "Unable to read the skip token."
			}
			q.skip = n
		case "$filter":
			pred, msg := parseFilter(v, set)
			if msg != "" {
				return q, msg
			}
			q.filter = pred
			q.appIDs, _ = appIDsOnly(v)
		case "$search", "$orderby", "$expand", "$count", "$skip", "$apply", "$compute":
			return q, fmt.Sprintf("fakegraph does not implement the %s query option.", strings.ToLower(k))
		}
	}
	return q, ""
}

// listedLocked is the applications, or the service principals, of t in the order Graph lists them.
func (t *tenant) listedLocked(sps bool) []*stored {
	if all, ok := t.listed[sps]; ok {
		return all
	}
	m := t.apps
	if sps {
		m = t.sps
	}
	all := slices.SortedFunc(maps.Values(m), func(a, b *stored) int { return cmp.Compare(a.seq, b.seq) })
	if t.listed == nil {
		t.listed = map[bool][]*stored{}
	}
	t.listed[sps] = all
	return all
}
