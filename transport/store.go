package transport

import (
	"context"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
)

// Store is what the HTTP layer needs from a node; *node.Node implements it.
//
// Errors are mapped to HTTP status codes: node.ErrNotFound → 404,
// node.ErrInvalid → 400, node.ErrNoLeader (and any other error) → 503.
type Store interface {
	// PutLimit creates or replaces a limit with an already compiled config.
	PutLimit(ctx context.Context, name string, cfg bucket.Config) (fsm.PutResult, error)
	// DeleteLimit removes a limit.
	DeleteLimit(ctx context.Context, name string) (fsm.DeleteResult, error)
	// Limit is a linearizable read of one limit; node.ErrNotFound if absent.
	Limit(ctx context.Context, name string) (fsm.LimitInfo, error)
	// Limits returns every limit, sorted by name.
	Limits(ctx context.Context) ([]fsm.LimitInfo, error)
	// Reserve decides one reserve; node.ErrNotFound / node.ErrInvalid /
	// node.ErrNoLeader.
	Reserve(ctx context.Context, r fsm.Reserve) (fsm.ReserveResult, error)
	// Status is a point-in-time view of the node; it must not block.
	Status() node.Status
	// Join adds a voter to the raft configuration.
	Join(ctx context.Context, id, raftAddr string) error
	// Remove removes a server from the raft configuration.
	Remove(ctx context.Context, id string) error
}
