package relay

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/wire"
)

// Upstream sends a batch of lease commands to the register
// (*client.Client with client.WithBinaryLeases implements it): each
// command's answer in order, or an error when no answer came back.
type Upstream interface {
	LeaseBatch(ctx context.Context, calls []wire.LeaseCall) ([]wire.LeaseAnswer, error)
}

// Defaults of Config.
const (
	// DefaultMaxInFlight is the batches with the register at once: one,
	// so that the commands of a busy host wait for one round trip and
	// leave together.
	DefaultMaxInFlight = 1
	// DefaultMaxQueue bounds the commands waiting for a batch.
	DefaultMaxQueue = 8 * wire.MaxLeaseBatch
	// DefaultBatchTimeout bounds one batch's call to the register, its
	// failover included.
	DefaultBatchTimeout = 10 * time.Second
)

// ErrRelay prefixes the relay's configuration errors.
var ErrRelay = errors.New("relay")

// Config configures a Relay.
type Config struct {
	// Upstream is the register (required).
	Upstream Upstream
	// TLS, if not nil, serves the workers' connections over TLS.
	TLS *tls.Config
	// Tokens, if not nil, requires every connection to authenticate with
	// a worker (or admin) token first (wire.OpAuth).
	Tokens *auth.TokenStore
	// MaxInFlight bounds the batches with the register at once (0:
	// DefaultMaxInFlight; 1 to 64).
	MaxInFlight int
	// MaxQueue bounds the commands waiting (0: DefaultMaxQueue; at least
	// wire.MaxLeaseBatch).
	MaxQueue int
	// BatchTimeout bounds one batch's call (0: DefaultBatchTimeout).
	BatchTimeout time.Duration
	// Logger logs connection failures at debug level (nil: none).
	Logger hclog.Logger
}

// Stats are a relay's counters since it started.
type Stats struct {
	// Commands counts the lease commands received and queued.
	Commands uint64
	// Batches counts the batch calls sent to the register, BatchedCommands
	// the commands they carried.
	Batches, BatchedCommands uint64
	// FailedBatches counts the batches the register did not answer (their
	// commands answered CodeNoLeader).
	FailedBatches uint64
	// Refused counts the commands answered by the relay itself: invalid,
	// unauthenticated, forbidden or shed (queue full).
	Refused uint64
	// Conns is the workers' connections open now, Queued the commands
	// waiting for a batch now.
	Conns  int64
	Queued int
}

// Relay serves workers' lease commands and sends them on in batches.
type Relay struct {
	cfg  Config
	log  hclog.Logger
	stop chan struct{}

	mu      sync.Mutex
	queue   []queued
	sending int
	lns     map[net.Listener]struct{}
	conns   map[net.Conn]struct{}
	closed  bool

	wg                                   sync.WaitGroup
	commands, batches, batched, failures atomic.Uint64
	refused                              atomic.Uint64
	open                                 atomic.Int64
	// failing is set while the register's answers to batches fail (one
	// warning per spell).
	failing atomic.Bool
}

// New checks cfg and returns a relay that serves nothing yet (Serve).
func New(cfg Config) (*Relay, error) {
	if cfg.Upstream == nil {
		return nil, fmt.Errorf("%w: an upstream register is required", ErrRelay)
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxInFlight < 1 || cfg.MaxInFlight > 64 {
		return nil, fmt.Errorf("%w: %d batches in flight; allowed: 1 to 64", ErrRelay, cfg.MaxInFlight)
	}
	if cfg.MaxQueue == 0 {
		cfg.MaxQueue = DefaultMaxQueue
	}
	if cfg.MaxQueue < wire.MaxLeaseBatch || cfg.MaxQueue > 1<<20 {
		return nil, fmt.Errorf("%w: a queue of %d commands; allowed: %d to %d", ErrRelay, cfg.MaxQueue, wire.MaxLeaseBatch, 1<<20)
	}
	if cfg.BatchTimeout == 0 {
		cfg.BatchTimeout = DefaultBatchTimeout
	}
	if cfg.BatchTimeout < 0 {
		return nil, fmt.Errorf("%w: batch timeout %v; it must be positive", ErrRelay, cfg.BatchTimeout)
	}
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Relay{cfg: cfg, log: log, stop: make(chan struct{}), lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}}, nil
}

// Serve accepts workers' connections on ln (wrapped in TLS when Config.TLS
// is set) until ln fails or the relay is closed; it returns nil after
// Close.
func (r *Relay) Serve(ln net.Listener) error {
	if r.cfg.TLS != nil {
		ln = tls.NewListener(ln, r.cfg.TLS)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		ln.Close()
		return nil
	}
	r.lns[ln] = struct{}{}
	r.mu.Unlock()
	backoff := time.Duration(0)
	for {
		c, err := ln.Accept()
		if err != nil {
			select {
			case <-r.stop:
				return nil
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("relay: accept: %w", err)
			}
			// Out of file descriptors, say: wait and try again, as
			// net/http does, rather than stop serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			r.log.Warn("accept failed; retrying", "error", err, "backoff", backoff)
			select {
			case <-time.After(backoff):
			case <-r.stop:
				return nil
			}
			continue
		}
		backoff = 0
		if !r.track(c) {
			c.Close()
			return nil
		}
		go r.serveConn(c)
	}
}

// track registers an open connection; false once the relay is closed.
func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	r.wg.Add(1)
	r.open.Add(1)
	return true
}

// untrack forgets a closed connection.
func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	r.open.Add(-1)
	r.wg.Done()
}

// Close stops accepting, drops the commands waiting for a batch, closes
// the workers' connections and waits for their loops; a batch with the
// register finishes in the background and its answers are dropped (the
// workers retry elsewhere).
func (r *Relay) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	close(r.stop)
	// The waiting commands are not sent: their connections close now, and
	// their workers retry elsewhere. A batch already out finishes in the
	// background (within BatchTimeout); its answers are dropped.
	clear(r.queue)
	r.queue = r.queue[:0]
	for ln := range r.lns {
		ln.Close()
	}
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// Stats returns the relay's counters.
func (r *Relay) Stats() Stats {
	r.mu.Lock()
	queued := len(r.queue)
	r.mu.Unlock()
	return Stats{Queued: queued,
		Commands: r.commands.Load(), Batches: r.batches.Load(), BatchedCommands: r.batched.Load(),
		FailedBatches: r.failures.Load(), Refused: r.refused.Load(), Conns: r.open.Load(),
	}
}
