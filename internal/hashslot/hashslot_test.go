package hashslot

import "testing"

func TestCRC16(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint16
	}{
		{"123456789", 0x31C3}, // the CRC16-XMODEM check value Redis's crc16.c cites
		{"", 0},
		{"A", 0x58E5},
	} {
		if got := CRC16([]byte(tc.in)); got != tc.want {
			t.Errorf("CRC16(%q) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
}

func TestOf(t *testing.T) {
	whole := func(s string) int { return int(CRC16([]byte(s)) % 16384) }
	for _, tc := range []struct {
		key  string
		want int
	}{
		{"foo", 12182}, // Redis: CLUSTER KEYSLOT foo
		{"bar", 5061},
		{"hello", 866},
		{"somekey", 11058},
		{"", 0},
		{"{user1000}.following", whole("user1000")},
		{"{user1000}.followers", whole("user1000")},
		{"foo{}{bar}", whole("foo{}{bar}")}, // empty first tag: the whole key
		{"foo{{bar}}zap", whole("{bar")},    // first '{', first '}' after it
		{"foo{bar}{zap}", whole("bar")},
		{"{", whole("{")},
		{"}{", whole("}{")},
		{"a{b", whole("a{b")},
	} {
		if got := Of([]byte(tc.key)); got != tc.want {
			t.Errorf("Of(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
	if Of([]byte("{user1000}.following")) != 3443 {
		t.Errorf("Of({user1000}.following) = %d, want 3443 (Redis)", Of([]byte("{user1000}.following")))
	}
}
