package v1alpha1

// Usage is what a watch reads of its credentials' use.
type Usage struct {
	// SignIns reads when each credential last signed in, at most once an hour, from Graph's
	// beta report (the identity needs ReadSignIns and AuditLog.Read.All; the tenant, Entra ID P1
	// or P2; global cloud only). Status shows each credential's lastSignIn and inUse.
	// +optional
	SignIns bool `json:"signIns,omitempty"`

	// ActiveWithin is how recent a sign-in makes a credential in use.
	// +kubebuilder:default="7d"
	// +optional
	ActiveWithin Duration `json:"activeWithin,omitempty"`
}
