package controllers

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/rotation"
)

// TestAdmission checks, through the real API server, that the CRD's OpenAPI and CEL rules turn
// nonsense away with a message a person can act on, and fill in the defaults.
func TestAdmission(t *testing.T) {
	needsAPIServer(t)
	ns := newNamespace(t)
	valid := func() v1alpha1.CredentialWatchSpec {
		return v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{
			TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47", ClientID: "3F2C8A5E-9B1D-4C6E-8F7A-2B4D6E8F0A1C"}}}
	}
	tests := map[string]struct {
		edit    func(*v1alpha1.CredentialWatchSpec)
		wantErr []string // substrings of the rejection; none means accepted
	}{
		"defaults": {edit: func(*v1alpha1.CredentialWatchSpec) {}},
		"durations as people write them": {edit: func(s *v1alpha1.CredentialWatchSpec) {
			s.CheckInterval, s.Thresholds = "90m", v1alpha1.Thresholds{Warning: "2w", Critical: "72h"}
		}},
		"tenant that is not a GUID": {
			edit:    func(s *v1alpha1.CredentialWatchSpec) { s.Target.ServicePrincipal.TenantID = "contoso.onmicrosoft.com" },
			wantErr: []string{"spec.target.servicePrincipal.tenantID", "tenantID must be the directory's GUID"},
		},
		"client ID that is not a GUID": {
			edit:    func(s *v1alpha1.CredentialWatchSpec) { s.Target.ServicePrincipal.ClientID = "aks-prod-sp" },
			wantErr: []string{"spec.target.servicePrincipal.clientID", "clientID must be the application's appId, a GUID"},
		},
		"no target": {
			edit:    func(s *v1alpha1.CredentialWatchSpec) { s.Target.ServicePrincipal = nil },
			wantErr: []string{"target must set exactly one of: servicePrincipal, aksCluster, tenantScan"},
		},
		"a tenant scan with a filter": {edit: func(s *v1alpha1.CredentialWatchSpec) {
			s.Target = v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47", Filter: "tags/any(t:t eq 'aks')"}}
		}},
		"a tenant scan and a service principal": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target.TenantScan = &v1alpha1.TenantScanTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47"}
			},
			wantErr: []string{"target must set exactly one of"},
		},
		"a tenant scan that rotates": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47"}}
				s.Rotation = &v1alpha1.Rotation{}
			},
			wantErr: []string{"rotation needs a servicePrincipal or aksCluster target"},
		},
		"a tenant scan with alerts": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47"}}
				s.Alerts = &v1alpha1.Alerts{}
			},
			wantErr: []string{"alerts need a servicePrincipal or aksCluster target", "credwatch_credential_expiration_timestamp_seconds"},
		},
		"a fleet of every subscription": {edit: func(s *v1alpha1.CredentialWatchSpec) {
			s.Target = v1alpha1.Target{AKSFleet: &v1alpha1.AKSFleetTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47"}}
		}},
		"a fleet narrowed": {edit: func(s *v1alpha1.CredentialWatchSpec) {
			s.Target = v1alpha1.Target{AKSFleet: &v1alpha1.AKSFleetTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47",
				Subscriptions: []string{"8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918"}, ResourceGroups: []string{"rg-prod(eu)"}, Tags: map[string]string{"env": "prod", "aks": ""}}}
		}},
		"a fleet and a service principal": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target.AKSFleet = &v1alpha1.AKSFleetTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47"}
			},
			wantErr: []string{"target must set exactly one of: servicePrincipal, aksCluster, tenantScan, serviceAccountIssuer, aksFleet"},
		},
		"a fleet of subscriptions by name": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{AKSFleet: &v1alpha1.AKSFleetTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47", Subscriptions: []string{"Production"}}}
			},
			wantErr: []string{"aksFleet.subscriptions must be subscription GUIDs, not names"},
		},
		"a fleet that rotates": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{AKSFleet: &v1alpha1.AKSFleetTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47"}}
				s.Rotation = &v1alpha1.Rotation{}
			},
			wantErr: []string{"a fleet watch rotates nothing", "write an aksCluster watch"},
		},
		"a fleet that creates watches": {edit: func(s *v1alpha1.CredentialWatchSpec) {
			s.Target = v1alpha1.Target{AKSFleet: &v1alpha1.AKSFleetTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47",
				CreateWatches: &v1alpha1.FleetWatchTemplate{Rotation: &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "aks-sp"}}}}}
		}},
		"a fleet whose watches' secret prefix is too long": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{AKSFleet: &v1alpha1.AKSFleetTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47",
					CreateWatches: &v1alpha1.FleetWatchTemplate{Rotation: &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: strings.Repeat("s", 243)}}}}}
			},
			wantErr: []string{"createWatches.rotation.secretRef.name is a prefix", "at most 242 characters"},
		},
		"a fleet with alerts": {edit: func(s *v1alpha1.CredentialWatchSpec) {
			s.Target = v1alpha1.Target{AKSFleet: &v1alpha1.AKSFleetTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47"}}
			s.Alerts = &v1alpha1.Alerts{Email: &v1alpha1.EmailAlerts{To: []string{"platform@example.com"}, SMTP: v1alpha1.SMTPServer{Host: "smtp.example", From: "c@example.com"}}}
		}},
		"the cluster's service-account issuer": {edit: func(s *v1alpha1.CredentialWatchSpec) {
			s.Target = v1alpha1.Target{ServiceAccountIssuer: &v1alpha1.ServiceAccountIssuerTarget{Endpoints: []string{"https://10.0.0.4:6443", "https://[fd00::4]:6443"}}}
		}},
		"an issuer target that rotates": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{ServiceAccountIssuer: &v1alpha1.ServiceAccountIssuerTarget{}}
				s.Rotation = &v1alpha1.Rotation{}
			},
			wantErr: []string{"a serviceAccountIssuer target has no Azure credential"},
		},
		"an issuer endpoint with a path": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{ServiceAccountIssuer: &v1alpha1.ServiceAccountIssuerTarget{Endpoints: []string{"https://10.0.0.4:6443/openid/v1/jwks"}}}
			},
			wantErr: []string{"endpoints are API server addresses such as https://10.0.0.4:6443"},
		},
		"a hygiene policy of its own": {edit: func(s *v1alpha1.CredentialWatchSpec) {
			five := int32(5)
			s.Hygiene = &v1alpha1.Hygiene{MaxLifetime: "365d", MaxLiveSecrets: &five}
		}},
		"a hygiene lifetime of an hour": {
			edit:    func(s *v1alpha1.CredentialWatchSpec) { s.Hygiene = &v1alpha1.Hygiene{MaxLifetime: "1h"} },
			wantErr: []string{"hygiene.maxLifetime must be at least 1d"},
		},
		"no live secret allowed": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				none := int32(0)
				s.Hygiene = &v1alpha1.Hygiene{MaxLiveSecrets: &none}
			},
			wantErr: []string{"spec.hygiene.maxLiveSecrets", "should be greater than or equal to 1"},
		},
		"hygiene of an issuer": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{ServiceAccountIssuer: &v1alpha1.ServiceAccountIssuerTarget{}}
				s.Hygiene = &v1alpha1.Hygiene{}
			},
			wantErr: []string{"hygiene needs a target with Azure credentials"},
		},
		"hygiene of a fleet": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{AKSFleet: &v1alpha1.AKSFleetTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47"}}
				s.Hygiene = &v1alpha1.Hygiene{}
			},
			wantErr: []string{"a fleet reports no findings itself"},
		},
		"owner digests of a tenant scan": {edit: func(s *v1alpha1.CredentialWatchSpec) {
			s.Target = v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47", OwnerDigests: &v1alpha1.OwnerDigests{
				Email:    v1alpha1.DigestEmail{SMTP: v1alpha1.SMTPServer{Host: "smtp.example.com", From: "credwatch@example.com"}},
				Schedule: v1alpha1.DigestSchedule{Weekday: "Friday", Time: "17:30", TimeZone: "Europe/Berlin"}, Within: "45d", OptOutTag: "credwatch-no-digest",
			}}}
		}},
		"owner digests with a fallback that is not an address": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47", OwnerDigests: &v1alpha1.OwnerDigests{
					Email: v1alpha1.DigestEmail{Fallback: []string{"platform team"}, SMTP: v1alpha1.SMTPServer{Host: "smtp.example.com", From: "credwatch@example.com"}}}}}
			},
			wantErr: []string{"spec.target.tenantScan.ownerDigests.email.fallback", "fallback must list mail addresses"},
		},
		"an opt-out tag that is a sentence": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47", OwnerDigests: &v1alpha1.OwnerDigests{
					Email:     v1alpha1.DigestEmail{SMTP: v1alpha1.SMTPServer{Host: "smtp.example.com", From: "credwatch@example.com"}},
					OptOutTag: "https://evil.example/reset"}}}
			},
			wantErr: []string{"optOutTag must be one word"},
		},
		"a daily digest on a weekday": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47", OwnerDigests: &v1alpha1.OwnerDigests{
					Email:    v1alpha1.DigestEmail{SMTP: v1alpha1.SMTPServer{Host: "smtp.example.com", From: "credwatch@example.com"}},
					Schedule: v1alpha1.DigestSchedule{Every: v1alpha1.EveryDay, Weekday: "Monday"}}}}
			},
			wantErr: []string{"schedule.weekday is for every: Week"},
		},
		"a digest at 9am": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47", OwnerDigests: &v1alpha1.OwnerDigests{
					Email:    v1alpha1.DigestEmail{SMTP: v1alpha1.SMTPServer{Host: "smtp.example.com", From: "credwatch@example.com"}},
					Schedule: v1alpha1.DigestSchedule{Time: "9am", TimeZone: "Central European Time"}}}}
			},
			wantErr: []string{"schedule.time must be HH:MM", "schedule.timeZone must be an IANA time zone name"},
		},
		"image pulls of a tenant scan": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47"}}
				s.ImagePulls = &v1alpha1.ImagePulls{Registries: []string{"myacr.azurecr.io"}}
			},
			wantErr: []string{"imagePulls needs a servicePrincipal or aksCluster target"},
		},
		"image pulls of a registry given as an image": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.ImagePulls = &v1alpha1.ImagePulls{Registries: []string{"myacr.azurecr.io/shop"}}
			},
			wantErr: []string{"spec.imagePulls.registries", "registries are registry hosts or host patterns", "no path"},
		},
		"image pulls of registries by pattern": {edit: func(s *v1alpha1.CredentialWatchSpec) {
			s.ImagePulls = &v1alpha1.ImagePulls{Registries: []string{"*.azurecr.cn", "registry.example.com:5000"}}
		}},
		"sign-ins of a tenant scan": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47"}}
				s.Usage = &v1alpha1.Usage{SignIns: true}
			},
		},
		"sign-ins of a fleet": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{AKSFleet: &v1alpha1.AKSFleetTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47"}}
				s.Usage = &v1alpha1.Usage{SignIns: true}
			},
		},
		"sign-ins of an issuer": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{ServiceAccountIssuer: &v1alpha1.ServiceAccountIssuerTarget{}}
				s.Usage = &v1alpha1.Usage{SignIns: true}
			},
			wantErr: []string{"spec.usage reads the sign-ins of Entra ID credentials, which a serviceAccountIssuer target has none of"},
		},
		"sign-ins of a service principal": {edit: func(s *v1alpha1.CredentialWatchSpec) { s.Usage = &v1alpha1.Usage{SignIns: true, ActiveWithin: "3d"} }},
		"image pulls without registries": {
			edit:    func(s *v1alpha1.CredentialWatchSpec) { s.ImagePulls = &v1alpha1.ImagePulls{} },
			wantErr: []string{"imagePulls.registries must name the registries this service principal signs in to, such as [myacr.azurecr.io]"},
		},
		"a tenant scan filter of two lines": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Target = v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47", Filter: "displayName eq 'a'\nor displayName eq 'b'"}}
			},
			wantErr: []string{"filter must be one line of OData"},
		},
		"an AKS cluster": {edit: func(s *v1alpha1.CredentialWatchSpec) { s.Target = v1alpha1.Target{AKSCluster: aksTarget()} }},
		"both a service principal and an AKS cluster": {
			edit:    func(s *v1alpha1.CredentialWatchSpec) { s.Target.AKSCluster = aksTarget() },
			wantErr: []string{"target must set exactly one of: servicePrincipal, aksCluster, tenantScan"},
		},
		"AKS resource group with a slash": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				c := aksTarget()
				c.ResourceGroup = "rg/prod"
				s.Target = v1alpha1.Target{AKSCluster: c}
			},
			wantErr: []string{"resourceGroup must be a resource group name"},
		},
		"AKS cluster name ending in a dash": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				c := aksTarget()
				c.Name = "aks-"
				s.Target = v1alpha1.Target{AKSCluster: c}
			},
			wantErr: []string{"name must be an AKS cluster name"},
		},
		"critical longer than warning": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Thresholds = v1alpha1.Thresholds{Warning: "7d", Critical: "2w"}
			},
			wantErr: []string{"thresholds.critical must be shorter than thresholds.warning"},
		},
		"critical equal to warning, in other units": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Thresholds = v1alpha1.Thresholds{Warning: "1w", Critical: "168h"}
			},
			wantErr: []string{"thresholds.critical must be shorter than thresholds.warning"},
		},
		"duration in words": {
			edit:    func(s *v1alpha1.CredentialWatchSpec) { s.Thresholds.Warning = "30 days" },
			wantErr: []string{"spec.thresholds.warning", "must be a whole number and one unit"},
		},
		"compound duration": {
			edit:    func(s *v1alpha1.CredentialWatchSpec) { s.CheckInterval = "1h30m" },
			wantErr: []string{"spec.checkInterval", "must be a whole number and one unit"},
		},
		"check interval under a minute": {
			edit:    func(s *v1alpha1.CredentialWatchSpec) { s.CheckInterval = "30s" },
			wantErr: []string{"checkInterval must be at least 1m"},
		},
		"check interval over a week": {
			edit:    func(s *v1alpha1.CredentialWatchSpec) { s.CheckInterval = "2w" },
			wantErr: []string{"checkInterval must be at most 7d"},
		},
		"a credential Secret, the way before identities": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.AzureCredentialRef = &corev1.LocalObjectReference{Name: "graph-reader"}
			},
			wantErr: []string{"azureCredentialRef was removed", "create an AzureIdentity", "set spec.identityRef"},
		},
		"an identity of no known kind": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.IdentityRef = &v1alpha1.IdentityRef{Kind: "Secret", Name: "x"}
			},
			wantErr: []string{"spec.identityRef.kind", "AzureIdentity", "ClusterAzureIdentity"},
		},
		"alerts: slack with both a token and a webhook": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				ref := &v1alpha1.SecretKeyRef{Name: "slack", Key: "k"}
				s.Alerts = &v1alpha1.Alerts{Slack: &v1alpha1.SlackAlerts{Channel: "#ops", TokenSecretRef: ref, WebhookSecretRef: ref}}
			},
			wantErr: []string{"slack needs exactly one of tokenSecretRef (with channel) or webhookSecretRef"},
		},
		"alerts: slack token without a channel": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Alerts = &v1alpha1.Alerts{Slack: &v1alpha1.SlackAlerts{TokenSecretRef: &v1alpha1.SecretKeyRef{Name: "slack", Key: "k"}}}
			},
			wantErr: []string{"slack.channel is required with tokenSecretRef"},
		},
		"alerts: email to nobody": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Alerts = &v1alpha1.Alerts{Email: &v1alpha1.EmailAlerts{SMTP: v1alpha1.SMTPServer{Host: "smtp.example", From: "c@example.com"}}}
			},
			wantErr: []string{"email needs recipients in to, or notifyOwners: true"},
		},
		"alerts: a reminder that is not a duration": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Alerts = &v1alpha1.Alerts{RemindBefore: []v1alpha1.Duration{"30d", "a week"}}
			},
			wantErr: []string{"spec.alerts.remindBefore[1]", "must be a whole number and one unit"},
		},
		"alerts: a severity of added credentials that is none": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Alerts = &v1alpha1.Alerts{CredentialAddedSeverity: "urgent"}
			},
			wantErr: []string{"spec.alerts.credentialAddedSeverity", `supported values: "info", "warning", "critical"`},
		},
		"alerts: email and webhook, with defaults filled in": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Alerts = &v1alpha1.Alerts{
					Email:   &v1alpha1.EmailAlerts{To: []string{"platform@example.com"}, SMTP: v1alpha1.SMTPServer{Host: "smtp.example", From: "c@example.com"}},
					Webhook: &v1alpha1.WebhookAlerts{URLSecretRef: v1alpha1.SecretKeyRef{Name: "hook", Key: "url"}},
				}
			},
		},
		"rotation with defaults": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp"}}
			},
		},
		"rotation publishing to a Key Vault": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp"},
					Publish: []v1alpha1.PublishSink{{KeyVault: &v1alpha1.KeyVaultSink{VaultURL: "https://payments-kv.vault.azure.net/", SecretName: "payments-sp"}}}}
			},
		},
		"rotation: a publish sink that names none": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp"}, Publish: []v1alpha1.PublishSink{{}}}
			},
			wantErr: []string{"a publish sink names exactly one place it writes: keyVault"},
		},
		"rotation publishing to GitHub Actions": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp"},
					Publish: []v1alpha1.PublishSink{{GitHubActions: &v1alpha1.GitHubActionsSink{Owner: "contoso", Repo: "deploy", Environment: "production",
						SecretName: "AZURE_CLIENT_SECRET", TokenSecretRef: v1alpha1.SecretKeyRef{Name: "gh", Key: "token"}}}}}
			},
		},
		"rotation: a GitHub token that is the client secret's own Secret": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp"},
					Publish: []v1alpha1.PublishSink{{GitHubActions: &v1alpha1.GitHubActionsSink{Owner: "contoso", Repo: "deploy",
						SecretName: "AZURE_CLIENT_SECRET", TokenSecretRef: v1alpha1.SecretKeyRef{Name: "sp", Key: "clientSecret"}}}}}
			},
			wantErr: []string{"tokenSecretRef must not name rotation.secretRef's Secret"},
		},
		"rotation: a GitHub secret name GitHub refuses": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp"},
					Publish: []v1alpha1.PublishSink{{GitHubActions: &v1alpha1.GitHubActionsSink{Owner: "contoso", Repo: "deploy",
						SecretName: "github_token", TokenSecretRef: v1alpha1.SecretKeyRef{Name: "gh", Key: "token"}}}}}
			},
			wantErr: []string{"githubActions.secretName must be letters, digits and '_', not starting with a digit or GITHUB_"},
		},
		"rotation: a GitHub repository or environment that is a dot segment": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp"},
					Publish: []v1alpha1.PublishSink{{GitHubActions: &v1alpha1.GitHubActionsSink{Owner: "contoso", Repo: "..", Environment: ".",
						SecretName: "AZURE_CLIENT_SECRET", TokenSecretRef: v1alpha1.SecretKeyRef{Name: "gh", Key: "token"}}}}}
			},
			wantErr: []string{"githubActions.repo must be a repository name", "githubActions.environment must be an environment's name"},
		},
		"rotation: a Key Vault secret name Key Vault refuses": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp"},
					Publish: []v1alpha1.PublishSink{{KeyVault: &v1alpha1.KeyVaultSink{VaultURL: "http://payments-kv.vault.azure.net/", SecretName: "payments_sp"}}}}
			},
			wantErr: []string{"keyVault.vaultURL must be the vault's URL", "keyVault.secretName must be 1 to 127 letters, digits and '-'"},
		},
		"rotation: a vault that is no Key Vault": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp"},
					Publish: []v1alpha1.PublishSink{{KeyVault: &v1alpha1.KeyVaultSink{VaultURL: "https://169.254.169.254/", SecretName: "sp"}}}}
			},
			wantErr: []string{"keyVault.vaultURL must be the vault's URL"},
		},
		"rotation: rotateBefore not shorter than validity": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp"}, RotateBefore: "400d", Validity: "365d"}
			},
			wantErr: []string{"rotation.rotateBefore must be shorter than rotation.validity"},
		},
		"rotation: a secret longer than Graph issues": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp"}, Validity: "3y"}
			},
			wantErr: []string{"must be a whole number and one unit"},
		},
		"rotation: validity over 730d": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp"}, Validity: "800d"}
			},
			wantErr: []string{"rotation.validity must be at most 730d"},
		},
		"rotation: a window that starts at 25:00": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp"},
					MaintenanceWindow: &v1alpha1.MaintenanceWindow{Start: "25:00", Duration: "2h"}}
			},
			wantErr: []string{"start must be HH:MM on a 24-hour clock"},
		},
		"rotation: a secret that lasts two minutes": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp"}, Validity: "2m", RotateBefore: "1m"}
			},
			wantErr: []string{"rotation.validity must be at least 1d", "rotation.rotateBefore must be at least 1h"},
		},
		"rotation: no grace for consumers": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp"}, GracePeriod: "0s"}
			},
			wantErr: []string{"rotation.gracePeriod must be at least 1h"},
		},
		"rotation: a window too short for a reset": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp"},
					MaintenanceWindow: &v1alpha1.MaintenanceWindow{Start: "02:00", Duration: "0s"}}
			},
			wantErr: []string{"duration must be at least 30m"},
		},
		"rotation: a Secret no API server would store": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "Payments_SP"}}
			},
			wantErr: []string{"secretRef.name must be a Secret name"},
		},
		"rotation: the shortest it allows": {
			edit: func(s *v1alpha1.CredentialWatchSpec) {
				s.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "payments.sp-1"}, Validity: "1d", RotateBefore: "1h", GracePeriod: "60m",
					MaintenanceWindow: &v1alpha1.MaintenanceWindow{Start: "02:00", Duration: "30m"}}
			},
		},
		"threshold beyond ten years": {
			edit:    func(s *v1alpha1.CredentialWatchSpec) { s.Thresholds.Warning = "999999w" },
			wantErr: []string{"must be at most 3650d"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{GenerateName: "w-", Namespace: ns}, Spec: valid()}
			tc.edit(&w.Spec)
			err := k8s.Create(context.Background(), w)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if name == "defaults" && (w.Spec.CheckInterval != "6h" || w.Spec.Thresholds.Warning != "30d" || w.Spec.Thresholds.Critical != "7d") {
					t.Errorf("defaults = %q, %+v; want 6h, 30d, 7d", w.Spec.CheckInterval, w.Spec.Thresholds)
				}
				if r := w.Spec.Rotation; name == "rotation with defaults" && (r.Mode != v1alpha1.RotationApply || r.RotateBefore != "30d" || r.Validity != "365d" ||
					r.GracePeriod != "7d" || r.RemoveOld != v1alpha1.RemoveOldCreatedByCredwatch) {
					t.Errorf("rotation defaults = %+v; want Apply, 30d, 365d, 7d, CreatedByCredwatch", r)
				}
				if a := w.Spec.Alerts; a != nil && (a.Email.SMTP.Port != 587 || a.Email.SMTP.TLS != v1alpha1.SMTPStartTLS ||
					len(a.RemindBefore) != 5 || a.CheckFailureAfter != "1h" || a.UseDefaultChannels == nil || !*a.UseDefaultChannels || a.CredentialAddedSeverity != "warning") {
					t.Errorf("alert defaults = %+v; want port 587, StartTLS, five reminders, 1h, default channels on, added credentials a warning", a)
				}
				if p := w.Spec.ImagePulls; p != nil && (len(p.Registries) == 0 || p.PodRegistries == nil || *p.PodRegistries) {
					t.Errorf("image pulls = %+v, want the default registries, and not the pods' registries", p)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted, want a rejection")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("rejection %q does not say %q", err, want)
				}
			}
			// One message per mistake: a malformed value must not also trip a rule that reads it.
			for _, noise := range []string{"evaluating rule", "evaluation error", "no such overload", "conversion error", "should match"} {
				if strings.Contains(err.Error(), noise) {
					t.Errorf("rejection %q shows the user %q", err, noise)
				}
			}
		})
	}
}

func aksTarget() *v1alpha1.AKSClusterTarget {
	return &v1alpha1.AKSClusterTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47", SubscriptionID: "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918",
		ResourceGroup: "rg-prod.weu_(1)", Name: "aks-prod"}
}

// TestIdentityAdmission: the API server refuses identities that sign in no way or two ways, hand
// out the operator's identity from a namespace, or allow nonsense, saying what to write.
func TestIdentityAdmission(t *testing.T) {
	needsAPIServer(t)
	ns := newNamespace(t)
	const tenant, appID = "72f988bf-86f1-41af-91ab-2d7cd011db47", "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c"
	secret := func() v1alpha1.IdentitySpec {
		return v1alpha1.IdentitySpec{ClientSecret: &v1alpha1.ClientSecretSignIn{TenantID: tenant, ClientID: appID,
			SecretRef: v1alpha1.SecretKeyRef{Name: "s", Key: "clientSecret"}}}
	}
	for name, tc := range map[string]struct {
		cluster bool
		spec    func() v1alpha1.IdentitySpec
		wantErr []string
	}{
		"a client secret": {spec: secret},
		"a workload identity": {spec: func() v1alpha1.IdentitySpec {
			return v1alpha1.IdentitySpec{WorkloadIdentity: &v1alpha1.WorkloadIdentitySignIn{TenantID: tenant, ClientID: appID, ServiceAccountRef: v1alpha1.LocalRef{Name: "graph"}}}
		}},
		"no way to sign in": {spec: func() v1alpha1.IdentitySpec { return v1alpha1.IdentitySpec{} },
			wantErr: []string{"set exactly one of workloadIdentity, clientSecret, clientCertificate"}},
		"two ways": {spec: func() v1alpha1.IdentitySpec {
			s := secret()
			s.ClientCertificate = &v1alpha1.ClientCertificateSignIn{TenantID: tenant, ClientID: appID, SecretRef: v1alpha1.LocalRef{Name: "tls"}}
			return s
		}, wantErr: []string{"set exactly one of"}},
		"the operator's identity, from a namespace": {spec: func() v1alpha1.IdentitySpec {
			return v1alpha1.IdentitySpec{Operator: &v1alpha1.OperatorSignIn{}, Allow: v1alpha1.IdentityAllow{Tenants: []string{tenant}}}
		}, wantErr: []string{"an AzureIdentity cannot sign in as the operator", "ClusterAzureIdentity"}},
		"the operator's identity, cluster-wide": {cluster: true, spec: func() v1alpha1.IdentitySpec {
			return v1alpha1.IdentitySpec{Operator: &v1alpha1.OperatorSignIn{}, Allow: v1alpha1.IdentityAllow{Tenants: []string{tenant}}}
		}},
		"the operator's identity in any tenant": {cluster: true, spec: func() v1alpha1.IdentitySpec {
			return v1alpha1.IdentitySpec{Operator: &v1alpha1.OperatorSignIn{}}
		}, wantErr: []string{"must list allow.tenants"}},
		"every application and some": {spec: func() v1alpha1.IdentitySpec {
			s := secret()
			s.Allow.Applications = []string{"*", appID}
			return s
		}, wantErr: []string{`either ["*"] for every application or a list of appIds`}},
		"an application by name": {spec: func() v1alpha1.IdentitySpec {
			s := secret()
			s.Allow.Applications = []string{"payments-api"}
			return s
		}, wantErr: []string{"allow.applications must be appIds (GUIDs)"}},
		"every operation": {spec: func() v1alpha1.IdentitySpec {
			s := secret()
			s.Allow.Operations = []v1alpha1.Operation{v1alpha1.OperationWatch, v1alpha1.OperationRotate, v1alpha1.OperationResetCluster, v1alpha1.OperationTenantScan,
				v1alpha1.OperationReadOwners, v1alpha1.OperationFleetScan, v1alpha1.OperationReadSignIns, v1alpha1.OperationReadAuditLog}
			return s
		}},
		"a Key Vault by name": {spec: func() v1alpha1.IdentitySpec {
			s := secret()
			s.Allow.Operations, s.Allow.KeyVaults = []v1alpha1.Operation{v1alpha1.OperationPublishKeyVault}, []string{"payments-kv"}
			return s
		}, wantErr: []string{"allow.keyVaults must be vault URLs, such as https://payments-kv.vault.azure.net/"}},
		"GitHub repositories": {spec: func() v1alpha1.IdentitySpec {
			s := secret()
			s.Allow.Operations = []v1alpha1.Operation{v1alpha1.OperationPublishGitHub}
			s.Allow.GitHubRepositories = []string{"https://github.com/contoso/deploy", "https://ghe.contoso.com:8443/platform/*"}
			return s
		}},
		"a GitHub repository by name": {spec: func() v1alpha1.IdentitySpec {
			s := secret()
			s.Allow.Operations, s.Allow.GitHubRepositories = []v1alpha1.Operation{v1alpha1.OperationPublishGitHub}, []string{"contoso/deploy"}
			return s
		}, wantErr: []string{"allow.githubRepositories must be repository URLs, such as https://github.com/contoso/deploy"}},
		"an operation of no known kind": {spec: func() v1alpha1.IdentitySpec {
			s := secret()
			s.Allow.Operations = []v1alpha1.Operation{"Delete"}
			return s
		}, wantErr: []string{"Unsupported value", "Rotate"}},
	} {
		t.Run(name, func(t *testing.T) {
			var obj client.Object
			if tc.cluster {
				obj = &v1alpha1.ClusterAzureIdentity{ObjectMeta: metav1.ObjectMeta{GenerateName: "id-"}, Spec: v1alpha1.ClusterAzureIdentitySpec{IdentitySpec: tc.spec()}}
			} else {
				obj = &v1alpha1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{GenerateName: "id-", Namespace: ns}, Spec: v1alpha1.AzureIdentitySpec{IdentitySpec: tc.spec()}}
			}
			err := k8s.Create(context.Background(), obj)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				_ = k8s.Delete(context.Background(), obj)
				return
			}
			if err == nil {
				t.Fatal("accepted, want a rejection")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("rejection %q does not say %q", err, want)
				}
			}
		})
	}
}

// A watch's secretRef cannot name the Secret its rotations stage new secrets in.
func TestAdmissionRefusesTheStagingSecretAsTarget(t *testing.T) {
	needsAPIServer(t)
	w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Name: "payments", Namespace: newNamespace(t)},
		Spec: v1alpha1.CredentialWatchSpec{
			Target:   v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{TenantID: tenantID, ClientID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c"}},
			Rotation: &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: rotation.StagingName("payments")}},
		}}
	err := k8s.Create(context.Background(), w)
	if err == nil || !strings.Contains(err.Error(), "must not be credwatch-rotation-<the watch's name>") {
		t.Fatalf("created with the staging Secret as target: %v", err)
	}
	w.Spec.Rotation.SecretRef.Name = "payments-sp"
	if err := k8s.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
}

// A fleet that creates watches names them after itself: its name leaves room for the hash, and
// its template's Secret prefix is not the Secret its watches stage new secrets in, and its
// template publishes nowhere, where every cluster's watch would write its own secret.
func TestAdmissionOfAFleetThatCreatesWatches(t *testing.T) {
	needsAPIServer(t)
	ns := newNamespace(t)
	fleet := func(name, prefix string) *v1alpha1.CredentialWatch {
		return &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{AKSFleet: &v1alpha1.AKSFleetTarget{TenantID: tenantID,
				CreateWatches: &v1alpha1.FleetWatchTemplate{Rotation: &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: prefix}}}}}}}
	}
	for _, tc := range []struct {
		name, prefix, wantErr string
	}{
		{strings.Repeat("f", 243), "aks-sp", "its own name may be at most 242 characters"},
		{"fleet", rotation.StagingName("fleet"), "must not be credwatch-rotation-<the fleet's name>"},
		{strings.Repeat("f", 242), "aks-sp", ""},
		{"publishing", "aks-sp", "createWatches.rotation.publish is not supported"},
	} {
		obj := fleet(tc.name, tc.prefix)
		if tc.name == "publishing" {
			obj.Spec.Target.AKSFleet.CreateWatches.Rotation.Publish = []v1alpha1.PublishSink{{KeyVault: &v1alpha1.KeyVaultSink{VaultURL: "https://payments-kv.vault.azure.net/", SecretName: "aks-sp"}}}
		}
		err := k8s.Create(context.Background(), obj)
		if tc.wantErr == "" && err != nil {
			t.Errorf("fleet %.10s… with prefix %s refused: %v", tc.name, tc.prefix, err)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("fleet %.10s… with prefix %s: %v, want %q", tc.name, tc.prefix, err, tc.wantErr)
		}
	}
}
