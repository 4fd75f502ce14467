// Package teams delivers alerts to a Microsoft Teams channel through a Workflows webhook ("Post to
// a channel when a webhook request is received"), as an Adaptive Card built from the same title,
// facts and fix every channel shows. The retired Office 365 connectors are not supported.
package teams
