// Package slacklog keeps what slack-go's slacktest server received through chat.postMessage:
// slacktest passes messages on only to a connected RTM client, so a Log keeps one connected.
package slacklog

import (
	"context"
	"strings"
	"sync"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slacktest"
)

// Message is one message posted: its channel and its first line, the alert's title.
type Message struct{ Channel, Title string }

// Log is the messages posted to a slacktest server since Listen.
type Log struct {
	mu   sync.Mutex
	msgs []Message
}

// Listen connects to srv until ctx ends, and keeps what is posted.
func Listen(ctx context.Context, srv *slacktest.Server) *Log {
	log := &Log{}
	rtm := slack.New("xoxb-slacklog-listener", slack.OptionAPIURL(srv.GetAPIURL())).NewRTM()
	go rtm.ManageConnection()
	go func() {
		for {
			select {
			case <-ctx.Done():
				_ = rtm.Disconnect()
				return
			case ev := <-rtm.IncomingEvents:
				if m, ok := ev.Data.(*slack.MessageEvent); ok {
					title, _, _ := strings.Cut(m.Text, "\n")
					log.mu.Lock()
					log.msgs = append(log.msgs, Message{Channel: m.Channel, Title: title})
					log.mu.Unlock()
				}
			}
		}
	}()
	return log
}

// All is the messages so far, in the order they arrived.
func (l *Log) All() []Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Message(nil), l.msgs...)
}
