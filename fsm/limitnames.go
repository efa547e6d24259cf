package fsm

// limitnames.go: the limits' names alone, for the edge's suggestions
// ("did you mean"), without building every limit's view.

// LimitCount returns how many limits the register holds.
func (f *FSM) LimitCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.names.len()
}

// EachLimitName calls fn with every limit's name, in name order, until fn
// returns false. It holds the state's read lock throughout: fn must be
// quick and must not call the FSM.
func (f *FSM) EachLimitName(fn func(name string) bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	f.st.names.each(func(l *limit) bool { return fn(l.name) })
}

// LimitsNamed returns the names among those candidates yields that are
// limits, in the order yielded (each candidate is looked up without being
// copied; yield's buffer may be reused between calls). Its cost is the
// candidates', not the register's.
func (f *FSM) LimitsNamed(candidates func(yield func(name []byte) bool)) []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []string
	candidates(func(name []byte) bool {
		if _, ok := f.st.limits[string(name)]; ok {
			out = append(out, string(name))
		}
		return true
	})
	return out
}
