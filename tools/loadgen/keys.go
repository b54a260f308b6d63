package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/bits"
	"os"
	"sync/atomic"
)

// keySet is a set of keys in [0, n): a bitmap of n bits (125 KB for a
// million keys), shared by the workers. A worker reads a key's word before
// setting its bit, so that a key drawn over and over (Zipf's key 0) costs
// reads of a shared cache line, not writes.
type keySet struct {
	n     int
	words []atomic.Uint64
}

func newKeySet(n int) *keySet {
	return &keySet{n: n, words: make([]atomic.Uint64, (n+63)/64)}
}

func (s *keySet) add(k int) {
	w, bit := &s.words[k/64], uint64(1)<<(k%64)
	if w.Load()&bit == 0 {
		w.Or(bit)
	}
}

func (s *keySet) count() int64 {
	var c int
	for i := range s.words {
		c += bits.OnesCount64(s.words[i].Load())
	}
	return int64(c)
}

// union adds the keys of o, a set of the same size, to s.
func (s *keySet) union(o *keySet) {
	for i := range s.words {
		s.words[i].Or(o.words[i].Load())
	}
}

// The file of -seen: a header line naming the number of keys, then the
// bitmap, 8 bytes per 64 keys, little-endian.
const seenHeader = "loadgen seen keys v1 %d\n"

// readSeen reads the set of keys in path, written by an earlier run with
// the same -keys; a missing file is an empty set.
func readSeen(path string, n int) (*keySet, error) {
	s := newKeySet(n)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("-seen: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var keys int
	if _, err := fmt.Fscanf(r, seenHeader, &keys); err != nil {
		return nil, fmt.Errorf("-seen %s: not a file of keys seen: %v", path, err)
	}
	if keys != n {
		return nil, fmt.Errorf("-seen %s: written with -keys %d, not %d", path, keys, n)
	}
	var b [8]byte
	for i := range s.words {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("-seen %s: %v", path, err)
		}
		s.words[i].Store(binary.LittleEndian.Uint64(b[:]))
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("-seen %s: longer than %d keys", path, n)
	}
	return s, nil
}

// write replaces path with s: written beside it, then renamed.
func (s *keySet) write(path string) error {
	b := fmt.Appendf(nil, seenHeader, s.n)
	for i := range s.words {
		b = binary.LittleEndian.AppendUint64(b, s.words[i].Load())
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("-seen: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("-seen: %w", err)
	}
	return nil
}
