// Package notify turns a credential's state into a message people act on and hands it to the
// channels a watch names: Slack, email, Microsoft Teams and a generic webhook each render the same
// Alert their own way, in their own subpackage. What was sent is not kept here: the controller
// records it in the watch's status, so a restarted operator does not send it again.
package notify
