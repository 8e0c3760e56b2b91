// Package hashslot computes Redis Cluster hash slots: CRC16-XMODEM
// (polynomial 0x1021, initial value 0, no reflection) of a key, or of its
// hash tag, modulo 16384, exactly as Redis does (Of("foo") = 12182).
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages, so any layer may use it (the rule
// is checked by internal/layers).
package hashslot

// Count is the number of hash slots of the Redis Cluster protocol.
const Count = 16384

// crc16Table is the byte-wise lookup table of CRC16-XMODEM.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// CRC16 returns the CRC16-XMODEM of b ("123456789" gives 0x31C3).
func CRC16(b []byte) uint16 {
	var c uint16
	for _, x := range b {
		c = c<<8 ^ crc16Table[byte(c>>8)^x]
	}
	return c
}

// Of returns key's hash slot, in [0, Count). Redis's hash-tag rule: when
// key holds a '{' followed later by a '}' with at least one byte between
// the first '{' and the first '}' after it, only those bytes are hashed;
// otherwise the whole key is.
func Of(key []byte) int {
	for i, x := range key {
		if x != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				break
			}
		}
		break
	}
	return int(CRC16(key) & (Count - 1))
}
