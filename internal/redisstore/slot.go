package redisstore

import "strings"

// slots is the number of hash slots of a Redis Cluster.
const slots = 16384

// slot returns the hash slot of key in a Redis Cluster: CRC16 of its hash
// tag (what is between its first '{' and the first '}' after it, when
// not empty), or of the whole key without one, mod 16384.
func slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) % slots
}

// crcTable is CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0),
// the CRC16 of Redis Cluster, a byte at a time.
var crcTable = func() (t [256]uint16) {
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

func crc16(s string) (crc uint16) {
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^s[i]]
	}
	return crc
}
