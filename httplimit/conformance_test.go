package httplimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// conformanceFile is the field table the Go, Python and Node front doors
// all pass (clients/conformance/README.md describes it).
const conformanceFile = "../clients/conformance/fields.json"

type conformanceCase struct {
	Name     string `json:"name"`
	Policies []struct {
		Name      string `json:"name"`
		Algorithm string `json:"algorithm"`
		Burst     int64  `json:"burst"`
		Count     int64  `json:"count"`
		PeriodMS  int64  `json:"period_ms"`
	} `json:"policies"`
	Legacy   bool            `json:"legacy"`
	Key      string          `json:"key"`
	Quantity int64           `json:"quantity"`
	Reply    json.RawMessage `json:"reply"`
	CachedMS *int64          `json:"cached_ms"`
	Expect   struct {
		Command []string          `json:"command"`
		Error   string            `json:"error"`
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
		Absent  []string          `json:"absent"`
		Body    map[string]any    `json:"body"`
	} `json:"expect"`
}

// algorithms maps the table's algorithm names (Algorithm.String) back.
func algorithmNamed(name string) (Algorithm, error) {
	for a := GCRA; a <= SlidingLog; a++ {
		if a.String() == name {
			return a, nil
		}
	}
	return 0, fmt.Errorf("unknown algorithm %q", name)
}

// replyValue turns the JSON reply into what go-redis delivers: integers
// as int64, arrays as []any, strings as string.
func replyValue(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var conv func(any) (any, error)
	conv = func(v any) (any, error) {
		switch x := v.(type) {
		case json.Number:
			return x.Int64()
		case []any:
			out := make([]any, len(x))
			for i := range x {
				var err error
				if out[i], err = conv(x[i]); err != nil {
					return nil, err
				}
			}
			return out, nil
		case string, nil:
			return x, nil
		}
		return nil, fmt.Errorf("reply holds %T", v)
	}
	return conv(v)
}

func loadConformance(t *testing.T) []conformanceCase {
	t.Helper()
	b, err := os.ReadFile(conformanceFile)
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Version int               `json:"version"`
		Cases   []conformanceCase `json:"cases"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&table); err != nil {
		t.Fatalf("%s: %v", conformanceFile, err)
	}
	if len(table.Cases) == 0 {
		t.Fatalf("%s: no cases", conformanceFile)
	}
	return table.Cases
}

// TestConformanceFields runs the shared field table: each case's policies
// build a limiter, which must send the expected command; its reply goes
// through the reply parser (and the deny cache's ageing when cached_ms is
// given) and the middleware's field and body writer, which must give the
// expected status, fields and body.
func TestConformanceFields(t *testing.T) {
	for _, tc := range loadConformance(t) {
		t.Run(tc.Name, func(t *testing.T) {
			var policies []Policy
			for _, p := range tc.Policies {
				a, err := algorithmNamed(p.Algorithm)
				if err != nil {
					t.Fatal(err)
				}
				policies = append(policies, Policy{Name: p.Name, Algorithm: a, Burst: p.Burst, Count: p.Count, Period: time.Duration(p.PeriodMS) * time.Millisecond})
			}
			cs, err := compileAll(policies)
			if err != nil {
				t.Fatal(err)
			}
			l := &Limiter{policies: cs}
			var cmd []string
			for _, a := range l.command(tc.Key, tc.Quantity) {
				cmd = append(cmd, fmt.Sprint(a))
			}
			if !reflect.DeepEqual(cmd, tc.Expect.Command) {
				t.Errorf("command = %q, want %q", cmd, tc.Expect.Command)
			}
			reply, err := replyValue(tc.Reply)
			if err != nil {
				t.Fatal(err)
			}
			d, err := l.parse(reply)
			if tc.Expect.Error != "" {
				if tc.Expect.Error != "bad_reply" {
					t.Fatalf("unknown expected error %q", tc.Expect.Error)
				}
				if !errors.Is(err, ErrBadReply) {
					t.Errorf("parse(%s) = %+v, %v; want ErrBadReply", tc.Reply, d, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%s): %v", tc.Reply, err)
			}
			if tc.CachedMS != nil {
				// As the deny cache answers: cached, then read cachedMS later.
				now := time.Unix(1_700_000_000, 0)
				c := newDenyCache(DefaultDenyCacheMax, DenyCacheEntries, func() time.Time { return now })
				c.put(tc.Key, tc.Quantity, d)
				now = now.Add(time.Duration(*tc.CachedMS) * time.Millisecond)
				var ok bool
				if d, ok = c.get(tc.Key, tc.Quantity); !ok {
					t.Fatalf("the deny cache does not hold the refusal %v later", now)
				}
			}
			m := &middleware{limiter: l, cfg: config{ietf: true, legacy: tc.Legacy}, policyField: l.PolicyField()}
			next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
			w := httptest.NewRecorder()
			m.answer(next, w, httptest.NewRequest(http.MethodGet, "/", nil), d)
			if w.Code != tc.Expect.Status {
				t.Errorf("status = %d, want %d", w.Code, tc.Expect.Status)
			}
			for name, want := range tc.Expect.Headers {
				if got := w.Header().Values(name); len(got) != 1 || got[0] != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			for _, name := range tc.Expect.Absent {
				if got, ok := w.Header()[http.CanonicalHeaderKey(name)]; ok {
					t.Errorf("%s = %q, want it absent", name, got)
				}
			}
			if tc.Expect.Body != nil {
				if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
					t.Errorf("Content-Type = %q, want application/problem+json", ct)
				}
				var body map[string]any
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
					t.Fatalf("body %q: %v", w.Body, err)
				}
				if !reflect.DeepEqual(body, tc.Expect.Body) {
					t.Errorf("body = %v, want %v", body, tc.Expect.Body)
				}
			}
		})
	}
}
