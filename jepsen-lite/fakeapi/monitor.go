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
