package test

import (
	"testing"
)

// TestConfigSetQuoting: CONFIG SET of a list-valued setting reads its
// value with the configuration file's quoting (redis.conf's: escapes in
// double quotes), so a pattern holding a space or a quote is one word, and
// CONFIG GET writes it back the same way (issue 27, case 7).
func TestConfigSetQuoting(t *testing.T) {
	s := startServer(t, "--save", "")
	c := s.client(t, 2)
	ctx := ctxT(t)
	tests := []struct {
		name, value, get string
	}{
		{"limit-shadow", `"try \"a\"*" 'b c*'`, `"try \"a\"*" "b c*"`},
		{"metrics-class", `quoted "x \"y\"*" spaced 'p q*'`, `quoted "x \"y\"*" spaced "p q*"`},
		{"limit-override", `"vip *" 5 1 60`, `"vip *" 5 1 60`},
	}
	for _, tc := range tests {
		if err := c.ConfigSet(ctx, tc.name, tc.value).Err(); err != nil {
			t.Errorf("CONFIG SET %s %s: %v", tc.name, tc.value, err)
			continue
		}
		got, err := c.ConfigGet(ctx, tc.name).Result()
		if err != nil || got[tc.name] != tc.get {
			t.Errorf("CONFIG GET %s = %q, %v; want %s", tc.name, got[tc.name], err, tc.get)
		}
	}
	// The shadow pattern with quotes matches its key: a refused request
	// is answered allowed.
	for i := 0; i < 2; i++ {
		r, err := c.Do(ctx, "CL.THROTTLE", `try "a"1`, 0, 1, 60).Slice()
		if err != nil || r[0] != int64(0) {
			t.Fatalf("CL.THROTTLE under limit-shadow, call %d = %v, %v; want allowed", i+1, r, err)
		}
	}
	// The override with a space in its pattern applies: limit 6.
	if r, err := c.Do(ctx, "CL.THROTTLE", "vip 1", 0, 1, 60).Slice(); err != nil || r[1] != int64(6) {
		t.Errorf("CL.THROTTLE under limit-override = %v, %v; want limit 6", r, err)
	}
}
