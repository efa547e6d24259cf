package node

import "github.com/permitd/permitd/fsm"

// TemplateStats returns every template with its live keys counted and
// their counters summed (fsm.FSM.TemplateStats), read from this node's
// state without going through the leader: for metrics and the status
// page.
func (n *Node) TemplateStats() []fsm.TemplateStats { return n.fsm.TemplateStats() }
