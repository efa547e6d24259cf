package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"
)

// dashboard_test.go: the Grafana dashboard deploy/grafana/permitd-dashboard.json
// is generated from the panels below (go test ./cmd/permitd -run
// TestDashboardIsGenerated -update-dashboard writes it); the test fails
// when the file and the panels differ.

var updateDashboard = flag.Bool("update-dashboard", false, "write "+dashboardFile+" from dashboardPanels")

// rateWindow is the range of the dashboard's rates: Grafana's
// $__rate_interval, at least four scrape intervals.
const rateWindow = "[$__rate_interval]"

// dashQuery is one query of a panel and its legend.
type dashQuery struct{ expr, legend string }

// dashPanel is a time series panel; a panel with no queries starts a row.
type dashPanel struct {
	title, unit, description string
	queries                  []dashQuery
}

func row(title string) dashPanel { return dashPanel{title: title} }

// Selectors: the agents of the chosen cluster ($job), and the chosen
// limits ($limit: a regular expression, .+ for All). Workers and relays
// are scraped in jobs of their own, so their panels select by limit only.
// Template families ($template, likewise) are selected by the label
// template: their keys have no per-limit series.
const (
	agents      = `job="$job"`
	agentsOf    = `job="$job",limit=~"$limit"`
	templatesOf = `job="$job",template=~"$template"`
)

// dashboardPanels are the dashboard's rows and panels, in order.
var dashboardPanels = []dashPanel{
	row("Cluster"),
	{title: "Agents up", unit: "none", description: "1 while Prometheus scrapes the agent.",
		queries: []dashQuery{{`up{` + agents + `}`, "{{instance}}"}}},
	{title: "Leader", unit: "none", description: "1 on the raft leader; no leader for long is the PermitdNoLeader alert.",
		queries: []dashQuery{{`permitd_is_leader{` + agents + `}`, "{{instance}}"}}},
	{title: "Raft state", unit: "none", description: "Each agent's raft state.",
		queries: []dashQuery{{`permitd_raft_state{` + agents + `} == 1`, "{{instance}} {{state}}"}}},
	{title: "Versions", unit: "none", description: "The version each process runs.",
		queries: []dashQuery{{`permitd_build_info`, "{{job}} {{instance}} {{version}}"}}},

	row("Raft"),
	{title: "Term", unit: "none", description: "The raft term: each rise is an election.",
		queries: []dashQuery{{`permitd_raft_term{` + agents + `}`, "{{instance}}"}}},
	{title: "Entries behind", unit: "none", description: "Committed entries not applied yet, and entries applied by the most advanced agent but not by this one.",
		queries: []dashQuery{
			{`permitd_raft_commit_index{` + agents + `} - permitd_raft_applied_index{` + agents + `}`, "{{instance}} apply lag"},
			{`max by (job) (permitd_raft_applied_index{` + agents + `}) - on (job) group_right permitd_raft_applied_index{` + agents + `}`, "{{instance}} behind the cluster"}}},
	{title: "Commit latency", unit: "s", description: "A batch's time from submission to raft until applied (the leader's).",
		queries: []dashQuery{
			{`histogram_quantile(0.99, sum by (instance, le) (rate(permitd_apply_latency_seconds_bucket{` + agents + `}` + rateWindow + `)))`, "{{instance}} p99"},
			{`histogram_quantile(0.5, sum by (instance, le) (rate(permitd_apply_latency_seconds_bucket{` + agents + `}` + rateWindow + `)))`, "{{instance}} p50"}}},
	{title: "Reserves per entry", unit: "none", description: "The mean batch: reserves carried by one raft entry.",
		queries: []dashQuery{{`sum by (instance) (rate(permitd_batch_size_sum{` + agents + `}` + rateWindow + `)) / sum by (instance) (rate(permitd_batch_size_count{` + agents + `}` + rateWindow + `))`, "{{instance}}"}}},
	{title: "Snapshots", unit: "none", description: "Entries applied since the last snapshot, and snapshots that failed (take: a full disk; restore).",
		queries: []dashQuery{
			{`permitd_raft_applied_index{` + agents + `} - permitd_raft_last_snapshot_index{` + agents + `}`, "{{instance}} since the last snapshot"},
			{`increase(permitd_snapshot_failures_total{` + agents + `}[1h])`, "{{instance}} {{op}} failures in 1h"}}},

	row("Requests"),
	{title: "Reserves by protocol and outcome", unit: "reqps", description: "Reserve requests answered by the cluster's agents (http, binary).",
		queries: []dashQuery{{`sum by (protocol, outcome) (rate(permitd_reserve_requests_total{` + agents + `}` + rateWindow + `))`, "{{protocol}} {{outcome}}"}}},
	{title: "Leases by protocol and outcome", unit: "reqps", description: "Lease, renew and return requests answered (a relay's batch counts each command).",
		queries: []dashQuery{{`sum by (protocol, outcome) (rate(permitd_lease_requests_total{` + agents + `}` + rateWindow + `))`, "{{protocol}} {{outcome}}"}}},
	{title: "HTTP latency by route", unit: "s", description: "99th percentile time to answer, by route.",
		queries: []dashQuery{{`histogram_quantile(0.99, sum by (route, le) (rate(permitd_http_request_duration_seconds_bucket{` + agents + `}` + rateWindow + `)))`, "{{route}}"}}},
	{title: "Granted waits", unit: "s", description: "How far ahead granted permits were (the wait answered to the client).",
		queries: []dashQuery{
			{`histogram_quantile(0.99, sum by (protocol, le) (rate(permitd_reserve_wait_seconds_bucket{` + agents + `}` + rateWindow + `)))`, "{{protocol}} p99"},
			{`histogram_quantile(0.5, sum by (protocol, le) (rate(permitd_reserve_wait_seconds_bucket{` + agents + `}` + rateWindow + `)))`, "{{protocol}} p50"}}},
	{title: "Pending and shed", unit: "none", description: "Reserves each agent holds now, and those it shed (503 overloaded) per second.",
		queries: []dashQuery{
			{`permitd_reserves_pending{` + agents + `}`, "{{instance}} pending"},
			{`rate(permitd_reserves_shed_total{` + agents + `}` + rateWindow + `)`, "{{instance}} shed/s"}}},

	row("Limits"),
	{title: "Utilisation", unit: "percentunit", description: "Permits granted per second over the limit's configured rate.",
		queries: []dashQuery{{`max by (limit) (rate(permitd_limit_permits_total{` + agentsOf + `,outcome="granted"}` + rateWindow + `)) / max by (limit) (permitd_limit_rate_permits_per_second{` + agentsOf + `})`, "{{limit}}"}}},
	{title: "Requests by outcome", unit: "reqps", description: "Each limit's reserve requests (every agent exports the same counters: max, not sum).",
		queries: []dashQuery{{`max by (limit, outcome) (rate(permitd_limit_requests_total{` + agentsOf + `}` + rateWindow + `))`, "{{limit}} {{outcome}}"}}},
	{title: "Refused share", unit: "percentunit", description: "Refused requests over all requests (PermitdLimitRefusing).",
		queries: []dashQuery{{`max by (limit) (rate(permitd_limit_requests_total{` + agentsOf + `,outcome="refused"}` + rateWindow + `)) / max by (limit) (sum without (outcome) (rate(permitd_limit_requests_total{` + agentsOf + `}` + rateWindow + `)))`, "{{limit}}"}}},
	{title: "Permits by outcome", unit: "none", description: "Permits granted, refunded, charged and expired per second.",
		queries: []dashQuery{
			{`max by (limit, outcome) (rate(permitd_limit_permits_total{` + agentsOf + `}` + rateWindow + `))`, "{{limit}} {{outcome}}"},
			{`max by (limit) (rate(permitd_limit_expired_requests_total{` + agentsOf + `}` + rateWindow + `))`, "{{limit}} expired requests"}}},
	{title: "Waits", unit: "s", description: "99th percentile wait of each limit's grants.",
		queries: []dashQuery{{`histogram_quantile(0.99, max by (limit, le) (rate(permitd_limit_wait_seconds_bucket{` + agentsOf + `}` + rateWindow + `)))`, "{{limit}}"}}},
	{title: "In flight", unit: "none", description: "Permits held now against concurrency limits, and their caps.",
		queries: []dashQuery{
			{`max by (limit) (permitd_limit_in_flight_permits{` + agentsOf + `})`, "{{limit}}"},
			{`max by (limit) (permitd_limit_max_in_flight_permits{` + agentsOf + `})`, "{{limit}} max"}}},
	{title: "Open reservations", unit: "none", description: "Reservations not settled or released yet.",
		queries: []dashQuery{{`max by (limit) (permitd_limit_open_reservations{` + agentsOf + `})`, "{{limit}}"}}},
	{title: "Leases per group", unit: "none", description: "Permits leased to each group per second, and permits held by leases now.",
		queries: []dashQuery{
			{`max by (limit, group) (rate(permitd_limit_lease_granted_permits_total{` + agentsOf + `}` + rateWindow + `))`, "{{limit}} {{group}}"},
			{`max by (limit) (permitd_limit_lease_outstanding_permits{` + agentsOf + `})`, "{{limit}} outstanding"}}},
	{title: "Limits exported", unit: "none", description: "Limits with per-limit series, and those over --metrics-max-limits without.",
		queries: []dashQuery{
			{`max by (job) (permitd_limits_exported{` + agents + `})`, "exported"},
			{`max by (job) (permitd_limits_unexported{` + agents + `})`, "unexported"}}},

	row("Templates"),
	{title: "Template keys", unit: "none", description: "Live keys of each template (a deleted template's until its last goes) and its --max-keys; at the cap new keys are refused (PermitdTemplateKeysFull).",
		queries: []dashQuery{
			{`max by (template) (permitd_template_keys{` + templatesOf + `})`, "{{template}} live"},
			{`max by (template) (permitd_template_max_keys{` + templatesOf + `})`, "{{template}} max"}}},
	{title: "Keys created, dropped and refused", unit: "none", description: "Keys created on first use, dropped as idle, and reserves refused for want of a key (keys_full), per second.",
		queries: []dashQuery{
			{`max by (template) (rate(permitd_template_keys_created_total{` + templatesOf + `}` + rateWindow + `))`, "{{template}} created"},
			{`max by (template) (rate(permitd_template_keys_dropped_total{` + templatesOf + `}` + rateWindow + `))`, "{{template}} dropped"},
			{`max by (template) (rate(permitd_template_keys_full_total{` + templatesOf + `}` + rateWindow + `))`, "{{template}} keys full"}}},
	{title: "Template requests by outcome", unit: "reqps", description: "Reserves on each template's keys, summed over the family (every agent exports the same counters: max, not sum).",
		queries: []dashQuery{{`max by (template, outcome) (rate(permitd_template_requests_total{` + templatesOf + `}` + rateWindow + `))`, "{{template}} {{outcome}}"}}},
	{title: "Template waits", unit: "s", description: "99th percentile wait of the grants on each template's keys.",
		queries: []dashQuery{{`histogram_quantile(0.99, max by (template, le) (rate(permitd_template_wait_seconds_bucket{` + templatesOf + `}` + rateWindow + `)))`, "{{template}}"}}},

	row("Workers"),
	{title: "Sidecar answers", unit: "reqps", description: "Reserves answered by the worker sidecars; unavailable is failing closed.",
		queries: []dashQuery{{`sum by (limit, group, outcome) (rate(permitd_sidecar_reserves_total{limit=~"$limit"}` + rateWindow + `))`, "{{limit}} {{group}} {{outcome}}"}}},
	{title: "Share and demand", unit: "none", description: "Each worker's share of the rate and the demand it reported (permits per second).",
		queries: []dashQuery{
			{`permitd_worker_share_permits_per_second{limit=~"$limit"}`, "{{worker}} share"},
			{`permitd_worker_demand_permits_per_second{limit=~"$limit"}`, "{{worker}} demand"}}},
	{title: "Permits leased and spent", unit: "none", description: "Permits per second by group.",
		queries: []dashQuery{
			{`sum by (limit, group) (rate(permitd_worker_leased_permits_total{limit=~"$limit"}` + rateWindow + `))`, "{{limit}} {{group}} leased"},
			{`sum by (limit, group) (rate(permitd_worker_spent_permits_total{limit=~"$limit"}` + rateWindow + `))`, "{{limit}} {{group}} spent"}}},
	{title: "Held by workers", unit: "none", description: "Permits workers may spend now, and the fleet's over-grant headroom.",
		queries: []dashQuery{
			{`permitd_worker_outstanding_permits{limit=~"$limit"}`, "{{worker}}"},
			{`sum by (limit) (permitd_worker_overgrant_headroom_permits{limit=~"$limit"})`, "{{limit}} headroom"}}},
	{title: "Gossip", unit: "none", description: "Gossip rejected (no key) and rejoins, per hour.",
		queries: []dashQuery{
			{`increase(permitd_worker_gossip_rejected_total{limit=~"$limit"}[1h])`, "{{worker}} rejected"},
			{`increase(permitd_worker_gossip_rejoins_total{limit=~"$limit"}[1h])`, "{{worker}} rejoins"}}},

	row("Relays"),
	{title: "Relay commands and batches", unit: "none", description: "Lease commands received and batches sent per second.",
		queries: []dashQuery{
			{`rate(permitd_relay_commands_total` + rateWindow + `)`, "{{instance}} commands"},
			{`rate(permitd_relay_batches_total` + rateWindow + `)`, "{{instance}} batches"}}},
	{title: "Commands per batch", unit: "none", description: "The relay's mean batch.",
		queries: []dashQuery{{`rate(permitd_relay_batched_commands_total` + rateWindow + `) / rate(permitd_relay_batches_total` + rateWindow + `)`, "{{instance}}"}}},
	{title: "Relay failures", unit: "none", description: "Batches the register did not answer and commands the relay refused, per second.",
		queries: []dashQuery{
			{`rate(permitd_relay_failed_batches_total` + rateWindow + `)`, "{{instance}} failed batches"},
			{`rate(permitd_relay_refused_total` + rateWindow + `)`, "{{instance}} refused"}}},
	{title: "Relay connections and queue", unit: "none", description: "Workers connected, and commands waiting for a batch.",
		queries: []dashQuery{
			{`permitd_relay_connections`, "{{instance}} connections"},
			{`permitd_relay_queued_commands`, "{{instance}} queued"}}},

	row("Processes"),
	{title: "CPU", unit: "percentunit", description: "CPU time per second of every permitd process.",
		queries: []dashQuery{{`rate(process_cpu_seconds_total` + rateWindow + `) and on (job, instance) permitd_build_info`, "{{job}} {{instance}}"}}},
	{title: "Memory", unit: "bytes", description: "Resident memory.",
		queries: []dashQuery{{`process_resident_memory_bytes and on (job, instance) permitd_build_info`, "{{job}} {{instance}}"}}},
	{title: "Data disk free", unit: "percentunit", description: "Free share of the file system of each agent's --data-dir (PermitdDataDiskLow).",
		queries: []dashQuery{{`permitd_data_dir_available_bytes{` + agents + `} / permitd_data_dir_size_bytes{` + agents + `}`, "{{instance}}"}}},
	{title: "File descriptors", unit: "percentunit", description: "Open file descriptors over the process's limit.",
		queries: []dashQuery{{`process_open_fds / process_max_fds and on (job, instance) permitd_build_info`, "{{job}} {{instance}}"}}},
}

// dashboardJSON renders the panels as a Grafana dashboard: rows of
// time series, four to a line, and the variables datasource, job and
// limit.
func dashboardJSON() []byte {
	type obj = map[string]any
	ds := obj{"type": "prometheus", "uid": "${datasource}"}
	var panels []any
	y, x, id := 0, 0, 0
	for _, p := range dashboardPanels {
		id++
		if p.queries == nil {
			if x > 0 {
				y += 8
			}
			panels = append(panels, obj{"id": id, "type": "row", "title": p.title, "collapsed": false,
				"gridPos": obj{"h": 1, "w": 24, "x": 0, "y": y}, "panels": []any{}})
			y, x = y+1, 0
			continue
		}
		var targets []any
		for i, q := range p.queries {
			targets = append(targets, obj{"datasource": ds, "expr": q.expr, "legendFormat": q.legend, "refId": string(rune('A' + i))})
		}
		panels = append(panels, obj{"id": id, "type": "timeseries", "title": p.title, "description": p.description, "datasource": ds,
			"gridPos":     obj{"h": 8, "w": 6, "x": x, "y": y},
			"fieldConfig": obj{"defaults": obj{"unit": p.unit}, "overrides": []any{}},
			"options":     obj{"legend": obj{"displayMode": "list", "placement": "bottom", "showLegend": true}, "tooltip": obj{"mode": "multi", "sort": "none"}},
			"targets":     targets})
		if x += 6; x == 24 {
			x, y = 0, y+8
		}
	}
	variable := func(name, label, query string, all bool) obj {
		v := obj{"name": name, "label": label, "type": "query", "datasource": ds, "definition": query,
			"query": obj{"query": query, "refId": name}, "refresh": 2, "sort": 1, "includeAll": all, "multi": all}
		if all {
			v["allValue"] = ".+"
			v["current"] = obj{"text": "All", "value": "$__all"}
		}
		return v
	}
	d := obj{
		"uid": "permitd", "title": "permitd", "tags": []string{"permitd"}, "editable": true, "graphTooltip": 1,
		"schemaVersion": 39, "version": 1, "refresh": "10s", "time": obj{"from": "now-1h", "to": "now"},
		"description": "permitd agents, workers and relays (cmd/permitd/README.md, Alerts and dashboard). Generated by cmd/permitd/dashboard_test.go.",
		"templating": obj{"list": []any{
			obj{"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus"},
			variable("job", "Cluster (job)", "label_values(permitd_is_leader, job)", false),
			variable("limit", "Limit", `label_values(permitd_limit_rate_permits_per_second{job="$job"}, limit)`, true),
			variable("template", "Template", `label_values(permitd_template_keys{job="$job"}, template)`, true),
		}},
		"annotations": obj{"list": []any{}},
		"panels":      panels,
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// TestDashboardIsGenerated: the dashboard file is what dashboardPanels
// generate (-update-dashboard writes it).
func TestDashboardIsGenerated(t *testing.T) {
	want := dashboardJSON()
	if *updateDashboard {
		if err := os.WriteFile(dashboardFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what dashboardPanels generate: run go test ./cmd/permitd -run TestDashboardIsGenerated -update-dashboard", dashboardFile)
	}
}
