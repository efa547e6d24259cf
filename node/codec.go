package node

import (
	"fmt"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// codec.go: payloads of forwarded operations (see forward.go).

func encodeReserve(r fsm.Reserve) []byte {
	var w wbuf
	w.str(r.Limit)
	w.svar(r.Permits)
	w.svar(r.MaxWaitNanos)
	w.str(r.RequestID)
	return w.b
}

func decodeReserve(p []byte) (fsm.Reserve, error) {
	r := rbuf{b: p}
	v := fsm.Reserve{Limit: r.str(), Permits: r.svar(), MaxWaitNanos: r.svar(), RequestID: r.str()}
	return v, r.done()
}

func encodeReserveResult(res fsm.ReserveResult) []byte {
	var w wbuf
	w.u8(byte(res.Status))
	w.svar(res.WaitNanos)
	w.svar(res.RetryAfterNanos)
	w.svar(res.ExpiresInNanos)
	if res.Duplicate {
		w.u8(1)
	} else {
		w.u8(0)
	}
	w.str(res.Detail)
	return w.b
}

func decodeReserveResult(p []byte) (fsm.ReserveResult, error) {
	r := rbuf{b: p}
	v := fsm.ReserveResult{Status: fsm.Status(r.u8()), WaitNanos: r.svar(), RetryAfterNanos: r.svar(), ExpiresInNanos: r.svar(), Duplicate: r.u8() == 1, Detail: r.str()}
	return v, r.done()
}

func encodePut(name string, cfg bucket.Config) ([]byte, error) {
	cb, err := cfg.AppendBinary(nil)
	if err != nil {
		return nil, err
	}
	var w wbuf
	w.str(name)
	w.bytes(cb)
	return w.b, nil
}

func decodePut(p []byte) (string, bucket.Config, error) {
	r := rbuf{b: p}
	name := r.str()
	cb := r.bytes()
	if err := r.done(); err != nil {
		return "", bucket.Config{}, err
	}
	cfg, err := bucket.DecodeConfig(cb)
	if err != nil {
		return "", bucket.Config{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return name, cfg, nil
}

func encodeLimits(ls []fsm.LimitInfo) ([]byte, error) {
	var w wbuf
	w.uvar(uint64(len(ls)))
	for _, l := range ls {
		cb, err := l.Config.AppendBinary(nil)
		if err != nil {
			return nil, err
		}
		w.str(l.Name)
		w.bytes(cb)
		w.uvar(l.Version)
		w.uvar(l.GrantedRequests)
		w.uvar(l.GrantedPermits)
		w.uvar(l.RefusedRequests)
	}
	return w.b, nil
}

func decodeLimits(p []byte) ([]fsm.LimitInfo, error) {
	r := rbuf{b: p}
	n := r.uvar()
	if n > uint64(len(p)) {
		return nil, errShortFrame
	}
	out := make([]fsm.LimitInfo, 0, min(n, 1024))
	for i := uint64(0); i < n && r.err == nil; i++ {
		name := r.str()
		cb := r.bytes()
		l := fsm.LimitInfo{Name: name, Version: r.uvar(), GrantedRequests: r.uvar(), GrantedPermits: r.uvar(), RefusedRequests: r.uvar()}
		if r.err != nil {
			break
		}
		cfg, err := bucket.DecodeConfig(cb)
		if err != nil {
			return nil, err
		}
		l.Config = cfg
		out = append(out, l)
	}
	return out, r.done()
}

func encodeStrings(ss ...string) []byte {
	var w wbuf
	for _, s := range ss {
		w.str(s)
	}
	return w.b
}

func decodeStrings(p []byte, n int) ([]string, error) {
	r := rbuf{b: p}
	out := make([]string, n)
	for i := range out {
		out[i] = r.str()
	}
	return out, r.done()
}
