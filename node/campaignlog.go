package node

import (
	"time"

	"github.com/hashicorp/raft"
)

// campaignlog.go: a node that campaigns without winning (a quorum of its
// voters is not up, or cannot reach it) says so at INFO once in a while,
// with the term and the voters it needs, so that an operator who started
// one node of three sees why nothing happens. An election that a node
// wins at once logs nothing.

const (
	// campaignQuietFor is how long a node campaigns before it logs: a
	// normal election ends well within it.
	campaignQuietFor = 2 * time.Second
	// campaignLogEvery is the least time between two such lines.
	campaignLogEvery = 5 * time.Second
)

// campaignLog remembers when the current campaign began and when it was
// last logged. Only watchLeadership's goroutine uses it.
type campaignLog struct {
	since, logged time.Time
}

// due reports whether a node that is (campaigning) at now should log,
// and records it; a node that stops campaigning starts over.
func (c *campaignLog) due(campaigning bool, now time.Time) bool {
	if !campaigning {
		*c = campaignLog{}
		return false
	}
	if c.since.IsZero() {
		c.since = now
	}
	if now.Sub(c.since) < campaignQuietFor || (!c.logged.IsZero() && now.Sub(c.logged) < campaignLogEvery) {
		return false
	}
	c.logged = now
	return true
}

// logCampaign logs "no leader yet: campaigning" when this node has been a
// candidate without a leader for a while, at most every campaignLogEvery.
func (n *Node) logCampaign(c *campaignLog, now time.Time) {
	campaigning := n.raft.State() == raft.Candidate
	if !c.due(campaigning, now) {
		return
	}
	var voters []string
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				voters = append(voters, string(s.ID))
			}
		}
	}
	n.log.Info("no leader yet: campaigning; a leader needs the votes of a majority of the voters: start them or check the network",
		"term", n.raft.CurrentTerm(), "voters", voters, "votes_needed", len(voters)/2+1,
		"campaigning_for", now.Sub(c.since).Round(time.Second).String())
}
