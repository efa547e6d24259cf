package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
)

// The relay nemesis (kind FaultRelay, leased workload with relays). Its
// variants:
//
//   - kill: kill -9 one relay (by the event's pick); its workers' calls
//     fail over to the register's nodes, and come back to the relay
//     (after the worker's return delay) once it is started again at the
//     window's end;
//   - restart: through the window, every 1–2 s, stop one relay (in turn,
//     from the pick; kill -9 and SIGTERM alternately) and start it again
//     at once: commands in flight at the relay are lost or answered "no
//     leader", and retried at the register with their request IDs;
//   - partition: cut every relay off from the register (each relay's
//     connections to the agents go through a proxy of the runner's):
//     RegisterDrop (connections reset, new ones closed: the relays answer
//     "no leader" at once) or RegisterBlackhole (nothing passes: the
//     batches time out, outcome unknown), alternately by the pick. The
//     workers still reach their relay and the register.

// beginRelayFault applies relay fault ev (event i) and returns its
// targets; af gets its heal (undo) or its background loop.
func (nm *Nemesis) beginRelayFault(ctx context.Context, i int, ev Event, af *activeFault) []string {
	rec := af.rec
	names := nm.fleet.Relays()
	n := uint64(len(names))
	switch ev.Variant {
	case "kill":
		r := int(ev.Pick % n)
		if err := nm.fleet.KillRelay(ctx, r); err != nil {
			rec.Errors = append(rec.Errors, err.Error())
		}
		rec.Notes = append(rec.Notes, "kill -9 a relay, restarted at the end: its workers go to the register directly")
		af.undo = func(ctx context.Context) []string {
			if err := nm.fleet.StartRelay(ctx, r); err != nil {
				return []string{err.Error()}
			}
			return nil
		}
		return []string{names[r]}
	case "restart":
		nm.relayRestarts(ctx, ev, af)
		return names
	case "partition":
		mode := RegisterDrop
		if ev.Pick%2 == 1 {
			mode = RegisterBlackhole
		}
		nm.fleet.CutRelays(mode)
		rec.Notes = append(rec.Notes, fmt.Sprintf("every relay cut off from the register (%s); the workers still reach it and the register", mode))
		af.undo = func(context.Context) []string {
			nm.fleet.CutRelays("")
			return nil
		}
		return names
	}
	rec.Errors = append(rec.Errors, fmt.Sprintf("unknown relay fault variant %s (event %d)", ev.Variant, i))
	return nil
}

// relayRestarts starts the restart variant's loop: until the window's
// end, every 1–2 s, stop a relay (kill -9 on even rounds, SIGTERM on odd
// ones) and start it again at once.
func (nm *Nemesis) relayRestarts(ctx context.Context, ev Event, af *activeFault) {
	rec := af.rec
	names := nm.fleet.Relays()
	until := nm.start.Add(ev.Until)
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	af.launch = func() {
		go func() {
			defer close(done)
			rng := rand.New(rand.NewPCG(ev.Pick, 0x72656c6179))
			kills, stops := 0, 0
			defer func() {
				nm.recordNote(rec, fmt.Sprintf("%d restarts after kill -9, %d after SIGTERM", kills, stops))
			}()
			for round := 0; ; round++ {
				if wait.Sleep(bctx, time.Duration(1000+rng.IntN(1001))*time.Millisecond) != nil || time.Now().After(until) {
					return
				}
				r := int((ev.Pick + uint64(round)) % uint64(len(names)))
				if round%2 == 0 {
					if err := nm.fleet.KillRelay(bctx, r); err != nil {
						nm.recordError(rec, err.Error())
						continue
					}
					kills++
				} else {
					nm.fleet.StopRelay(bctx, r)
					stops++
				}
				// Started again even when the window just ended.
				if err := nm.fleet.StartRelay(context.WithoutCancel(bctx), r); err != nil {
					nm.recordError(rec, err.Error())
				}
			}
		}()
	}
	af.stop = func() { cancel(); <-done }
	rec.Notes = append(rec.Notes, "relays stopped and started again in turn, every 1-2 s")
}
