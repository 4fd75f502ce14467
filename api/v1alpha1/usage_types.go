package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

	// UnusedAfter: an expiring credential that has not signed in for this long, while another
	// credential of the application is in use, is told once as unused ("let it expire or remove
	// it") instead of being reminded of until it ends.
	// +kubebuilder:default="90d"
	// +optional
	UnusedAfter Duration `json:"unusedAfter,omitempty"`

	// RetireWait is how long a rotation waits, after its new secret is put in use, for the old
	// secrets to stop signing in. Past it the rotation is held (RotationOldSecretInUse) and
	// alerted: something never moved to the new secret. Old secrets are retired only once the
	// report, read a day after the new secret was put in use, shows them quiet.
	// +kubebuilder:default="7d"
	// +optional
	RetireWait Duration `json:"retireWait,omitempty"`
}

// KeySignIn is a credential's last sign-in.
type KeySignIn struct {
	// KeyID is the credential's keyId.
	KeyID string `json:"keyID"`
	// LastSignIn is its last sign-in, as Graph's report gives it.
	LastSignIn metav1.Time `json:"lastSignIn"`
}
