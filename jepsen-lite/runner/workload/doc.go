// Package workload is jepsen-lite's client side: the runner's client
// workers and the leased workload's worker sidecars. Every reserve and
// every call at the fake API is an operation in the history.
//
// # Strict and window workers
//
// Workers.Run (direct.go) loops: reserve n permits through permitd's Go
// client (transport/client), in the worker's own session, n drawn from
// the worker's seeded sequence (1 three times in four, else 2 to
// MaxPermits); wait for each permit's turn (strict: wait + j·spacing);
// check it is still usable (strict: not expired; window: answered within
// MaxAnswerRTT and used within MaxLateUse of ready); call the fake API
// once per permit. Outcomes: a grant is ok, a refusal fail with its
// retry_after, an invalid request or one that certainly never reached a
// server (client.ErrNotDelivered) fail without effect, any other error
// info (the outcome is unknown).
//
// Strict reserves of several permits fit only when the register's queue
// is short: ceil(wait/I) − 1 + n <= max_reserved. So a strict worker that
// draws n > 1 takes the multi-permit turn (turn.go) when it is free:
// while it holds it the other workers send no new reserve, and it retries
// a refused reserve when the queue should have drained enough; the turn
// ends with a grant, any other outcome, or after max_reserved + 2
// intervals, and none is given for as long again after it. WorkerStats
// counts the turns and the grants of several permits.
//
// # Templated workers
//
// runTemplated (templated.go) reserves on many keys "Prefix:k<i>" of one
// template: a hot key two times in five, else now and then a cold key the
// worker used about one idle time ago (when the register may have dropped
// it), else a random cold key, with 1 to 4 reserves back to back on a
// cold key. Permits are used as above (strict or window discipline by the
// template's algorithm), each API call naming its key. A keys_full
// refusal is a fail with KeysFull set (its retry_after is not a slot), an
// unknown limit (a deleted template's key, once dropped) a fail.
//
// # Leased workers and sidecars
//
// Fleet (fleet.go) runs one `permitd worker --test-hooks` sidecar per
// worker, supervised by package process like the agents, reads their
// counters every 250 ms (and before a kill, and twice at the end), and
// pushes register faults to them (the worker faults of package nemesis
// act through its methods). Client i (leased.go) reserves one permit at a
// time from sidecar i and uses a grant at once, within LeasedMaxUseDelay
// of the reserve's invoke. A refused connection (nothing listened) is a
// fail; a lost answer info.
package workload
