// Package wait holds the runner's two bounded waits: a sleep that ends
// with its context, and a wait for a sync.WaitGroup with a timeout. Every
// loop of the runner and its packages sleeps through Sleep, so that
// cancelling a run's context ends them all.
package wait
