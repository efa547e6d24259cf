package node

import (
	"context"
	"fmt"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// templates.go: the templates, read linearizably (a follower forwards
// the read to the leader, wire.OpReadTemplates).

// Template returns the active template of prefix, read linearizably
// (ErrNotFound if there is none; an invalid prefix is ErrInvalid and
// reaches no other node).
func (n *Node) Template(ctx context.Context, prefix string) (fsm.TemplateInfo, error) {
	if err := fsm.ValidateTemplatePrefix(prefix); err != nil {
		return fsm.TemplateInfo{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	ts, err := n.readTemplates(ctx, prefix)
	if err != nil {
		return fsm.TemplateInfo{}, err
	}
	if len(ts) != 1 {
		return fsm.TemplateInfo{}, userErrorf(ErrNotFound, "template %q does not exist", prefix)
	}
	return ts[0], nil
}

// Templates returns every template (at most fsm.MaxTemplates), sorted by
// prefix, read linearizably: it reflects every change acknowledged before
// it was asked. A deleted template whose keys still live is listed with
// Deleted set (fsm.FSM.AllTemplates).
func (n *Node) Templates(ctx context.Context) ([]fsm.TemplateInfo, error) {
	return n.readTemplates(ctx, "")
}

// readTemplates reads the template of prefix, or every one if prefix is
// empty, through the leader.
func (n *Node) readTemplates(ctx context.Context, prefix string) ([]fsm.TemplateInfo, error) {
	return leaderDo(n, ctx, time.Time{}, wire.OpReadTemplates, bytesOf(encodeStrings(prefix)),
		func(ctx context.Context) ([]fsm.TemplateInfo, error) { return n.readTemplatesLocal(ctx, prefix) },
		func(resp []byte, _ time.Time) ([]fsm.TemplateInfo, error) { return decodeTemplates(resp) })
}

// readTemplatesLocal reads on the leader, after a barrier, as readLocal
// reads the limits.
func (n *Node) readTemplatesLocal(ctx context.Context, prefix string) ([]fsm.TemplateInfo, error) {
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if err := n.awaitFuture(n.raft.Barrier(timeout)); err != nil {
		return nil, mapRaftErr(err)
	}
	if prefix == "" {
		return n.fsm.AllTemplates(), nil
	}
	if t, ok := n.fsm.Template(prefix); ok {
		return []fsm.TemplateInfo{t}, nil
	}
	return nil, nil
}

// encodeTemplates is OpReadTemplates' answer: a count, then per template
// its prefix, config, idle time, max keys, live keys and flags (bit 0:
// deleted, its keys still live) (at most fsm.MaxTemplates of about 100
// bytes: well inside one frame).
func encodeTemplates(ts []fsm.TemplateInfo) ([]byte, error) {
	var w wire.Enc
	w.Uvar(uint64(len(ts)))
	for _, t := range ts {
		cb, err := t.Config.AppendBinary(nil)
		if err != nil {
			return nil, err
		}
		w.Str(t.Prefix)
		w.Bytes(cb)
		w.Svar(t.IdleNanos)
		w.Svar(t.MaxKeys)
		w.Svar(t.LiveKeys)
		var flags uint64
		if t.Deleted {
			flags |= templateDeleted
		}
		w.Uvar(flags)
	}
	return w.B, nil
}

// templateDeleted is encodeTemplates' flag of a deleted template.
const templateDeleted = 1

// decodeTemplates decodes what encodeTemplates encoded.
func decodeTemplates(p []byte) ([]fsm.TemplateInfo, error) {
	r := wire.Dec{B: p}
	n := r.Uvar()
	if n > fsm.MaxTemplates {
		return nil, fmt.Errorf("node: %d templates (allowed: at most %d)", n, fsm.MaxTemplates)
	}
	out := make([]fsm.TemplateInfo, 0, n)
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		t := fsm.TemplateInfo{Prefix: r.Str()}
		cb := r.Bytes()
		t.IdleNanos, t.MaxKeys, t.LiveKeys = r.Svar(), r.Svar(), r.Svar()
		flags := r.Uvar()
		if r.Err() != nil {
			break
		}
		if flags&^templateDeleted != 0 {
			return nil, fmt.Errorf("node: template %q: unknown flags %#x (allowed: %#x, deleted)", t.Prefix, flags, templateDeleted)
		}
		t.Deleted = flags&templateDeleted != 0
		cfg, err := bucket.DecodeConfig(cb)
		if err != nil {
			return nil, err
		}
		t.Config = cfg
		out = append(out, t)
	}
	return out, r.Done()
}
