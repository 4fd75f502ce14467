package v1alpha1

// Operation is something a watch does with an identity.
// +kubebuilder:validation:Enum=Watch;Rotate;ResetCluster;TenantScan;ReadOwners;FleetScan;ReadSignIns;ReadAuditLog;PublishKeyVault;PublishGitHub
type Operation string

const (
	// OperationWatch reads the credentials of the allowed applications, and the allowed AKS
	// clusters. Every identity allows it within its scope.
	OperationWatch Operation = "Watch"
	// OperationRotate adds and removes client secrets of the allowed applications, and writes
	// the new one to a Secret in the watch's namespace.
	OperationRotate Operation = "Rotate"
	// OperationResetCluster moves the allowed AKS clusters onto a new secret, restarting nodes.
	OperationResetCluster Operation = "ResetCluster"
	// OperationTenantScan lists every application and service principal of an allowed tenant.
	OperationTenantScan Operation = "TenantScan"
	// OperationReadOwners reads the owners of the allowed applications, their mail addresses
	// among them, to mail them.
	OperationReadOwners Operation = "ReadOwners"
	// OperationFleetScan lists the AKS clusters of the allowed subscriptions (or resource
	// groups): every cluster's resource ID, and the service principal each signs in with.
	OperationFleetScan Operation = "FleetScan"
	// OperationReadSignIns reads when each credential of the allowed applications last signed
	// in, from Graph's sign-in activity report (AuditLog.Read.All).
	OperationReadSignIns Operation = "ReadSignIns"
	// OperationReadAuditLog reads the directory audit log of the allowed applications
	// (AuditLog.Read.All), to say who added a credential credwatch did not.
	OperationReadAuditLog Operation = "ReadAuditLog"
	// OperationPublishKeyVault writes the new secret of a rotation of the allowed applications to
	// the Key Vaults allow.keyVaults lists, and disables the versions holding retired ones.
	OperationPublishKeyVault Operation = "PublishKeyVault"
	// OperationPublishGitHub sets, with a token from a Secret of the watch's namespace, the
	// GitHub Actions secrets of the repositories allow.githubRepositories lists to the new secret
	// of a rotation of the allowed applications.
	OperationPublishGitHub Operation = "PublishGitHub"
)
