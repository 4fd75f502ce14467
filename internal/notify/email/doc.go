// Package email is the email channel: it renders an alert as a text and an HTML part and delivers
// it through an SMTP relay with go-mail. It sends nothing unencrypted unless told to (NoTLS), never
// a password, and tells a failure worth retrying from one that needs the configuration changed.
package email
