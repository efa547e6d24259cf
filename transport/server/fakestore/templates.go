package fakestore

import (
	"context"
	"fmt"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
)

// PutTemplate implements server.Store.
func (s *Store) PutTemplate(ctx context.Context, t fsm.PutTemplate) (fsm.PutTemplateResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.PutTemplateResult{}, err
	}
	v, err := s.applyLocked(func(st fsm.Stamp) ([]byte, error) { return fsm.AppendPutTemplate(nil, st, t) })
	if err != nil {
		return fsm.PutTemplateResult{}, err
	}
	return v.(fsm.PutTemplateResult), nil
}

// DeleteTemplate implements server.Store.
func (s *Store) DeleteTemplate(ctx context.Context, prefix string) (fsm.DeleteTemplateResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.DeleteTemplateResult{}, err
	}
	v, err := s.applyLocked(func(st fsm.Stamp) ([]byte, error) {
		return fsm.AppendDeleteTemplate(nil, st, fsm.DeleteTemplate{Prefix: prefix})
	})
	if err != nil {
		return fsm.DeleteTemplateResult{}, err
	}
	res := v.(fsm.DeleteTemplateResult)
	if !res.Existed {
		return res, templateNotFound(prefix)
	}
	return res, nil
}

// Template implements server.Store.
func (s *Store) Template(ctx context.Context, prefix string) (fsm.TemplateInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return fsm.TemplateInfo{}, err
	}
	t, ok := s.f.Template(prefix)
	if !ok {
		return t, templateNotFound(prefix)
	}
	return t, nil
}

// Templates implements server.Store.
func (s *Store) Templates(ctx context.Context) ([]fsm.TemplateInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	return s.f.AllTemplates(), nil
}

// templateNotFound is the node's error for an unknown template.
func templateNotFound(prefix string) error {
	return fmt.Errorf("%w: template %q does not exist", node.ErrNotFound, prefix)
}
