// Package compose words the alerts of a CredentialWatch: from an alert policy planned and what
// the watch's status says, the facts every channel shows, the problem and the fix a person acts
// on. Events and conditions that tell the same thing borrow its phrases, so that a person reads
// the same words in chat, in mail and in kubectl.
package compose
