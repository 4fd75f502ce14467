package nodes

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	credwatchv1alpha1 "github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// teamApp is an application of team A's, whose secret expires in ten days.
const teamApp = "8d3c2b1a-0f9e-4d8c-b7a6-5e4d3c2b1a09"

// A member of team A, allowed by the platform team to manage CredentialWatches and Secrets in
// team-a and nothing else, applies a watch of the team's application with kubectl, as the docs
// shows, naming the team's identity and the team's own Slack channel and mailbox. The operator
// reads the application with the team's identity and tells both channels that its secret ends in
// ten days.
func TestTeamMemberWatchesWithKubectl(t *testing.T) {
	requireCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	installOperator(ctx, t)
	teamIdentity(ctx, t)
	env.graph.PutApplication(tenantID, fakegraph.Object{AppID: teamApp, DisplayName: "team-a-api", Passwords: []fakegraph.PasswordCredential{{
		KeyID: "1f2e3d4c-5b6a-4798-8a7b-6c5d4e3f2a1b", DisplayName: "ci", SecretText: "nodes~team-a-secret-0123456789",
		Start: time.Now().Add(-355 * 24 * time.Hour), End: time.Now().Add(10 * 24 * time.Hour)}}})
	env.graph.PutServicePrincipal(tenantID, fakegraph.Object{AppID: teamApp, DisplayName: "team-a-api"})
	create(ctx, t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "credwatch-user", Namespace: "team-a"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"credwatch.dev"}, Resources: []string{"credentialwatches"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
	}})
	create(ctx, t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-credwatch-user", Namespace: "team-a"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "credwatch-user"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "alice@example.com"}}})

	host, port, _ := net.SplitHostPort(env.smtpAddr)
	asAlice := func(args ...string) string {
		return kubectl(t, append([]string{"--as", "alice@example.com", "-n", "team-a"}, args...)...)
	}
	asAlice("create", "-f", "-", "apiVersion: v1\nkind: Secret\nmetadata: {name: slack}\nstringData: {token: xoxb-team-a-token}\n")
	asAlice("apply", "-f", "-", fmt.Sprintf(`apiVersion: credwatch.dev/v1alpha1
kind: CredentialWatch
metadata: {name: team-a-api}
spec:
  target:
    servicePrincipal: {tenantID: %s, clientID: %s}
  identityRef: {name: team-a-graph}
  alerts:
    slack: {channel: "#team-a", tokenSecretRef: {name: slack, key: token}}
    email:
      to: [team-a@example.com]
      smtp: {host: %s, port: %s, tls: None, from: credwatch@example.com}
`, tenantID, teamApp, host, port))
	watch := &credwatchv1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Name: "team-a-api", Namespace: "team-a"}}
	cond := waitCondition(ctx, t, watch, "Ready", "True", "")
	t.Logf("Ready True %s: %s", cond.Reason, cond.Message)
	asAlice("get", "credentialwatches")

	eventually(ctx, t, "team A's Slack message and mail", func() (bool, string) {
		posted, mailed := teamAlerts()
		return len(posted) > 0 && len(mailed) > 0, fmt.Sprintf("Slack %q, mail %q", posted, mailed)
	})
	posted, mailed := teamAlerts()
	t.Logf("Slack: %q", posted)
	t.Logf("mail: %q", mailed)
	// alice may not read Secrets, not even the one she wrote: the token is for the operator.
	if out, err := kubectlErr("--as", "alice@example.com", "-n", "team-a", "get", "secret", "slack"); err == nil {
		t.Errorf("alice read the Slack token: %s", out)
	}
}

// teamAlerts are the Slack titles posted to #team-a and the subjects mailed to team A about the
// team's application.
func teamAlerts() (posted, mailed []string) {
	for _, m := range env.slack.All() {
		if m.Channel == "#team-a" && strings.Contains(m.Title, "team-a-api") {
			posted = append(posted, m.Title)
		}
	}
	msgs, _ := env.mail.List()
	for _, m := range msgs {
		for _, to := range m.To {
			if to.Address == "team-a@example.com" && strings.Contains(m.Subject, "team-a-api") {
				mailed = append(mailed, m.Subject)
			}
		}
	}
	return posted, mailed
}
