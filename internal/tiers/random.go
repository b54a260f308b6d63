package tiers

import (
	"crypto/rand"
	"fmt"
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// RandomBase62 returns n base62 characters from crypto/rand, each uniform
// (bytes of 248 and above are drawn again: 248 = 4·62).
func RandomBase62(n int) (string, error) {
	out := make([]byte, 0, n)
	var buf [64]byte
	for len(out) < n {
		if _, err := rand.Read(buf[:]); err != nil {
			return "", fmt.Errorf("read random bytes: %w", err)
		}
		for _, b := range buf {
			if b < 248 && len(out) < n {
				out = append(out, base62[b%62])
			}
		}
	}
	return string(out), nil
}

// NewRandomID returns prefix and n random base62 characters: the ids of
// API keys and grants. what names the id in an error.
func NewRandomID(prefix string, n int, what string) (string, error) {
	s, err := RandomBase62(n)
	if err != nil {
		return "", fmt.Errorf("generate %s id: %w", what, err)
	}
	return prefix + s, nil
}

// ValidRandomID reports whether s has the shape of an id NewRandomID made
// with prefix and n: prefix, then n to 64 base62 characters.
func ValidRandomID(s, prefix string, n int) bool {
	if len(s) < len(prefix)+n || len(s) > len(prefix)+64 || s[:len(prefix)] != prefix {
		return false
	}
	for i := len(prefix); i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}
