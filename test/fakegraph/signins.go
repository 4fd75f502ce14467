package fakegraph

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// The beta sign-in activity reports, as Graph serves them in the global cloud
// (https://learn.microsoft.com/graph/api/reportroot-list-appcredentialsigninactivities?view=graph-rest-beta):
// one entry per credential of an application or its service principal with its last sign-in,
// and one per service principal with its last sign-in as a client. A secret that signs in at
// the token endpoint shows in them once the refresh lag (SetSignInLag) has passed, as Entra's
// reports, refreshed in the background, do.

// Bounds of the reports: the page Graph returns without $top, the most $top may ask, and how
// many sign-ins of one credential are remembered to answer with the right one for the lag.
const (
	reportPage     = 100
	reportMaxTop   = 999
	signInsKept    = 16
	appCredentials = "appCredentialSignInActivities"
	spActivities   = "servicePrincipalSignInActivities"
)

// SetSignInLag sets how long a sign-in takes to show in the reports (zero by default).
func (s *Server) SetSignInLag(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signInLag = d
}

// SetSignInClock sets the clock sign-ins are recorded and reported by (the wall clock by default,
// and again with nil), so that a test on a fake clock sees them when its operator does.
func (s *Server) SetSignInClock(c clock.PassiveClock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signInClock = c
}

// signInNow is the sign-in clock's time; s.mu is held.
func (s *Server) signInNow() time.Time {
	if s.signInClock == nil {
		return time.Now()
	}
	return s.signInClock.Now()
}

// SetUnlicensed makes tenantID one without Entra ID P1 or P2: the reports answer 403 with
// Graph's licence error.
func (s *Server) SetUnlicensed(tenantID string, unlicensed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tenantLocked(tenantID, true).unlicensed = unlicensed
}

// DenyReports takes AuditLog.Read.All from clientID: the reports answer it 403 naming it.
func (s *Server) DenyReports(clientID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reportsDenied[strings.ToLower(clientID)] = true
}

// SignIn records that credential keyID of tenantID signed in at at, as the token endpoint does
// when it issues a token for a secret.
func (s *Server) SignIn(tenantID, keyID string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tenantLocked(tenantID, true).signedIn(keyID, at)
}

func (t *tenant) signedIn(keyID string, at time.Time) {
	if keyID == "" {
		return
	}
	if t.signIns == nil {
		t.signIns = map[string][]time.Time{}
	}
	key := strings.ToLower(keyID)
	times := append(t.signIns[key], at)
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	t.signIns[key] = times[max(0, len(times)-signInsKept):]
}

// lastSignIn is keyID's latest sign-in the reports show at now, zero if none.
func (t *tenant) lastSignIn(keyID string, now time.Time, lag time.Duration) time.Time {
	var last time.Time
	for _, at := range t.signIns[strings.ToLower(keyID)] {
		if !at.After(now.Add(-lag)) {
			last = at
		}
	}
	return last
}

// routeBeta serves what fakegraph knows of beta: the two sign-in activity reports.
func (s *Server) routeBeta(w http.ResponseWriter, r *http.Request, c graphCall, tok issuedToken, segs []string) {
	if len(segs) != 2 || segs[0] != "reports" || (segs[1] != appCredentials && segs[1] != spActivities) {
		c.graphError(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("Resource not found for the segment '%s'.", strings.Join(segs, "/")))
		return
	}
	if !s.onlyGET(w, r, c) || s.denied(w, c, tok) {
		return
	}
	s.mu.Lock()
	denied := s.reportsDenied[strings.ToLower(tok.clientID)]
	t := s.tenantLocked(tok.tenantID, false)
	unlicensed := t != nil && t.unlicensed
	s.mu.Unlock()
	switch {
	case denied:
		c.graphError(w, http.StatusForbidden, "Authentication_MSGraphPermissionMissing", "Calling principal does not have required MSGraph permissions AuditLog.Read.All")
		return
	case unlicensed:
		c.graphError(w, http.StatusForbidden, "Authentication_RequestFromNonPremiumTenantOrB2CTenant", "Neither tenant is B2C or tenant doesn't have premium license")
		return
	}
	q, msg := parseReportQuery(r.URL.Query(), segs[1])
	if msg != "" {
		c.graphError(w, http.StatusBadRequest, "BadRequest", msg)
		return
	}
	if !s.spend(w, c, tok, 1) {
		return
	}
	entries, total := s.report(tok.tenantID, segs[1], q)
	end := min(total, q.skip+q.top)
	page := object{{"@odata.context", s.URL() + "/beta/$metadata#reports/" + segs[1]}, {"value", entries}}
	if end < total {
		next := url.Values{"$top": {strconv.Itoa(q.top)}, "$skiptoken": {strconv.Itoa(end)}}
		if q.filterBy != "" {
			next.Set("$filter", fmt.Sprintf("%s eq '%s'", q.filterBy, q.value))
		}
		page = append(page, field{"@odata.nextLink", s.URL() + "/beta/reports/" + segs[1] + "?" + next.Encode()})
	}
	writeJSON(w, http.StatusOK, page)
}

type reportQuery struct {
	filterBy, value string
	top, skip       int
}

// parseReportQuery reads the options the reports take: $filter on appId (or, for credentials,
// keyId) eq, $top and the $skiptoken of a next link.
func parseReportQuery(v url.Values, report string) (reportQuery, string) {
	q := reportQuery{top: reportPage}
	for name, vals := range v {
		val := vals[0]
		switch name {
		case "$filter":
			prop, lit, ok := strings.Cut(strings.TrimSpace(val), " eq ")
			prop = strings.TrimSpace(prop)
			if !ok || (prop != "appId" && (prop != "keyId" || report != appCredentials)) {
				return q, "Invalid filter clause: fakegraph filters these reports by appId eq (or keyId eq) only."
			}
			lit = strings.TrimSpace(lit)
			if len(lit) < 2 || lit[0] != '\'' || lit[len(lit)-1] != '\'' {
				return q, "Invalid filter clause: a string literal is quoted with '."
			}
			q.filterBy, q.value = prop, strings.ToLower(lit[1:len(lit)-1])
		case "$top":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > reportMaxTop {
				return q, fmt.Sprintf("Invalid page size specified: '%s'. Must be between 1 and %d inclusive.", val, reportMaxTop)
			}
			q.top = n
		case "$skiptoken":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return q, "Invalid skip token."
			}
			q.skip = n
		default:
			return q, fmt.Sprintf("Query option '%s' is not allowed.", name)
		}
	}
	return q, ""
}

// report is the page q asks of report in the tenant, and how many entries it has in all: those
// whose q.filterBy property is q.value when it is set, in the order Graph lists the service
// principals. An application without a service principal in the tenant has none: its
// credentials sign in nowhere here. Only the page's entries are built, so that paging through a
// tenant of 100,000 applications costs each request its page.
func (s *Server) report(tenantID, report string, q reportQuery) ([]object, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []object{}
	t := s.tenantLocked(tenantID, false)
	if t == nil {
		return out, 0
	}
	now, lag := s.signInNow(), s.signInLag
	n := 0
	emit := func(entry func() object) {
		if n >= q.skip && n < q.skip+q.top {
			out = append(out, entry())
		}
		n++
	}
	for _, sp := range t.listedLocked(true) {
		appID := strings.ToLower(sp.obj.AppID)
		if q.filterBy == "appId" && appID != q.value {
			continue
		}
		app := t.apps[appID]
		if report == spActivities {
			emit(func() object {
				var last time.Time
				for _, o := range []*stored{app, sp} {
					if o == nil {
						continue
					}
					for _, k := range keyIDsOf(o.obj) {
						last = latest(last, t.lastSignIn(k, now, lag))
					}
				}
				return object{{"id", reportID(sp.obj.ID)}, {"appId", sp.obj.AppID},
					{"lastSignInActivity", activity(last)}, {"applicationAuthenticationClientSignInActivity", activity(last)},
					{"applicationAuthenticationResourceSignInActivity", nil}, {"delegatedClientSignInActivity", nil}, {"delegatedResourceSignInActivity", nil}}
			})
			continue
		}
		e := entries{t: t, app: app, sp: sp, q: q, now: now, lag: lag, emit: emit}
		if app != nil {
			e.of(app, "application")
		}
		e.of(sp, "servicePrincipal")
	}
	return out, n
}

// entries emits the report's entries of the credentials of an application and its service
// principal, as q filters them.
type entries struct {
	t       *tenant
	app, sp *stored
	q       reportQuery
	now     time.Time
	lag     time.Duration
	emit    func(func() object)
}

// of emits the entries of o's credentials (o is app or sp, origin says which).
func (e entries) of(o *stored, origin string) {
	add := func(keyID, keyType, usage string, start, end time.Time) {
		if e.q.filterBy == "keyId" && strings.ToLower(keyID) != e.q.value {
			return
		}
		e.emit(func() object {
			appObjectID := ""
			if e.app != nil {
				appObjectID = e.app.obj.ID
			}
			return object{{"id", reportID(keyID + "_" + origin)}, {"keyId", keyID}, {"keyType", keyType}, {"keyUsage", usage},
				{"appId", e.sp.obj.AppID}, {"appObjectId", appObjectID}, {"servicePrincipalObjectId", e.sp.obj.ID}, {"resourceId", nil},
				{"credentialOrigin", origin}, {"createdDateTime", wireTime(start)}, {"expirationDateTime", wireTime(end)},
				{"signInActivity", activity(e.t.lastSignIn(keyID, e.now, e.lag))}}
		})
	}
	for _, p := range o.obj.Passwords {
		add(p.KeyID, "clientSecret", "sign", p.Start, p.End)
	}
	for _, k := range o.obj.Keys {
		add(k.KeyID, "certificate", strings.ToLower(k.Usage), k.Start, k.End)
	}
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// activity is a signInActivity, null when there was none.
func activity(last time.Time) any {
	if last.IsZero() {
		return nil
	}
	return object{{"lastSignInDateTime", wireTime(last)}, {"lastSignInRequestId", reportID(last.String())[:36]}}
}

// reportID is an entry's opaque id, as Graph's are.
func reportID(s string) string {
	return strings.TrimRight(base64.URLEncoding.EncodeToString([]byte(s)), "=")
}

func wireTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}
