package server

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/permitd/permitd/fsm"
)

// TestShadowMetrics: the counters of limits in shadow mode are exported
// per limit; enforced limits export none. The grants are those made in
// shadow mode (6 of the limit's 10: 4 were made while it was enforced).
func TestShadowMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	RegisterShadowMetrics(reg, func() []fsm.LimitInfo {
		return []fsm.LimitInfo{
			{Name: "new", Shadow: true, GrantedRequests: 10, ShadowGranted: 6, ShadowWouldRefuse: 3, ShadowWouldWait: 2},
			{Name: "old", GrantedRequests: 5},
		}
	})
	want := `
# HELP permitd_shadow_would_refuse_total Reserves a limit in shadow mode granted but would have refused (since the limit was created).
# TYPE permitd_shadow_would_refuse_total counter
permitd_shadow_would_refuse_total{limit="new"} 3
# HELP permitd_shadow_would_wait_total Reserves a limit in shadow mode granted at once but would have made wait.
# TYPE permitd_shadow_would_wait_total counter
permitd_shadow_would_wait_total{limit="new"} 2
# HELP permitd_shadow_granted_total Reserves a limit granted while in shadow mode (since the limit was created; grants made while it was enforced are not counted).
# TYPE permitd_shadow_granted_total counter
permitd_shadow_granted_total{limit="new"} 6
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
