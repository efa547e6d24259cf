package fakeapi

// monitor counts violations as calls arrive, in time order.
type monitor struct {
	cfg        Config
	bound      int64   // Bound.Max(WindowNanos), Window mode
	window     []int64 // times of the calls in the current window, oldest first
	last       int64
	n          int64
	violations int64
	minGap     int64
	maxWindow  int64
}

func newMonitor(cfg Config) *monitor {
	m := &monitor{cfg: cfg, minGap: -1}
	if cfg.Mode == Window {
		m.bound = cfg.Bound.Max(cfg.WindowNanos)
	}
	return m
}

// observe adds a call received at t (>= every earlier t).
func (m *monitor) observe(t int64) {
	if m.n > 0 {
		gap := t - m.last
		if m.minGap < 0 || gap < m.minGap {
			m.minGap = gap
		}
		if m.cfg.Mode == Spacing && gap < m.cfg.IntervalNanos-m.cfg.ToleranceNanos {
			m.violations++
		}
	}
	m.n++
	m.last = t
	if m.cfg.Mode != Window {
		return
	}
	span := max(m.cfg.WindowNanos-m.cfg.ToleranceNanos, 0)
	drop := 0
	for drop < len(m.window) && t-m.window[drop] > span {
		drop++
	}
	m.window = append(m.window[drop:], t)
	count := int64(len(m.window))
	m.maxWindow = max(m.maxWindow, count)
	if count > m.bound {
		m.violations++
	}
	if cap(m.window) > 2*len(m.window)+64 {
		m.window = append([]int64(nil), m.window...) // release the dropped prefix
	}
}

func (m *monitor) stats() Stats {
	s := Stats{
		Mode:           m.cfg.Mode,
		ToleranceNanos: m.cfg.ToleranceNanos,
		Calls:          m.n,
		Violations:     m.violations,
		MinGapNanos:    m.minGap,
	}
	switch m.cfg.Mode {
	case Spacing:
		s.IntervalNanos = m.cfg.IntervalNanos
	case Window:
		s.WindowNanos = m.cfg.WindowNanos
		s.Formula = m.cfg.Bound.Formula
		s.Bound = m.bound
		s.MaxWindowCount = m.maxWindow
	}
	return s
}

// keyedMonitor judges each key alone with its own monitor (Keyed mode).
type keyedMonitor struct {
	cfg  Config // Mode: the key mode
	keys map[string]*monitor
}

func newKeyedMonitor(cfg Config) *keyedMonitor {
	cfg.Mode = cfg.KeyMode
	return &keyedMonitor{cfg: cfg, keys: map[string]*monitor{}}
}

// observe adds a call on key received at t (>= every earlier t).
func (k *keyedMonitor) observe(key string, t int64) {
	m := k.keys[key]
	if m == nil {
		m = newMonitor(k.cfg)
		k.keys[key] = m
	}
	m.observe(t)
}

// stats sums the keys' counts: calls and violations added up, the
// smallest gap and the fullest window over all keys.
func (k *keyedMonitor) stats() Stats {
	s := newMonitor(k.cfg).stats()
	s.Mode, s.Keys = Keyed, int64(len(k.keys))
	for _, m := range k.keys {
		ms := m.stats()
		s.Calls += ms.Calls
		s.Violations += ms.Violations
		s.MaxWindowCount = max(s.MaxWindowCount, ms.MaxWindowCount)
		if ms.MinGapNanos >= 0 && (s.MinGapNanos < 0 || ms.MinGapNanos < s.MinGapNanos) {
			s.MinGapNanos = ms.MinGapNanos
		}
	}
	return s
}
