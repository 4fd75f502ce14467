package controllers

import (
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// evaluateFindings holds the watch's credentials to its hygiene policy and records what breaks
// it in status.findings, and returns when the clock alone next changes that. A tenant scan this
// process has not run keeps the findings its status holds, as it keeps its counts.
func (r *CredentialWatchReconciler) evaluateFindings(obj *v1alpha1.CredentialWatch, h policy.Hygiene, now time.Time) time.Time {
	st := &obj.Status
	if st.LastCheckTime == nil {
		return time.Time{}
	}
	var f policy.Findings
	if obj.Spec.Target.TenantScan != nil {
		found, ok := r.Scans.Get(client.ObjectKeyFromObject(obj))
		if !ok {
			return time.Time{}
		}
		f = policy.FindingsOf(found.Credentials, func(appID string) bool { return found.SAML[appID] }, now, h, policy.MaxListedFindings)
	} else {
		saml := st.ServicePrincipal != nil && strings.EqualFold(st.ServicePrincipal.SingleSignOnMode, target.SAML)
		f = policy.FindingsOf(st.Credentials, func(string) bool { return saml }, now, h, policy.MaxListedFindings)
	}
	st.Findings = findingsStatus(obj, f, h)
	return f.NextChange
}

// findingsStatus is f as status records it; nil when nothing was found.
func findingsStatus(obj *v1alpha1.CredentialWatch, f policy.Findings, h policy.Hygiene) *v1alpha1.FindingsStatus {
	if f.Total() == 0 {
		return nil
	}
	out := &v1alpha1.FindingsStatus{Unlisted: f.Unlisted, Items: make([]v1alpha1.Finding, 0, len(f.Listed))}
	for kind, n := range f.Counts {
		out.SetCount(kind, n)
	}
	for _, fd := range f.Listed {
		c := fd.Credential
		item := v1alpha1.Finding{Kind: fd.Kind, AppID: c.AppID, AppDisplayName: c.AppDisplayName, Message: compose.Finding(obj, fd, h)}
		if fd.Kind != v1alpha1.FindingManySecrets {
			item.KeyID, item.Type, item.Source = c.KeyID, c.Type, c.Source
		}
		out.Items = append(out.Items, item)
	}
	return out
}
