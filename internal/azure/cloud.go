package azure

import (
	"fmt"
	"net/url"
	"strings"
)

// Cloud is the set of endpoints of one Azure cloud that credwatch talks to.
type Cloud struct {
	// AuthorityHost is Entra ID's sign-in endpoint, such as https://login.microsoftonline.com/.
	AuthorityHost string
	// GraphEndpoint is Microsoft Graph's root, such as https://graph.microsoft.com.
	GraphEndpoint string
	// GraphAudience is what tokens for Graph are requested for; empty means GraphEndpoint, which
	// is Graph's audience in every Azure cloud. A Graph behind another name (a proxy, a private
	// endpoint) keeps its own.
	GraphAudience string
	// ARMEndpoint is Azure Resource Manager's root, such as https://management.azure.com.
	ARMEndpoint string
	// ARMAudience is what tokens for Resource Manager are requested for.
	ARMAudience string
}

// The clouds Azure runs, by the names azure-cli gives them.
var clouds = map[string]Cloud{
	"AzurePublic": {
		AuthorityHost: "https://login.microsoftonline.com/",
		GraphEndpoint: "https://graph.microsoft.com",
		ARMEndpoint:   "https://management.azure.com",
		ARMAudience:   "https://management.core.windows.net/",
	},
	"AzureChina": {
		AuthorityHost: "https://login.chinacloudapi.cn/",
		GraphEndpoint: "https://microsoftgraph.chinacloudapi.cn",
		ARMEndpoint:   "https://management.chinacloudapi.cn",
		ARMAudience:   "https://management.core.chinacloudapi.cn/",
	},
	"AzureUSGovernment": {
		AuthorityHost: "https://login.microsoftonline.us/",
		GraphEndpoint: "https://graph.microsoft.us",
		ARMEndpoint:   "https://management.usgovcloudapi.net",
		ARMAudience:   "https://management.core.usgovcloudapi.net/",
	},
}

// CloudNamed returns the endpoints of a named cloud.
func CloudNamed(name string) (Cloud, error) {
	c, ok := clouds[name]
	if !ok {
		return Cloud{}, fmt.Errorf("unknown cloud %q: want AzurePublic, AzureChina or AzureUSGovernment", name)
	}
	return c, nil
}

// Known reports whether the authority host is one of Azure's own. MSAL sends instance discovery
// for any other host to the public cloud, never to that host, so it must be told not to.
func (c Cloud) Known() bool {
	for _, k := range clouds {
		if strings.TrimSuffix(k.AuthorityHost, "/") == strings.TrimSuffix(c.AuthorityHost, "/") {
			return true
		}
	}
	return false
}

// GraphScope is the scope of Graph tokens.
func (c Cloud) GraphScope() string {
	aud := c.GraphAudience
	if aud == "" {
		aud = c.GraphEndpoint
	}
	return strings.TrimSuffix(aud, "/") + "/.default"
}

// Validate checks that every endpoint is an https URL.
func (c Cloud) Validate() error {
	for name, v := range map[string]string{"authority host": c.AuthorityHost, "Graph endpoint": c.GraphEndpoint,
		"ARM endpoint": c.ARMEndpoint, "ARM audience": c.ARMAudience} {
		u, err := url.Parse(v)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("%s %q: want an https URL", name, v)
		}
	}
	return nil
}
