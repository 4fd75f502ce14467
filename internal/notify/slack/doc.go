// Package slack delivers alerts to Slack as Block Kit messages, either with a bot token through
// chat.postMessage or through an incoming webhook, using slack-go. Every message carries the plain
// notify.Text as its fallback, which is what notifications and screen readers show.
package slack
