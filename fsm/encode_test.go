package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"api.github-v3:search_1", true},
		{strings.Repeat("x", MaxNameLen), true},
		{"", false},
		{strings.Repeat("x", MaxNameLen+1), false},
		{"has space", false},
		{"slash/no", false},
		{"é", false},
		{"nul\x00", false},
	}
	for _, tt := range tests {
		err := ValidateName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), "allowed")) {
			t.Errorf("ValidateName(%q) error %q: want ErrInvalidCommand saying what is allowed", tt.name, err)
		}
	}
}

func TestReserveValidate(t *testing.T) {
	tests := []struct {
		desc string
		r    Reserve
		want string // substring of the error, "" for valid
	}{
		{"minimal", rsv("a", 1, 0, ""), ""},
		{"max id", rsv("a", math.MaxInt64, math.MaxInt64, strings.Repeat("i", MaxRequestIDLen)), ""},
		{"zero permits", rsv("a", 0, 0, ""), "0 permits"},
		{"negative permits", rsv("a", -3, 0, ""), "-3 permits"},
		{"negative wait", rsv("a", 1, -1, ""), "max wait -1ns"},
		{"long id", rsv("a", 1, 0, strings.Repeat("i", MaxRequestIDLen+1)), "request id is 65 bytes"},
		{"bad name", rsv("a b", 1, 0, ""), "limit name"},
	}
	for _, tt := range tests {
		err := tt.r.Validate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: Validate() = %v, want nil", tt.desc, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidCommand containing %q", tt.desc, err, tt.want)
		}
	}
	if err := ValidateRequestID(strings.Repeat("i", MaxRequestIDLen+1)); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("ValidateRequestID(65 bytes) = %v, want ErrInvalidCommand", err)
	}
}

// reencode encodes e again with the Append function of its type.
func reencode(t testing.TB, e Entry) []byte {
	t.Helper()
	var b []byte
	var err error
	switch e.Type {
	case CmdPutLimit:
		b, err = AppendPut(nil, e.Stamp, e.Put)
	case CmdDeleteLimit:
		b, err = AppendDelete(nil, e.Stamp, e.Delete)
	case CmdReserveBatch:
		b, err = AppendReserveBatch(nil, e.Stamp, e.Reserves)
	case CmdNoop:
		b = AppendNoop(nil, e.Stamp)
	case CmdOpenSession:
		b, err = AppendOpenSessionAs(nil, e.Stamp, e.OpenSession)
	case CmdPutLeasePolicy:
		b, err = AppendLeasePolicy(nil, e.Stamp, e.Policy)
	case CmdLease:
		b, err = AppendLease(nil, e.Stamp, e.Lease)
	case CmdRenew:
		b, err = AppendRenew(nil, e.Stamp, e.Renew)
	case CmdReturn:
		b, err = AppendReturn(nil, e.Stamp, e.Return)
	case CmdLeaseBatch:
		b, err = AppendLeaseBatch(nil, e.Stamp, e.LeaseBatch)
	case CmdSettle:
		b, err = AppendSettle(nil, e.Stamp, e.Settle)
	case CmdRelease:
		b, err = AppendRelease(nil, e.Stamp, e.Release)
	case CmdExpiredGrants:
		b, err = AppendExpiredGrants(nil, e.Stamp, e.ExpiredGrants)
	case CmdWithdraw:
		b, err = AppendWithdraw(nil, e.Stamp, e.Withdraw)
	default:
		t.Fatalf("decoded unknown type %d", e.Type)
	}
	if err != nil {
		t.Fatalf("re-encoding a decoded %d entry: %v", e.Type, err)
	}
	return b
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	cfg := strict(t, 10, 5)
	put, err := AppendPut([]byte("prefix"), at(-7), PutLimit{Name: "api", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	del, err := AppendDelete(nil, at(1), DeleteLimit{Name: "api"})
	if err != nil {
		t.Fatal(err)
	}
	rs := []Reserve{rsv("api", 1, 0, ""), rsv("other", math.MaxInt64, math.MaxInt64, "req-1"), rsv("api", 300, 1<<40, strings.Repeat("z", MaxRequestIDLen)),
		{Limit: "api", Permits: 2, Session: SessionRef{ID: 7, Seq: 9, AckedBelow: 3}},
		{Limit: "api", Permits: 1, Session: SessionRef{ID: 8, Seq: 1, AckedBelow: 1}, Owner: "alice"}}
	batch, err := AppendReserveBatch(nil, at(math.MaxInt64), rs)
	// Arrival times: a batch stamped at the end of time holds reserves
	// that arrived then; another with increasing ones decodes them as is.
	for i := range rs {
		rs[i].ArrivedNanos = math.MaxInt64
	}
	arrivals := []Reserve{{Limit: "a", Permits: 1, ArrivedNanos: 3}, {Limit: "a", Permits: 1, ArrivedNanos: 2}, {Limit: "b", Permits: 1, ArrivedNanos: 40}}
	spread, err2 := AppendReserveBatch(nil, at(1), arrivals)
	if err2 != nil {
		t.Fatal(err2)
	}
	arrivals[1].ArrivedNanos = 3 // made non-decreasing
	if err != nil {
		t.Fatal(err)
	}
	noop := AppendNoop(nil, at(math.MinInt64))

	tests := []struct {
		desc string
		b    []byte
		want Entry
	}{
		{"put", put[len("prefix"):], Entry{Type: CmdPutLimit, Stamp: at(-7), Put: PutLimit{Name: "api", Config: cfg}}},
		{"delete", del, Entry{Type: CmdDeleteLimit, Stamp: at(1), Delete: DeleteLimit{Name: "api"}}},
		{"batch", batch, Entry{Type: CmdReserveBatch, Stamp: at(math.MaxInt64), Reserves: rs}},
		{"arrivals", spread, Entry{Type: CmdReserveBatch, Stamp: at(1), Reserves: arrivals}},
		{"noop", noop, Entry{Type: CmdNoop, Stamp: at(math.MinInt64)}},
	}
	for _, tt := range tests {
		e, err := Decode(tt.b)
		if err != nil {
			t.Fatalf("%s: Decode: %v", tt.desc, err)
		}
		if !reflect.DeepEqual(e, tt.want) {
			t.Errorf("%s: Decode = %+v, want %+v", tt.desc, e, tt.want)
		}
		if got := reencode(t, e); !bytes.Equal(got, tt.b) {
			t.Errorf("%s: re-encoding gives %x, want %x", tt.desc, got, tt.b)
		}
		if tt.b[0] != byte(tt.want.Type) || tt.b[1] != EncodingVersion {
			t.Errorf("%s: header %x, want type %d version %d", tt.desc, tt.b[:2], tt.want.Type, EncodingVersion)
		}
	}
	if string(put[:len("prefix")]) != "prefix" {
		t.Errorf("AppendPut clobbered the prefix of b")
	}
}

func TestAppendRejects(t *testing.T) {
	cfg := strict(t, 10, 5)
	prefix := []byte("keep")
	tooMany := make([]Reserve, MaxBatchReserves+1)
	for i := range tooMany {
		tooMany[i] = rsv("a", 1, 0, "")
	}
	tests := []struct {
		desc string
		fn   func(b []byte) ([]byte, error)
		want string
	}{
		{"put bad name", func(b []byte) ([]byte, error) { return AppendPut(b, at(0), PutLimit{Name: "", Config: cfg}) }, "limit name"},
		{"put zero config", func(b []byte) ([]byte, error) { return AppendPut(b, at(0), PutLimit{Name: "a"}) }, `limit "a"`},
		{"delete bad name", func(b []byte) ([]byte, error) { return AppendDelete(b, at(0), DeleteLimit{Name: "a/b"}) }, "limit name"},
		{"empty batch", func(b []byte) ([]byte, error) { return AppendReserveBatch(b, at(0), nil) }, "batch of 0 reserves"},
		{"huge batch", func(b []byte) ([]byte, error) { return AppendReserveBatch(b, at(0), tooMany) }, "batch of 65537 reserves"},
		{"bad reserve", func(b []byte) ([]byte, error) {
			return AppendReserveBatch(b, at(0), []Reserve{rsv("a", 1, 0, ""), rsv("a", 0, 0, "")})
		}, "(reserve 1 of 2 in the batch)"},
	}
	for _, tt := range tests {
		b, err := tt.fn(prefix)
		if err == nil || !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want ErrInvalidCommand containing %q", tt.desc, err, tt.want)
		}
		if string(b) != "keep" {
			t.Errorf("%s: returned b = %q, want it unchanged", tt.desc, b)
		}
	}
}

func TestAppendReserveBatchDoesNotAllocate(t *testing.T) {
	rs := make([]Reserve, 64)
	for i := range rs {
		rs[i] = rsv("api.search", 1, sec, "request-0123456789")
	}
	buf := make([]byte, 0, 64<<10)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if _, err = AppendReserveBatch(buf[:0], at(1), rs); err != nil {
			t.Fatal(err)
		}
		_ = AppendNoop(buf[:0], at(1))
		if _, err = AppendDelete(buf[:0], at(1), DeleteLimit{Name: "x"}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("appending into a large enough buffer allocates %v times, want 0", allocs)
	}
}

func TestDecodeRejects(t *testing.T) {
	valid, err := AppendReserveBatch(nil, at(5), []Reserve{rsv("a", 1, 0, "x")})
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(typ CommandType) []byte { return appendHeader(nil, typ, at(5)) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	uv := func(v uint64) []byte { return binary.AppendUvarint(nil, v) }
	str := func(s string) []byte { return appendBytes(nil, s) }
	tests := []decodeReject{
		{"empty", nil, false, "command type: truncated"},
		{"only type", []byte{3}, false, "encoding version: truncated"},
		{"unknown type 0", []byte{0, 2, 0, 0, 0, 0, 0, 0, 0, 0}, false, "unknown command type 0"},
		{"unknown type 17", []byte{17, 2, 0, 0, 0, 0, 0, 0, 0, 0}, false, "unknown command type 17"},
		{"bad version", []byte{4, 3, 0, 0, 0, 0, 0, 0, 0, 0}, false, "encoding version 3"},
		{"version 1 of an older permitd", []byte{4, 1, 0, 0, 0, 0, 0, 0, 0, 0}, false, "encoding version 1"},
		{"short timestamp", []byte{4, 4, 0, 0}, false, "timestamp: truncated"},
		{"short stamp term", []byte{4, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0}, false, "stamp term: truncated"},
		{"noop trailing", append(hdr(CmdNoop), 0), false, "1 trailing bytes"},
		{"batch trailing", append(bytes.Clone(valid), 7), false, "1 trailing bytes"},
		{"batch truncated", valid[:len(valid)-1], false, "truncated"},
		{"batch count 0", cat(hdr(CmdReserveBatch), uv(0)), true, "batch of 0 reserves"},
		{"batch count huge", cat(hdr(CmdReserveBatch), uv(1<<40)), true, "batch of 1099511627776 reserves"},
		{"count larger than data", cat(hdr(CmdReserveBatch), uv(65536), str("a"), uv(1), uv(0), uv(0), []byte{0}), false, "reserve 1: limit name length: truncated"},
		{"non-canonical varint", cat(hdr(CmdReserveBatch), []byte{0x81, 0x00}, str("a"), uv(1), uv(0), uv(0), []byte{0}), false, "not in shortest form"},
		{"varint overflow", cat(hdr(CmdReserveBatch), bytes.Repeat([]byte{0xff}, 10), []byte{1}), false, "overflows 64 bits"},
		{"zero permits", cat(hdr(CmdReserveBatch), uv(1), str("a"), uv(0), uv(0), uv(0), []byte{0}), true, "0 permits"},
		{"permits over int64", cat(hdr(CmdReserveBatch), uv(1), str("a"), uv(math.MaxUint64), uv(0), uv(0), []byte{0}), true, "int64 range"},
		{"arrival past int64", cat(hdr(CmdReserveBatch), uv(1), str("a"), uv(1), uv(0), uv(math.MaxInt64), []byte{0}), true, "int64 range"},
		{"bad name", cat(hdr(CmdReserveBatch), uv(1), str("a b"), uv(1), uv(0), uv(0), []byte{0}), true, `limit name "a b"`},
		{"empty name", cat(hdr(CmdDeleteLimit), str("")), true, "limit name is 0 bytes"},
		{"long name", cat(hdr(CmdDeleteLimit), str(strings.Repeat("n", 129))), false, "length 129"},
		{"long id", cat(hdr(CmdReserveBatch), uv(1), str("a"), uv(1), uv(0), uv(0), []byte{1}, str(strings.Repeat("i", 65))), false, "request id: length 65"},
		{"empty id with key 1", cat(hdr(CmdReserveBatch), uv(1), str("a"), uv(1), uv(0), uv(0), []byte{1}, str("")), false, "empty request id"},
		{"unknown key", cat(hdr(CmdReserveBatch), uv(1), str("a"), uv(1), uv(0), uv(0), []byte{4}), false, "key byte 4"},
		{"session 0", cat(hdr(CmdReserveBatch), uv(1), str("a"), uv(1), uv(0), uv(0), []byte{2}, uv(0), uv(1), uv(1)), false, "session id 0"},
		{"session acked above seq", cat(hdr(CmdReserveBatch), uv(1), str("a"), uv(1), uv(0), uv(0), []byte{2}, uv(4), uv(1), uv(2)), true, "1 <= acked below <= seq"},
		{"session seq 0", cat(hdr(CmdReserveBatch), uv(1), str("a"), uv(1), uv(0), uv(0), []byte{2}, uv(4), uv(0), uv(0)), true, "1 <= acked below <= seq"},
		{"owned session, empty owner", cat(hdr(CmdReserveBatch), uv(1), str("a"), uv(1), uv(0), uv(0), []byte{3}, uv(4), uv(1), uv(1), str("")), false, "empty owner after key byte 3"},
		{"owned session, long owner", cat(hdr(CmdReserveBatch), uv(1), str("a"), uv(1), uv(0), uv(0), []byte{3}, uv(4), uv(1), uv(1), str(strings.Repeat("o", MaxOwnerLen+1))), false, "owner: length 129"},
		{"owned session, no owner", cat(hdr(CmdReserveBatch), uv(1), str("a"), uv(1), uv(0), uv(0), []byte{3}, uv(4), uv(1), uv(1)), false, "owner length: truncated"},
		{"owned session 0", cat(hdr(CmdReserveBatch), uv(1), str("a"), uv(1), uv(0), uv(0), []byte{3}, uv(0), uv(1), uv(1), str("o")), false, "session id 0 after key byte 3"},
		{"owned session, reservation form", cat(hdr(CmdReserveBatch), uv(1), str("a"), uv(1), uv(0), uv(0), []byte{0x83}, uv(4), uv(1), uv(1), str("o")), false, "key byte 131"},
		{"session, reservation form", cat(hdr(CmdReserveBatch), uv(1), str("a"), uv(1), uv(0), uv(0), []byte{0x82}, uv(4), uv(1), uv(1)), false, "key byte 130"},
		{"put garbage config", cat(hdr(CmdPutLimit), str("a"), str("garbage")), true, `limit "a": config`},
		{"put empty config", cat(hdr(CmdPutLimit), str("a"), uv(0)), true, `limit "a": config`},
	}
	checkDecodeRejects(t, tests)
}

// decodeReject is an encoding Decode must reject: with ErrInvalidCommand
// if invalid, else ErrDecode, in an error that contains want.
type decodeReject struct {
	desc    string
	b       []byte
	invalid bool // ErrInvalidCommand rather than ErrDecode
	want    string
}

// checkDecodeRejects checks that Decode rejects each of tests with the
// error it names ("fsm: "-prefixed) and returns the zero Entry with it.
func checkDecodeRejects(t *testing.T, tests []decodeReject) {
	t.Helper()
	for _, tt := range tests {
		e, err := Decode(tt.b)
		if err == nil {
			t.Errorf("%s: Decode(%x) = %+v, want error", tt.desc, tt.b, e)
			continue
		}
		want := ErrDecode
		if tt.invalid {
			want = ErrInvalidCommand
		}
		if !errors.Is(err, want) || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "fsm: ") {
			t.Errorf("%s: Decode error %q, want %v containing %q", tt.desc, err, want, tt.want)
		}
		if !reflect.DeepEqual(e, Entry{}) {
			t.Errorf("%s: Decode returned %+v with its error, want zero Entry", tt.desc, e)
		}
	}
}
