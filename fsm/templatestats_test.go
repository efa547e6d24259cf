package fsm

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
)

// TestTemplateStatsCountFamilies: the monitoring reads treat templated
// keys as families. LimitStats lists explicit limits only (an override of
// a key included) and counts only them; TemplateStats counts each
// template's live keys and sums their counters; LimitInfo names a key's
// template; AppliedKeyChanges names the keys each entry created, dropped
// as idle, made explicit or deleted, with the counters they leave with.
func TestTemplateStatsCountFamilies(t *testing.T) {
	h := newHarness(t)
	sec := int64(time.Second)
	cfg := compile(t, bucket.Spec{Algorithm: bucket.Bursty, Rate: 1, MaxBurstSeconds: 3})
	h.apply(mustEntry(AppendPutTemplate(nil, at(sec), PutTemplate{Prefix: "cust", Config: cfg, IdleNanos: 10 * sec, MaxKeys: 100})))
	h.put(sec, "plain", cfg)
	h.put(sec, "cust:vip", cfg)
	changes := func() []KeyChange { return append([]KeyChange(nil), h.f.AppliedKeyChanges()...) }

	h.reserve1(2*sec, rsv("cust:a", 1, 0, ""))
	if got, want := changes(), []KeyChange{{Kind: KeyCreated, Name: "cust:a", Template: "cust"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("first reserve on a key: changes %+v, want %+v", got, want)
	}
	for range 4 {
		h.reserve1(2*sec, rsv("cust:a", 1, 0, "")) // 3 granted, the last refused
	}
	if got := changes(); len(got) != 0 {
		t.Fatalf("reserves on a live key: changes %+v, want none", got)
	}
	h.reserve1(2*sec, rsv("cust:b", 2, 0, ""))
	for i := range 50 {
		h.reserve1(3*sec, rsv(fmt.Sprintf("cust:k%02d", i), 1, 0, ""))
	}

	stats, total := h.f.LimitStats(-1)
	if total != 2 || len(stats) != 2 || stats[0].Info.Name != "cust:vip" || stats[1].Info.Name != "plain" {
		t.Fatalf("LimitStats(-1) = %d limits of %d (%+v), want the explicit cust:vip and plain", len(stats), total, stats)
	}
	if stats, total := h.f.LimitStats(1); total != 2 || len(stats) != 1 || stats[0].Info.Name != "cust:vip" {
		t.Fatalf("LimitStats(1) = %+v of %d, want cust:vip of 2", stats, total)
	}
	if li, _ := h.f.Limit("cust:a"); li.Template != "cust" {
		t.Fatalf("key cust:a: Template %q, want cust", li.Template)
	}
	if li, _ := h.f.Limit("cust:vip"); li.Template != "" {
		t.Fatalf("explicit cust:vip: Template %q, want none", li.Template)
	}
	want := TemplateStats{Prefix: "cust", Active: true, Config: cfg, IdleNanos: 10 * sec, MaxKeys: 100,
		LiveKeys: 52, GrantedRequests: 4 + 1 + 50, RefusedRequests: 1, GrantedPermits: 4 + 2 + 50}
	if got := h.f.TemplateStats(); len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("TemplateStats = %+v, want [%+v]", got, want)
	}

	// An explicit put takes a live key out of the family, with its
	// counters; a delete too.
	h.put(2*sec+1, "cust:b", cfg)
	if got, want := changes(), []KeyChange{{Kind: KeyMadeExplicit, Name: "cust:b", Template: "cust", GrantedRequests: 1, GrantedPermits: 2}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("put over a live key: changes %+v, want %+v", got, want)
	}
	h.del(3*sec, "cust:k00")
	if got, want := changes(), []KeyChange{{Kind: KeyDeleted, Name: "cust:k00", Template: "cust", GrantedRequests: 1, GrantedPermits: 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("delete of a key: changes %+v, want %+v", got, want)
	}

	// Idle 10 s from its last reserve at 2 s: cust:a goes at 12 s with
	// its counters.
	h.noop(12 * sec)
	if got, want := changes(), []KeyChange{{Kind: KeyDroppedIdle, Name: "cust:a", Template: "cust", GrantedRequests: 4, RefusedRequests: 1, GrantedPermits: 4}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("idle drop: changes %+v, want %+v", got, want)
	}
	if got := h.f.TemplateStats(); got[0].LiveKeys != 49 || got[0].GrantedRequests != 49 || got[0].RefusedRequests != 0 {
		t.Fatalf("after the drop: %+v, want 49 keys, 49 granted", got[0])
	}
	// At most maxDropsPerEntry keys go per entry: 49 at 13 s take one
	// entry, and a deleted template is listed while its keys live.
	h.apply(mustEntry(AppendDeleteTemplate(nil, at(12*sec), DeleteTemplate{Prefix: "cust"})))
	h.noop(13 * sec)
	if got := changes(); len(got) != 49 || got[0].Kind != KeyDroppedIdle {
		t.Fatalf("drops at 13 s: %d changes (%+v), want 49 idle drops", len(got), got)
	}
	if got := h.f.TemplateStats(); len(got) != 0 {
		t.Fatalf("a deleted template without keys: %+v, want it gone", got)
	}
}

// BenchmarkFamilyReads1M measures the reads the metrics and the status
// page make of a register holding 1 000 000 templated keys (two
// templates) and 1 000 explicit limits, under the read lock that stalls
// Apply meanwhile: TemplateStats walks every key, LimitStats(5000) skips
// them.
//
//	go test ./fsm -run '^$' -bench FamilyReads1M -benchtime 5x
func BenchmarkFamilyReads1M(b *testing.B) {
	h := newHarness(b)
	sec := int64(time.Second)
	cfg := compile(b, bucket.Spec{Algorithm: bucket.Strict, Rate: 100})
	for _, p := range []string{"a", "z"} {
		h.apply(mustEntry(AppendPutTemplate(nil, at(sec), PutTemplate{Prefix: p, Config: cfg, IdleNanos: 3600 * sec, MaxKeys: MaxTemplatedKeys})))
	}
	for i := range 1000 {
		h.put(sec, fmt.Sprintf("m%04d", i), cfg)
	}
	var batch []Reserve
	for i := range 1_000_000 {
		batch = append(batch, rsv(fmt.Sprintf("%s:%07d", []string{"a", "z"}[i/500_000], i), 1, 0, ""))
		if len(batch) == 4096 || i == 999_999 {
			h.reserve(2*sec, batch...)
			batch = batch[:0]
		}
	}
	b.Run("TemplateStats", func(b *testing.B) {
		for b.Loop() {
			if ts := h.f.TemplateStats(); len(ts) != 2 || ts[0].LiveKeys+ts[1].LiveKeys != 1_000_000 {
				b.Fatalf("%+v", ts)
			}
		}
	})
	b.Run("LimitStats5000", func(b *testing.B) {
		for b.Loop() {
			if _, total := h.f.LimitStats(5000); total != 1000 {
				b.Fatalf("%d explicit limits", total)
			}
		}
	})
}
