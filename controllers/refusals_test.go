package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/azure/azurefake"
	"github.com/credwatch/credwatch/internal/graph"
)

// An Azure refusal reaches people with what the identity needs, as the client that was refused
// worded it: in the Ready or Rotating condition and in the event, not only in alerts.
func TestUnitRefusalsSayWhatIsMissing(t *testing.T) {
	refused := func(code, needs string) error {
		return fmt.Errorf("doing it: %w", &azerr.Error{Kind: azerr.KindForbidden, Status: 403, Code: code, Needs: needs, Err: errors.New(`{"error":{}}`)})
	}
	aksTarget := func(s *v1alpha1.CredentialWatchSpec) {
		s.Target = v1alpha1.Target{AKSCluster: &v1alpha1.AKSClusterTarget{TenantID: unitTenant, SubscriptionID: testSubscription, ResourceGroup: "rg", Name: "aks"}}
	}
	tests := map[string]struct {
		watch      *v1alpha1.CredentialWatch
		azure      *azurefake.Azure
		condition  string
		wantReason string
		want       string
	}{
		"reading the credentials": {
			watch: unitWatch(nil),
			azure: &azurefake.Azure{ApplicationFunc: func(azure.Identity, graph.AppRef) (graph.AppClient, error) {
				return &azurefake.App{ReadCredentialsFunc: func(context.Context) (graph.Snapshot, error) {
					return graph.Snapshot{}, refused("Authorization_RequestDenied", "Application.Read.All")
				}}, nil
			}},
			condition: v1alpha1.ConditionReady, wantReason: v1alpha1.ReasonAccessDenied,
			want: "access denied (HTTP 403, Authorization_RequestDenied); the identity needs Application.Read.All",
		},
		"reading the cluster": {
			watch: unitWatch(aksTarget),
			azure: &azurefake.Azure{ClusterFunc: func(azure.Identity, aks.ClusterRef) (aks.ClusterClient, error) {
				return &azurefake.Cluster{ReadFunc: func(context.Context) (aks.Cluster, error) {
					return aks.Cluster{}, refused("AuthorizationFailed", "Microsoft.ContainerService/managedClusters/read")
				}}, nil
			}},
			condition: v1alpha1.ConditionReady, wantReason: v1alpha1.ReasonAccessDenied,
			want: "access denied (HTTP 403, AuthorizationFailed); the identity needs Microsoft.ContainerService/managedClusters/read",
		},
		"adding the rotation's secret": {
			watch: rotatingWatch(v1alpha1.StepStarted, "a0e1"),
			azure: &azurefake.Azure{ApplicationFunc: func(azure.Identity, graph.AppRef) (graph.AppClient, error) {
				return &azurefake.App{
					ReadCredentialsFunc: func(context.Context) (graph.Snapshot, error) { return graph.Snapshot{AppID: unitApp}, nil },
					AddPasswordFunc: func(context.Context, string, time.Time) (graph.NewSecret, error) {
						return graph.NewSecret{}, refused("Authorization_RequestDenied", "Application.ReadWrite.OwnedBy as an owner of the application")
					},
				}, nil
			}},
			// A refusal retrying does not mend blocks the rotation, rather than trying every few minutes.
			condition: v1alpha1.ConditionRotating, wantReason: v1alpha1.ReasonRotationBlocked,
			want: "access denied (HTTP 403, Authorization_RequestDenied); the identity needs Application.ReadWrite.OwnedBy as an owner of the application",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			u := newUnit(t, tc.azure, tc.watch)
			w, _ := u.reconcile()
			c := meta.FindStatusCondition(w.Status.Conditions, tc.condition)
			if c == nil || c.Reason != tc.wantReason || !strings.Contains(c.Message, tc.want) {
				t.Errorf("%s = %+v, want reason %s and a message saying %q", tc.condition, c, tc.wantReason, tc.want)
			}
			events := u.events()
			found := false
			for _, e := range events {
				found = found || (strings.HasPrefix(e, "Warning") && strings.Contains(e, tc.want))
			}
			if !found {
				t.Errorf("events %q, want a warning saying %q", events, tc.want)
			}
		})
	}
}
