package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Bounds and names of the etcd side.
const (
	defaultEtcdName  = "etcd"
	etcdReadyTimeout = 30 * time.Second
	etcdKey          = "compare-redis/gcra"
	etcdMembers      = 3
	// maxCASAttempts bounds one decision's compare-and-swap loop: a
	// decision that loses the race this many times in a row is an error,
	// not a refusal (the limit never refuses in a benchmark).
	maxCASAttempts = 10000
)

// etcdCluster is a running 3-member etcd cluster.
type etcdCluster struct {
	members   []*child
	endpoints []string // client URLs of every member, in name order
	leader    string   // client URL of the leader when the cluster became ready
	version   string
	params    gcraParams
	epoch     time.Time // the GCRA's time 0: params.epochSeconds as a time
}

// startEtcd starts etcdMembers etcd members on loopback, data (fsync on,
// etcd's default) under dir, and waits until a linearizable read succeeds
// on every member and one reports itself leader.
func startEtcd(ctx context.Context, sup *supervisor, bin, dir string, rate float64, per time.Duration, burst int64) (*etcdCluster, error) {
	ports, err := freeLoopbackPorts(2 * etcdMembers)
	if err != nil {
		return nil, err
	}
	names := make([]string, etcdMembers)
	peers := make([]string, etcdMembers)
	ec := &etcdCluster{endpoints: make([]string, etcdMembers)}
	for i := range etcdMembers {
		names[i] = "e" + strconv.Itoa(i+1)
		ec.endpoints[i] = "http://127.0.0.1:" + strconv.Itoa(ports[2*i])
		peers[i] = names[i] + "=http://127.0.0.1:" + strconv.Itoa(ports[2*i+1])
	}
	for i, name := range names {
		peerURL := strings.TrimPrefix(peers[i], name+"=")
		c, err := sup.start("etcd "+name, filepath.Join(dir, "etcd-"+name+".log"), bin,
			"--name", name, "--data-dir", filepath.Join(dir, "etcd-"+name),
			"--listen-client-urls", ec.endpoints[i], "--advertise-client-urls", ec.endpoints[i],
			"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "compare-redis", "--logger", "zap", "--log-outputs", "stderr")
		if err != nil {
			return nil, err
		}
		// Its data is thrown away, and a member given SIGTERM with the
		// others tries to hand its leadership over for seconds.
		c.killAtStop = true
		ec.members = append(ec.members, c)
	}
	if err := ec.waitReady(ctx); err != nil {
		return nil, err
	}
	ec.epoch = time.Unix(time.Now().Unix(), 0)
	if ec.params, err = newGCRAParams(rate, per, burst, ec.epoch.Unix()); err != nil {
		return nil, err
	}
	// One decision to check the CAS loop end to end before measuring.
	cli, err := ec.client([]string{ec.leader})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	granted, err := ec.decide(ctx, cli)
	if err != nil {
		return nil, fmt.Errorf("compare-redis: first etcd GCRA decision: %w", err)
	}
	if !granted {
		return nil, errors.New("compare-redis: first etcd GCRA decision was refused on an idle key; the limit is not high enough")
	}
	return ec, nil
}

// client returns an etcd client of endpoints that logs nothing.
func (ec *etcdCluster) client(endpoints []string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("compare-redis: etcd client of %s: %w", strings.Join(endpoints, ","), err)
	}
	return cli, nil
}

// waitReady polls every member until each answers a linearizable read and
// one is the leader, for at most etcdReadyTimeout.
func (ec *etcdCluster) waitReady(ctx context.Context) error {
	cli, err := ec.client(ec.endpoints)
	if err != nil {
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(etcdReadyTimeout)
	for {
		for _, m := range ec.members {
			if !m.running() {
				return fmt.Errorf("compare-redis: %s exited at start: %v\n%s", m.name, m.waitErr, m.logTail(2000))
			}
		}
		var states []string
		ready, leader := 0, ""
		for _, ep := range ec.endpoints {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := cli.Status(sctx, ep)
			if err == nil {
				_, err = cli.Get(clientv3.WithRequireLeader(sctx), etcdKey)
			}
			cancel()
			if err != nil {
				states = append(states, ep+": "+err.Error())
				continue
			}
			ready++
			ec.version = st.Version
			if st.Leader == st.Header.MemberId {
				leader = ep
			}
			states = append(states, ep+": ready")
		}
		if ready == len(ec.endpoints) && leader != "" {
			ec.leader = leader
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("compare-redis: etcd not ready after %v (%s)", etcdReadyTimeout, strings.Join(states, "; "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// gcraStep is the GCRA of gcra.lua on integer nanoseconds: from the stored
// TAT (0 when none) and now, whether one permit is allowed and the TAT to
// store if so.
func gcraStep(p gcraParams, tat, now int64) (allowed bool, newTAT int64) {
	tat = max(tat, now)
	newTAT = tat + p.emissionNanos
	allowAt := newTAT - p.emissionNanos*p.burst
	return now-allowAt >= 0, newTAT
}

// decide makes one GCRA decision by compare-and-swap: read the TAT key,
// compute on this process's clock, then one transaction that stores the
// new TAT only if the key's ModRevision is still the one read (0: the key
// does not exist); when another decision got there first, the
// transaction's Else branch returns the key's current value and the
// computation is retried on it, up to maxCASAttempts times.
func (ec *etcdCluster) decide(ctx context.Context, cli *clientv3.Client) (bool, error) {
	resp, err := cli.Get(ctx, etcdKey)
	if err != nil {
		return false, err
	}
	tat, rev, err := tatOf(resp)
	if err != nil {
		return false, err
	}
	for range maxCASAttempts {
		allowed, newTAT := gcraStep(ec.params, tat, time.Since(ec.epoch).Nanoseconds())
		if !allowed {
			return false, nil
		}
		txn, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(etcdKey), "=", rev)).
			Then(clientv3.OpPut(etcdKey, strconv.FormatInt(newTAT, 10))).
			Else(clientv3.OpGet(etcdKey)).
			Commit()
		if err != nil {
			return false, err
		}
		if txn.Succeeded {
			return true, nil
		}
		if len(txn.Responses) != 1 || txn.Responses[0].GetResponseRange() == nil {
			return false, errors.New("etcd transaction's else branch returned no range")
		}
		if tat, rev, err = tatOf((*clientv3.GetResponse)(txn.Responses[0].GetResponseRange())); err != nil {
			return false, err
		}
	}
	return false, fmt.Errorf("etcd compare-and-swap lost %d times in a row", maxCASAttempts)
}

// tatOf is the stored TAT and the key's ModRevision in a read of etcdKey:
// 0 and 0 when the key does not exist.
func tatOf(resp *clientv3.GetResponse) (tat, rev int64, err error) {
	if len(resp.Kvs) == 0 {
		return 0, 0, nil
	}
	kv := resp.Kvs[0]
	tat, err = strconv.ParseInt(string(kv.Value), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("etcd key %s holds %q, want an integer TAT: %w", etcdKey, kv.Value, err)
	}
	return tat, kv.ModRevision, nil
}

// decider returns a decideFunc over one client of endpoints, shared by
// every worker (gRPC multiplexes them on one connection per member), and
// the client to close after the run.
func (ec *etcdCluster) decider(endpoints []string) (decideFunc, *clientv3.Client, error) {
	cli, err := ec.client(endpoints)
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, _, _ int) (bool, error) {
		return ec.decide(ctx, cli)
	}, cli, nil
}
