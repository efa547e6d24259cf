package server

import (
	"context"
	"io"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/api"
)

// Store is what the HTTP layer needs from a node; *node.Node implements it.
//
// Errors are mapped to HTTP status codes: node.ErrNotFound → 404,
// node.ErrInvalid → 400, node.ErrNoLeader (and any other error) → 503.
type Store interface {
	// PutLimit creates or replaces a limit with an already compiled
	// config and its shadow mode; a configuration the register does not
	// apply is node.ErrInvalid with its reason.
	PutLimit(ctx context.Context, p fsm.PutLimit) (fsm.PutResult, error)
	// DeleteLimit removes a limit; a leased limit whose leases hold
	// permits only with force (else node.ErrConflict).
	DeleteLimit(ctx context.Context, name string, force bool) (fsm.DeleteResult, error)
	// Limit is a linearizable read of one limit; node.ErrNotFound if absent.
	Limit(ctx context.Context, name string) (fsm.LimitInfo, error)
	// LimitsPage returns the page of limits q selects, sorted by name,
	// and whether more with q's prefix follow; an invalid q is
	// node.ErrInvalid.
	LimitsPage(ctx context.Context, q fsm.LimitsQuery) ([]fsm.LimitInfo, bool, error)
	// PutTemplate creates or replaces a template (validated); a template
	// the register does not take (too many) is a result with Detail.
	PutTemplate(ctx context.Context, t fsm.PutTemplate) (fsm.PutTemplateResult, error)
	// DeleteTemplate deletes the template of prefix (node.ErrNotFound if
	// there is none); its live keys stay until idle.
	DeleteTemplate(ctx context.Context, prefix string) (fsm.DeleteTemplateResult, error)
	// Template is a linearizable read of one active template;
	// node.ErrNotFound if there is none.
	Template(ctx context.Context, prefix string) (fsm.TemplateInfo, error)
	// Templates returns every template, sorted by prefix: the active
	// ones and the deleted ones whose keys still live (Deleted).
	Templates(ctx context.Context) ([]fsm.TemplateInfo, error)
	// Reserve decides one reserve; node.ErrNotFound / node.ErrInvalid /
	// node.ErrNoLeader. Refused, Busy and SessionExpired are results.
	Reserve(ctx context.Context, r fsm.Reserve) (fsm.ReserveResult, error)
	// OpenSession opens a client session for exactly-once reserves, for
	// o's owner within o's quota; a refused open (the register holds as
	// many sessions as it may) is a result with ID 0.
	OpenSession(ctx context.Context, o fsm.OpenSession) (fsm.SessionResult, error)
	// PutLeasePolicy makes a limit leased or linearized again; a policy
	// the register does not apply is node.ErrInvalid (or a result with
	// Applied false and Detail), an unknown limit node.ErrNotFound.
	PutLeasePolicy(ctx context.Context, p fsm.LeasePolicy) (fsm.LeasePolicyResult, error)
	// Lease, Renew and Return decide one lease command. Granted, Refused,
	// Fenced and Returned are results; an unknown limit is
	// node.ErrNotFound, an invalid command node.ErrInvalid.
	Lease(ctx context.Context, q fsm.Lease) (fsm.LeaseResult, error)
	Renew(ctx context.Context, q fsm.Renew) (fsm.LeaseResult, error)
	Return(ctx context.Context, q fsm.Return) (fsm.LeaseResult, error)
	// LeaseView is a linearizable read of a leased limit's pool and its
	// leases; node.ErrNotFound if absent, node.ErrInvalid if not leased.
	LeaseView(ctx context.Context, limit string) (fsm.LeasePoolInfo, []fsm.LeaseInfo, error)
	// Status is a point-in-time view of the node; it must not block.
	Status() api.Status
	// Join adds a server to the raft configuration as a non-voter (the
	// leader promotes it once it has caught up) and reports whether it
	// votes already (joined before and promoted).
	Join(ctx context.Context, id, raftAddr string) (voter bool, err error)
	// Remove removes a server from the raft configuration.
	Remove(ctx context.Context, id string) error
	// SaveSnapshot writes a consistent snapshot of the register's state
	// to w and returns the index it covers; only the leader takes one
	// (node.ErrNoLeader elsewhere).
	SaveSnapshot(ctx context.Context, w io.Writer) (uint64, error)
	// TransferLeadership hands the leadership to voter to (any if empty);
	// node.ErrNotFound for an unknown voter, node.ErrInvalid when it
	// cannot be done (to already leads, no other voter).
	TransferLeadership(ctx context.Context, to string) error
	// Settle settles a reservation (POST /v1/reservations/{id}/settle):
	// node.ErrNotFound (unknown or final), node.ErrForbidden (another
	// owner's), node.ErrConflict (already settled), node.ErrInvalid.
	Settle(ctx context.Context, c fsm.Settle) (fsm.SettleResult, error)
	// Release releases a reservation's in-flight permits; errors as
	// Settle's.
	Release(ctx context.Context, c fsm.Release) (fsm.ReleaseResult, error)
}
