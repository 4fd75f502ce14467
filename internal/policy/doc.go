// Package policy holds the decisions of credwatch as pure functions of a watch's spec, its status
// and the current time: what state a credential is in, when the next one changes state, when Graph
// is next read and how long to back off after a failure. Nothing here does I/O, so every rule is
// table-tested and the controllers only sequence.
package policy
