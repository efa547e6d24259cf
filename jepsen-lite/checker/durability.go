package checker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/permitd/permitd/jepsen-lite/history"
)

// NodeStatus is the part of a node's final GET /v1/status that durability
// reads.
type NodeStatus struct {
	// AppliedIndex is the last raft index the node's FSM applied.
	AppliedIndex uint64 `json:"applied_index"`
	// StateHash is the hash of the node's FSM state at AppliedIndex.
	StateHash string `json:"state_hash"`
}

// LimitCounters is the part of one limit in a node's final GET /v1/limits
// listing that durability reads.
type LimitCounters struct {
	// Name names the limit.
	Name string `json:"name"`
	// GrantedRequests and GrantedPermits count the grants since the
	// limit was created.
	GrantedRequests uint64 `json:"granted_requests"`
	GrantedPermits  uint64 `json:"granted_permits"`
}

// NodeFinal is one node's final state.
type NodeFinal struct {
	// Name names the node.
	Name string
	// Status is the node's final status.
	Status NodeStatus
	// Limits is the node's final limit listing.
	Limits []LimitCounters
}

// ParseStatus reads the JSON of GET /v1/status. Other fields are ignored;
// applied_index and state_hash are required.
func ParseStatus(b []byte) (NodeStatus, error) {
	var raw struct {
		AppliedIndex *uint64 `json:"applied_index"`
		StateHash    *string `json:"state_hash"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return NodeStatus{}, fmt.Errorf("%w: status: %w", ErrInvalid, err)
	}
	if raw.AppliedIndex == nil || raw.StateHash == nil {
		return NodeStatus{}, fmt.Errorf("%w: status %s lacks applied_index or state_hash; allowed: permitd's /v1/status", ErrInvalid, truncate(b, 200))
	}
	return NodeStatus{AppliedIndex: *raw.AppliedIndex, StateHash: *raw.StateHash}, nil
}

// ParseLimits reads the JSON of GET /v1/limits ({"limits":[...]}) or a bare
// array of limits. Other fields are ignored; name and granted_requests are
// required.
func ParseLimits(b []byte) ([]LimitCounters, error) {
	type rawLimit struct {
		Name            *string `json:"name"`
		GrantedRequests *uint64 `json:"granted_requests"`
		GrantedPermits  uint64  `json:"granted_permits"`
	}
	var list []rawLimit
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &list); err != nil {
			return nil, fmt.Errorf("%w: limits: %w", ErrInvalid, err)
		}
	} else {
		var obj struct {
			Limits *[]rawLimit `json:"limits"`
		}
		if err := json.Unmarshal(trimmed, &obj); err != nil {
			return nil, fmt.Errorf("%w: limits: %w", ErrInvalid, err)
		}
		if obj.Limits == nil {
			return nil, fmt.Errorf(`%w: limits %s lack "limits"; allowed: {"limits":[...]} or [...]`, ErrInvalid, truncate(b, 200))
		}
		list = *obj.Limits
	}
	out := make([]LimitCounters, len(list))
	for i, l := range list {
		if l.Name == nil || l.GrantedRequests == nil {
			return nil, fmt.Errorf("%w: limit %d lacks name or granted_requests", ErrInvalid, i)
		}
		out[i] = LimitCounters{Name: *l.Name, GrantedRequests: *l.GrantedRequests, GrantedPermits: l.GrantedPermits}
	}
	return out, nil
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

// DurabilityInput is what Durability judges.
type DurabilityInput struct {
	// Ops is the history.
	Ops []history.Op
	// Nodes are every node's final state, read after the final heal and
	// once the cluster is quiet.
	Nodes []NodeFinal
	// AllowLagging accepts nodes whose applied index is below the largest
	// (their hash is then not compared). By default a lagging node is a
	// violation: after the final heal every replica must catch up.
	AllowLagging bool
}

// Durability checks that every acknowledged write survived on every node:
//
//   - replicas agree: nodes at the same applied_index have the same
//     state_hash, and (unless AllowLagging) every node is at the largest
//     applied_index;
//   - every limit whose put was acknowledged (ok), and that no later delete
//     touched (whatever its outcome), is in every node's listing;
//   - every acknowledged grant is counted: for each limit never deleted,
//     every node's granted_requests >= the ok reserves and acquires of that
//     limit (replays of one request ID count once), and granted_permits >=
//     their permits.
//
// Details: nodes, applied_indexes, hash_groups, acked_limits, acked_grants
// (per limit).
func Durability(in DurabilityInput) (Result, error) {
	if len(in.Nodes) == 0 {
		return Result{}, fmt.Errorf("%w: no node states; allowed: one NodeFinal per node", ErrInvalid)
	}
	ops, err := history.Pair(in.Ops)
	if err != nil {
		return Result{}, fmt.Errorf("checker: durability: %w", err)
	}
	r := newResult("durability")
	checkReplicas(in, &r)

	// Acknowledged limits and grants.
	putAt := make(map[string]int)        // limit → invoke index of the first ok put
	deletedAfter := make(map[string]int) // limit → invoke index of the last delete
	type acked struct{ requests, permits uint64 }
	grants := make(map[string]*acked)
	seenIDs := make(map[string]bool)
	for _, o := range ops {
		switch o.F() {
		case history.FPut, history.FDelete:
			var v history.LimitRequest
			if err := o.Invoke.DecodeValue(&v); err != nil {
				return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
			}
			if o.F() == history.FDelete {
				deletedAfter[v.Limit] = o.Invoke.Index
			} else if _, ok := putAt[v.Limit]; !ok && o.Outcome() == history.OK {
				putAt[v.Limit] = o.Invoke.Index
			}
		case history.FReserve, history.FAcquire:
			if o.Outcome() != history.OK {
				continue
			}
			var req history.ReserveRequest
			if err := o.Invoke.DecodeValue(&req); err != nil {
				return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
			}
			if id := o.RequestID(); id != "" {
				if seenIDs[id] {
					continue // a replay, or a double grant (conservation reports it)
				}
				seenIDs[id] = true
			}
			a := grants[req.Limit]
			if a == nil {
				a = &acked{}
				grants[req.Limit] = a
			}
			a.requests++
			a.permits += uint64(max(req.Permits, 1))
		}
	}
	byNode := make([]map[string]LimitCounters, len(in.Nodes))
	for i, n := range in.Nodes {
		byNode[i] = make(map[string]LimitCounters, len(n.Limits))
		for _, l := range n.Limits {
			byNode[i][l.Name] = l
		}
	}
	var ackedLimits []string
	for name, at := range putAt {
		if d, ok := deletedAfter[name]; ok && d > at {
			continue
		}
		ackedLimits = append(ackedLimits, name)
	}
	slices.Sort(ackedLimits)
	for _, name := range ackedLimits {
		for i, n := range in.Nodes {
			if _, ok := byNode[i][name]; !ok {
				r.violate("limit %q (put acknowledged by op #%d) is missing on node %s", name, putAt[name], n.Name)
			}
		}
	}
	ackedGrants := make(map[string]map[string]uint64)
	for _, name := range sortedKeys(grants) {
		a := grants[name]
		ackedGrants[name] = map[string]uint64{"requests": a.requests, "permits": a.permits}
		if _, deleted := deletedAfter[name]; deleted {
			continue // counters restart with a new incarnation of the limit
		}
		for i, n := range in.Nodes {
			l, ok := byNode[i][name]
			if !ok {
				r.violate("limit %q with %d acknowledged grants is missing on node %s", name, a.requests, n.Name)
				continue
			}
			if l.GrantedRequests < a.requests {
				r.violate("node %s counts %d granted requests of limit %q; %d were acknowledged", n.Name, l.GrantedRequests, name, a.requests)
			}
			if l.GrantedPermits < a.permits {
				r.violate("node %s counts %d granted permits of limit %q; %d were acknowledged", n.Name, l.GrantedPermits, name, a.permits)
			}
		}
	}
	r.Details["nodes"] = len(in.Nodes)
	r.Details["acked_limits"] = ackedLimits
	r.Details["acked_grants"] = ackedGrants
	return r, nil
}

// checkReplicas compares state hashes at equal applied indexes.
func checkReplicas(in DurabilityInput, r *Result) {
	indexes := make(map[string]uint64, len(in.Nodes))
	groups := make(map[uint64][]int)
	var top uint64
	for i, n := range in.Nodes {
		indexes[n.Name] = n.Status.AppliedIndex
		groups[n.Status.AppliedIndex] = append(groups[n.Status.AppliedIndex], i)
		top = max(top, n.Status.AppliedIndex)
	}
	compared := 0
	for _, idx := range sortedKeys(groups) {
		members := groups[idx]
		if len(members) > 1 {
			compared++
		}
		first := in.Nodes[members[0]]
		for _, m := range members[1:] {
			if n := in.Nodes[m]; n.Status.StateHash != first.Status.StateHash {
				r.violate("nodes %s and %s are both at applied index %d with different state hashes %s and %s",
					first.Name, n.Name, idx, first.Status.StateHash, n.Status.StateHash)
			}
		}
		if idx < top && !in.AllowLagging {
			for _, m := range members {
				r.violate("node %s is at applied index %d, behind %d: replicas did not converge after the final heal", in.Nodes[m].Name, idx, top)
			}
		}
	}
	r.Details["applied_indexes"] = indexes
	r.Details["hash_groups"] = compared
}

func sortedKeys[K interface{ ~string | ~uint64 }, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
