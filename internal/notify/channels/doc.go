// Package channels builds the alert channels of a CredentialWatch from its spec, or from the
// operator's default channels when it names none, reading the tokens, webhook URLs and SMTP
// passwords from Kubernetes Secrets at the moment they are needed, so that a rotated Secret is
// used at once and no secret is kept in a spec, a status or a flag.
package channels
