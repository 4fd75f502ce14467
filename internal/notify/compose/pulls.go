package compose

import (
	"fmt"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/policy"
)

// PullProblem says what an image-pull incident is and, for the whole cluster, what the watched
// service principal's credentials have to do with it. Events and the ImagePullsAuthorized
// condition say it in the same words as the alert.
func PullProblem(w *v1alpha1.CredentialWatch, p v1alpha1.PullIncident, now time.Time) string {
	nodes := notify.Some(p.Nodes, int(p.FailingNodes))
	switch p.Scope {
	case v1alpha1.PullScopeClusterWide:
		return fmt.Sprintf("%s refuses image pulls for want of credentials on %s (%s): the cluster's credential. %s",
			p.Registry, notify.Plural(int(p.FailingNodes), "node"), nodes, credentialCause(w, now))
	case v1alpha1.PullScopeNodeLocal:
		pull := "pull"
		if p.PullingNodes == 1 {
			pull = "pulls"
		}
		return fmt.Sprintf("%s refuses image pulls for want of credentials on %s only (%s), while %s %s from it: "+
			"the kubelet there presents no credential, typically because its credential provider was disabled at start-up, "+
			"when the managed-identity endpoint was not reachable yet", p.Registry, notify.Plural(int(p.FailingNodes), "node"), nodes,
			notify.Plural(int(p.PullingNodes), "other node"), pull)
	default:
		return fmt.Sprintf("%s refuses image pulls for want of credentials on %s (%s); no other node pulled from it lately, "+
			"so it is too early to tell the cluster's credential from a node's kubelet", p.Registry, notify.Plural(int(p.FailingNodes), "node"), nodes)
	}
}

// credentialCause relates a cluster-wide refusal to the state of the watched credentials.
func credentialCause(w *v1alpha1.CredentialWatch, now time.Time) string {
	if w.Status.LastCheckTime == nil {
		return "credwatch has not read the service principal's credentials yet."
	}
	var latest *v1alpha1.Credential
	for i, c := range w.Status.Credentials {
		if c.Type == v1alpha1.CredentialTypePassword && !c.EndTime.After(now) && (latest == nil || c.EndTime.After(latest.EndTime.Time)) {
			latest = &w.Status.Credentials[i]
		}
	}
	if latest != nil {
		// Pulls fail from the second the secret ends, and kubelets report them at once: "0m ago"
		// is what HumanDuration would say.
		ago := policy.HumanDuration(now.Sub(latest.EndTime.Time)) + " ago"
		if now.Sub(latest.EndTime.Time) < time.Minute {
			ago = "less than a minute ago"
		}
		return fmt.Sprintf("The client secret %s of the service principal expired %s: this is why.", describeSecret(*latest), ago)
	}
	return "The service principal's credentials are all valid: look at the registry's AcrPull role assignment and at the cluster's servicePrincipalProfile."
}

func describeSecret(c v1alpha1.Credential) string {
	switch {
	case c.DisplayName != "":
		return fmt.Sprintf("%q", notify.Shown(c.DisplayName))
	case c.Hint != "":
		return fmt.Sprintf("%s...", c.Hint)
	}
	return c.KeyID
}

// pullFix says what a person should do about an incident.
func pullFix(w *v1alpha1.CredentialWatch, p v1alpha1.PullIncident) string {
	if p.Scope == v1alpha1.PullScopeNodeLocal {
		node := p.Nodes[0]
		return fmt.Sprintf("Restart kubelet on %s (kubectl debug node/%s -it --image=mcr.microsoft.com/azurelinux/busybox:1.36 -- chroot /host systemctl restart kubelet), "+
			"or reimage the node; make kubelet start after network-online.target and cloud-init so it does not happen again.", notify.Some(p.Nodes, int(p.FailingNodes)), node)
	}
	cmd := "az ad app credential reset --id " + w.AppID() + " --append"
	if c := w.Spec.Target.AKSCluster; c != nil {
		cmd += fmt.Sprintf(", then az aks update-credentials --resource-group %s --name %s --reset-service-principal --service-principal %s --client-secret <the new secret>",
			c.ResourceGroup, c.Name, w.AppID())
	}
	return cmd
}
