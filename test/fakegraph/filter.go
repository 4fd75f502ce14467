package fakegraph

import (
	"fmt"
	"strings"
	"unicode"
)

// predicate is a parsed $filter: whether an object is in the answer.
type predicate func(Object) bool

// filterProps are the properties $filter may name, with how each reads from an object. Graph
// filters more properties than these; fakegraph models only those a credential watcher filters
// on, and any other fails as an unsupported clause, as Graph answers for a property it cannot
// filter, rather than being ignored.
var filterProps = map[string]func(Object) []string{
	"id":          func(o Object) []string { return []string{o.ID} },
	"appid":       func(o Object) []string { return []string{o.AppID} },
	"displayname": func(o Object) []string { return []string{o.DisplayName} },
	"tags":        func(o Object) []string { return o.Tags },
}

// parseFilter reads the subset of OData $filter that Graph serves on applications and service
// principals without advanced queries: eq, in, startswith and tags/any(t:t eq '...'), joined
// by and, or and parentheses. Directory strings compare without regard to case, as in Graph. No
// OData parser is served by this project's module proxy, and this subset is small.
func parseFilter(s string, set *entitySet) (predicate, string) {
	toks, err := lexFilter(s)
	if err != nil {
		return nil, "Invalid filter clause: " + err.Error()
	}
	p := &filterParser{toks: toks, set: set}
	pred, msg := p.or()
	if msg == "" && p.pos < len(p.toks) {
		msg = fmt.Sprintf("Invalid filter clause: syntax error at '%s'.", p.toks[p.pos].text)
	}
	return pred, msg
}

// appIDsOnly returns the appIds a filter of the form appId eq '…' or appId in ('…', …) selects,
// so that a list can look them up as Graph's index does instead of reading every object.
func appIDsOnly(s string) ([]string, bool) {
	toks, err := lexFilter(s)
	if err != nil || len(toks) < 3 || toks[0].quoted || !strings.EqualFold(toks[0].text, "appId") {
		return nil, false
	}
	switch op := strings.ToLower(toks[1].text); {
	case op == "eq" && len(toks) == 3 && toks[2].quoted:
		return []string{toks[2].text}, true
	case op == "in" && toks[2].text == "(" && !toks[2].quoted && toks[len(toks)-1].text == ")":
		var ids []string
		for i, t := range toks[3 : len(toks)-1] {
			if (i%2 == 0) != t.quoted || (!t.quoted && t.text != ",") {
				return nil, false
			}
			if t.quoted {
				ids = append(ids, t.text)
			}
		}
		return ids, len(ids) > 0
	}
	return nil, false
}

type filterToken struct {
	text   string
	quoted bool // a string literal, its quotes removed
}

func lexFilter(s string) ([]filterToken, error) {
	var toks []filterToken
	for i := 0; i < len(s); {
		c := rune(s[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case strings.ContainsRune("(),:/", c):
			toks = append(toks, filterToken{text: string(c)})
			i++
		case c == '\'':
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(s) {
					return nil, fmt.Errorf("unterminated string literal at position %d", i)
				}
				if s[j] == '\'' {
					if j+1 < len(s) && s[j+1] == '\'' {
						b.WriteByte('\'')
						j += 2
						continue
					}
					break
				}
				b.WriteByte(s[j])
				j++
			}
			toks = append(toks, filterToken{text: b.String(), quoted: true})
			i = j + 1
		default:
			j := i
			for j < len(s) && !unicode.IsSpace(rune(s[j])) && !strings.ContainsRune("(),:/'", rune(s[j])) {
				j++
			}
			toks = append(toks, filterToken{text: s[i:j]})
			i = j
		}
	}
	return toks, nil
}

type filterParser struct {
	toks []filterToken
	pos  int
	set  *entitySet
}

func (p *filterParser) peek() (filterToken, bool) {
	if p.pos >= len(p.toks) {
		return filterToken{}, false
	}
	return p.toks[p.pos], true
}

// word consumes the next token when it is the unquoted word w, in any case.
func (p *filterParser) word(w string) bool {
	if t, ok := p.peek(); ok && !t.quoted && strings.EqualFold(t.text, w) {
		p.pos++
		return true
	}
	return false
}

func (p *filterParser) expect(w string) string {
	if p.word(w) {
		return ""
	}
	if t, ok := p.peek(); ok {
		return fmt.Sprintf("Invalid filter clause: expected '%s' at '%s'.", w, t.text)
	}
	return fmt.Sprintf("Invalid filter clause: expected '%s' at the end.", w)
}

func (p *filterParser) literal() (string, string) {
	t, ok := p.peek()
	if !ok || !t.quoted {
		return "", "Invalid filter clause: expected a string literal in quotes."
	}
	p.pos++
	return t.text, ""
}

func (p *filterParser) or() (predicate, string) {
	left, msg := p.and()
	for msg == "" && p.word("or") {
		var right predicate
		if right, msg = p.and(); msg == "" {
			l, r := left, right
			left = func(o Object) bool { return l(o) || r(o) }
		}
	}
	return left, msg
}

func (p *filterParser) and() (predicate, string) {
	left, msg := p.unary()
	for msg == "" && p.word("and") {
		var right predicate
		if right, msg = p.unary(); msg == "" {
			l, r := left, right
			left = func(o Object) bool { return l(o) && r(o) }
		}
	}
	return left, msg
}

func (p *filterParser) unary() (predicate, string) {
	if p.word("(") {
		pred, msg := p.or()
		if msg == "" {
			msg = p.expect(")")
		}
		return pred, msg
	}
	t, ok := p.peek()
	if !ok || t.quoted {
		return nil, "Invalid filter clause: expected a property or a function."
	}
	p.pos++
	name := strings.ToLower(t.text)
	switch name {
	case "startswith":
		if msg := p.expect("("); msg != "" {
			return nil, msg
		}
		get, msg := p.property()
		if msg != "" {
			return nil, msg
		}
		if msg := p.expect(","); msg != "" {
			return nil, msg
		}
		prefix, msg := p.literal()
		if msg == "" {
			msg = p.expect(")")
		}
		return func(o Object) bool { return anyValue(get(o), prefix, hasPrefixFold) }, msg
	case "not", "endswith", "contains":
		return nil, fmt.Sprintf("fakegraph does not implement '%s' in $filter: Graph serves it only as an advanced query (ConsistencyLevel: eventual).", t.text)
	}
	p.pos--
	get, msg := p.property()
	if msg != "" {
		return nil, msg
	}
	if name == "tags" {
		return p.any(get)
	}
	switch {
	case p.word("eq"):
		v, msg := p.literal()
		return func(o Object) bool { return anyValue(get(o), v, strings.EqualFold) }, msg
	case p.word("in"):
		vs, msg := p.list()
		return func(o Object) bool {
			for _, v := range vs {
				if anyValue(get(o), v, strings.EqualFold) {
					return true
				}
			}
			return false
		}, msg
	}
	op, _ := p.peek()
	return nil, fmt.Sprintf("fakegraph does not implement the operator '%s' in $filter; it serves eq, in, startswith and tags/any.", op.text)
}

// property reads a property name $filter may use on the set.
func (p *filterParser) property() (func(Object) []string, string) {
	t, ok := p.peek()
	if !ok || t.quoted {
		return nil, "Invalid filter clause: expected a property name."
	}
	p.pos++
	get := filterProps[strings.ToLower(t.text)]
	if get == nil {
		resource := "Application"
		if p.set.sps {
			resource = "ServicePrincipal"
		}
		return nil, fmt.Sprintf("Unsupported or invalid query filter clause specified for property '%s' of resource '%s'.", t.text, resource)
	}
	return get, ""
}

// any reads /any(t:t eq 'value') after a collection property.
func (p *filterParser) any(get func(Object) []string) (predicate, string) {
	for _, w := range []string{"/", "any", "("} {
		if msg := p.expect(w); msg != "" {
			return nil, msg
		}
	}
	v, ok := p.peek()
	if !ok || v.quoted {
		return nil, "Invalid filter clause: expected a lambda variable."
	}
	p.pos++
	for _, w := range []string{":", v.text, "eq"} {
		if msg := p.expect(w); msg != "" {
			return nil, msg
		}
	}
	want, msg := p.literal()
	if msg == "" {
		msg = p.expect(")")
	}
	return func(o Object) bool { return anyValue(get(o), want, strings.EqualFold) }, msg
}

// maxInList is how many values Graph takes in an `in` clause without advanced queries.
const maxInList = 15

func (p *filterParser) list() ([]string, string) {
	if msg := p.expect("("); msg != "" {
		return nil, msg
	}
	var vs []string
	for {
		v, msg := p.literal()
		if msg != "" {
			return nil, msg
		}
		vs = append(vs, v)
		if !p.word(",") {
			if len(vs) > maxInList {
				return nil, fmt.Sprintf("Too many child clauses specified in search filter expression containing 'OR' operators: %d. Max allowed: %d.", len(vs), maxInList)
			}
			return vs, p.expect(")")
		}
	}
}

func anyValue(values []string, want string, match func(s, want string) bool) bool {
	for _, v := range values {
		if match(v, want) {
			return true
		}
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
