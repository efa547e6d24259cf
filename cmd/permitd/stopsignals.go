package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
)

// waitForStop blocks a long-running command (agent, worker, relay) until
// it is told to stop: SIGINT or SIGTERM, logged, returns (true, nil); a
// value on failed returns (false, that value). Each SIGHUP in between
// calls reload (the token files). Once it has returned, a second SIGINT
// or SIGTERM exits the process at once with status 1, so that an
// operator can cut short a shutdown that hangs.
func waitForStop(logger hclog.Logger, reload func(), failed <-chan error) (signalled bool, err error) {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer func() {
		go func() {
			<-sig
			logger.Warn("second signal: exiting now")
			os.Exit(1)
		}()
	}()
	for {
		select {
		case <-hup:
			reload()
		case s := <-sig:
			logger.Info("stopping", "signal", s.String())
			return true, nil
		case err := <-failed:
			return false, err
		}
	}
}
