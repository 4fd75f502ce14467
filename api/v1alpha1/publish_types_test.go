package v1alpha1

import "testing"

// A GitHub sink is named, and checked against allow.githubRepositories, by its repository on its
// host: github.com for the public API, a GitHub Enterprise Server's host otherwise, so that two
// sinks differing by host are two sinks.
func TestGitHubSinkNames(t *testing.T) {
	for _, tc := range []struct {
		apiURL, name, repo string
	}{
		{"", "githubActions contoso/deploy X", "https://github.com/contoso/deploy"},
		{"https://API.github.com/", "githubActions contoso/deploy X", "https://github.com/contoso/deploy"},
		{"https://GHE.contoso.com:8443/api/v3/", "githubActions ghe.contoso.com:8443/contoso/deploy X", "https://ghe.contoso.com:8443/contoso/deploy"},
		{"https://bad host/", "githubActions /contoso/deploy X", "https:///contoso/deploy"},
	} {
		s := GitHubActionsSink{APIURL: tc.apiURL, Owner: "contoso", Repo: "deploy", SecretName: "X"}
		if got := s.Name(); got != tc.name {
			t.Errorf("%q: Name = %q, want %q", tc.apiURL, got, tc.name)
		}
		if got := s.RepositoryURL(); got != tc.repo {
			t.Errorf("%q: RepositoryURL = %q, want %q", tc.apiURL, got, tc.repo)
		}
	}
}
