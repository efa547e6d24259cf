package worker

import "testing"

// TestReportDemandHeldBack checks the demand a worker reports: the
// measurement plus 10 % headroom, or at least twice its share when its
// callers were held back for at least half of the last measured period.
func TestReportDemandHeldBack(t *testing.T) {
	const sec = int64(1_000_000_000)
	tests := []struct {
		name       string
		asked      int64 // permits asked in each of two 1 s periods
		heldNanos  int64 // time held back in each period
		shareMilli int64
		want       int64
	}{
		{name: "not held: measured plus headroom", asked: 100, heldNanos: 0, shareMilli: 200_000, want: 110_000},
		{name: "held a little: measured plus headroom", asked: 100, heldNanos: sec / 4, shareMilli: 100_000, want: 110_000},
		{name: "held half the time: twice the share", asked: 100, heldNanos: sec / 2, shareMilli: 100_000, want: 200_000},
		{name: "held, measured above twice the share", asked: 1000, heldNanos: sec, shareMilli: 100_000, want: 1_100_000},
		{name: "held without a share: measured", asked: 100, heldNanos: sec, shareMilli: 0, want: 110_000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m demandMeter
			// Two full periods, then the report at the end of the second.
			m.add(tc.asked)
			m.hold(tc.heldNanos)
			m.take(sec)
			m.add(tc.asked)
			m.hold(tc.heldNanos)
			if got := m.reportDemand(2*sec, sec/10, tc.shareMilli); got != tc.want {
				t.Errorf("reportDemand = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestReportDemandForgetsAStarvedPeriod: callers held back for far more
// than a period in one period (thirty callers waiting a second each while
// the first grant was late) and not at all in the next report the
// measurement plus headroom at the end of the next, not twice the share:
// a group that wants less than its share gives the rest back one renewal
// after it stopped waiting.
func TestReportDemandForgetsAStarvedPeriod(t *testing.T) {
	const sec = int64(1_000_000_000)
	var m demandMeter
	m.add(30)
	m.hold(30 * sec)
	m.take(sec)
	m.add(30)
	if got, want := m.reportDemand(2*sec, sec/10, 66_667), int64(33_000); got != want {
		t.Errorf("reportDemand after a starved period and a served one = %d, want %d (30/s plus 10 %%)", got, want)
	}
}

// TestReportDemandHeldInTheLastPeriod: callers not held in one period and
// held for the whole of the next report at least twice the share at the
// end of the next: the flag follows the last period both ways.
func TestReportDemandHeldInTheLastPeriod(t *testing.T) {
	const sec = int64(1_000_000_000)
	var m demandMeter
	m.add(30)
	m.take(sec)
	m.add(30)
	m.hold(sec)
	if got, want := m.reportDemand(2*sec, sec/10, 66_667), int64(133_334); got != want {
		t.Errorf("reportDemand after a served period and a held one = %d, want %d (twice the share)", got, want)
	}
}
